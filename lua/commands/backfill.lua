-- backfill.create, backfill.get, backfill.list, backfill.due, backfill.submit, backfill.resume,
-- backfill.skip, backfill.cancel, backfill.runs: one run per past schedule tick, submitted a few
-- at a time as earlier ones finish (ours).
--
--   backfill.create  id, record JSON, source, ticks JSON, run_ids JSON -> 'created' | 'exists'
--   backfill.get     id, [with_source]                     -> JSON backfill (below) with `active`
--                                                             (its runs still active) and
--                                                             `pending`, or nil
--   backfill.list    [offset=0], [count=100]               -> JSON list of backfills, newest first
--                                                             (without source and definition)
--   backfill.due     [count=100], [id]                     -> JSON list {id, flow, next, ticks,
--                                                             runs, statuses, hash, definition,
--                                                             source} of the active backfills
--                                                             (or just `id`) that may submit
--                                                             runs now
--   backfill.submit  id, index, run_id, run JSON, jobs JSON -> 'submitted' | 'resumed' | 'exists' |
--                                                             'skipped' | 'conflict' | 'done' |
--                                                             'canceled'
--   backfill.resume  id, index, run_id                     -> 'resumed' | 'exists' | 'missing' |
--                                                             'skipped' | 'conflict' | 'done' |
--                                                             'canceled'
--   backfill.skip    id, index, reason                     -> 'skipped' | 'conflict' | 'done' |
--                                                             'canceled'
--   backfill.cancel  id                                    -> JSON {state, changed, runs, jobs,
--                                                             pending}
--   backfill.runs    run_id...                             -> JSON list of each run's status
--                                                             (Runs.status; 'missing': none)
--
-- A backfill is the hash `backfill:<id>`: id, flow, definition (the schedule's, JSON text),
-- source (the flow file's text), hash, file, first and last (its first and last tick), from
-- and to (the range asked for, when given), total (ticks), next (index of the first tick not handled yet), max_active (its own limit of active
-- runs, 0: none), flow_max (the flow's concurrency.max_active_runs, 0: none), state (active,
-- done, canceled), created, updated, submitted, resumed, existed, failed, last_error, canceled,
-- params (the runs' params given to the backfill, JSON text; its definition holds them too). Its
-- ticks, oldest first, are the list `backfill:<id>-ticks` (exact '%.17g' text), their run ids
-- the list `backfill:<id>-runs`; the runs it submitted or resumed that may still be active are
-- the set `backfill:<id>-active`. `backfills` holds every id, `backfills-active` the active ones, both
-- scored by creation time.
--
-- The engine knows no cron: the caller enumerates the ticks and names their runs
-- (scheduler/service/backfills.py) and builds each run. backfill.due first forgets the runs
-- that ended and moves past the next ticks whose run exists already and is not canceled
-- (counted as `existed`, at most SKIP_EXISTING a call: they take no slot), then offers each
-- active backfill its next ticks, as many as its limits leave room for: `max_active` minus its
-- active runs, and `flow_max` minus the flow's active runs (its own, and those among the flow's
-- FLOW_LOOK newest runs, started by the schedule, `flows run` or another backfill), each with
-- its run's status (`statuses`: RunState.status, 'missing' when it has none). Without either
-- limit it offers DUE_TICKS ticks a call. A backfill whose ticks are all handled and whose runs
-- all ended becomes `done`.
-- A tick whose run exists and is `canceled` (the one decider's word, include/run_state.lua:
-- canceled by `flows cancel`, a backfill's cancel, ...) is a tick still to run: it takes a
-- slot as a new run does, and its run is resumed as run.retry resumes it (RunState.retry: the
-- jobs its cancel kept are put back as they were first put, its failed ones retried), then
-- counts as one of the backfill's active runs (`resumed`). A run that ended otherwise
-- (succeeded, failed, ...) ran: its tick is passed over.
-- backfill.submit and backfill.resume are a compare-and-set on `next`: each handles tick
-- `index` only when that is the next one (else 'conflict', nothing written), so two services
-- advancing the same backfill never handle a tick twice. backfill.submit submits the run as
-- flow.submit does; backfill.resume is for a tick whose run exists and needs no run built. At
-- the call, a run that exists canceled is resumed ('resumed'; one that keeps nothing to put
-- back is handed over as failed, 'skipped'); a run that exists otherwise (the tick ran on
-- schedule meanwhile) is not run again: 'exists', counted, the tick is handled; and
-- backfill.resume of a run that no longer exists writes nothing ('missing': the next
-- backfill.due offers the tick to be submitted). `run_id` must be the run id at `index`,
-- `run.tick` its tick.
-- backfill.skip hands a tick over without a run (its run could not be built), keeping `reason`.
-- backfill.cancel stops a backfill: no further tick is submitted and its active runs are
-- canceled (Runs.cancel). Canceling a backfill that is no longer active changes nothing
-- (`changed` false, `state` what it is).
-- Errors: INVALID, TOOLARGE, NOTFOUND.
-- @include args
-- @include json_text
-- @include runs
-- @include run_state
-- @include schedules
-- @include commands/run_admin

local Backfill = {}
Backfill.MAX_TICKS = 10000
Backfill.MAX_LIMIT = 10000
Backfill.DUE_TICKS = 100
Backfill.FLOW_LOOK = 20
Backfill.SKIP_EXISTING = 1000
Backfill.MAX_REASON_BYTES = 1024
Backfill.SUFFIXES = { '-ticks', '-runs', '-active' }

function Keys.backfill(id) return Engine.prefix .. 'backfill:' .. id end
function Keys.backfill_ticks(id) return Engine.prefix .. 'backfill:' .. id .. '-ticks' end
function Keys.backfill_runs(id) return Engine.prefix .. 'backfill:' .. id .. '-runs' end
function Keys.backfill_active(id) return Engine.prefix .. 'backfill:' .. id .. '-active' end
function Keys.backfills() return Engine.prefix .. 'backfills' end
function Keys.backfills_active() return Engine.prefix .. 'backfills-active' end

-- A backfill id: an id that does not end in a suffix of the key layout.
function Backfill.id(cmd, value)
  Arg.id(cmd, 'id', value)
  for _, suffix in ipairs(Backfill.SUFFIXES) do
    if #value >= #suffix and string.sub(value, -#suffix) == suffix then
      Arg.fail(cmd, 'Arg "id" may not end in "' .. suffix .. '" (reserved by the key layout): ' .. value)
    end
  end
  return value
end

function Backfill.limit(cmd, name, value)
  if value == nil then return 0 end
  if type(value) ~= 'number' or value ~= math.floor(value) or value < 0 or value > Backfill.MAX_LIMIT then
    Arg.fail(cmd, 'record.' .. name .. ' must be an integer from 0 to ' .. Backfill.MAX_LIMIT)
  end
  return value
end

function Backfill.finite(value)
  return type(value) == 'number' and value == value and value ~= math.huge and value ~= -math.huge
end

api['backfill.create'] = function(args)
  local cmd = 'BackfillCreate'
  local id = Backfill.id(cmd, args[1])
  local _, record = Arg.json(cmd, 'record', args[2], 'object', Schedules.MAX_DEFINITION_BYTES)
  if type(record.flow) ~= 'string' then Arg.fail(cmd, 'record.flow must be a string') end
  Arg.name(cmd, 'record.flow', record.flow)
  if type(record.definition) ~= 'table' then Arg.fail(cmd, 'record.definition must be an object') end
  if type(record.hash) ~= 'string' then Arg.fail(cmd, 'record.hash must be a string') end
  local file = record.file
  if file == nil or file == cjson.null then file = '' end
  if type(file) ~= 'string' then Arg.fail(cmd, 'record.file must be a string') end
  local max_active = Backfill.limit(cmd, 'max_active', record.max_active)
  local flow_max = Backfill.limit(cmd, 'flow_max', record.flow_max)
  local source = Arg.text(cmd, 'source', args[3], Schedules.MAX_SOURCE_BYTES)
  -- As given when cjson would not write it again exactly (a number past 14 digits in params).
  local members = JsonText.members(args[2])
  local definition = JsonText.exact(record.definition) and cjson.encode(record.definition)
    or members.definition
  -- The params every run of it has (`flows backfill -p`), kept as given to be listed.
  local params = '{}'
  if record.params ~= nil and record.params ~= cjson.null then
    if type(record.params) ~= 'table' or string.sub(members.params, 1, 1) ~= '{' then
      Arg.fail(cmd, 'record.params must be an object')
    end
    params = members.params
  end
  local _, ticks = Arg.json(cmd, 'ticks', args[4], 'array')
  if #ticks == 0 then Arg.fail(cmd, 'a backfill needs at least one tick') end
  if #ticks > Backfill.MAX_TICKS then
    Err.raise('TOOLARGE', cmd .. '(): ' .. #ticks .. ' ticks, more than the limit of ' .. Backfill.MAX_TICKS)
  end
  local texts = {}
  for i, tick in ipairs(ticks) do
    if not Backfill.finite(tick) or tick < 0 then Arg.fail(cmd, 'ticks[' .. i .. '] is not a time: ' .. Arg.shown(tick)) end
    if i > 1 and tick <= ticks[i - 1] then Arg.fail(cmd, 'ticks must be in ascending order (ticks[' .. i .. '])') end
    texts[i] = Schedules.time(tick)
  end
  local _, run_ids = Arg.json(cmd, 'run_ids', args[5], 'array')
  if #run_ids ~= #ticks then Arg.fail(cmd, 'run_ids must name one run per tick') end
  for i, run_id in ipairs(run_ids) do
    if type(run_id) ~= 'string' then Arg.fail(cmd, 'run_ids[' .. i .. '] must be a string') end
    Runs.id(cmd, run_id, 'run_ids[' .. i .. ']')
  end
  if redis.call('exists', Keys.backfill(id)) == 1 then return 'exists' end

  redis.call('hset', Keys.backfill(id), 'id', id, 'flow', record.flow,
    'definition', definition, 'source', source, 'hash', record.hash,
    'file', file, 'first', Schedules.time(ticks[1]),
    'last', Schedules.time(ticks[#ticks]), 'total', #ticks, 'next', 0, 'max_active', max_active,
    'flow_max', flow_max, 'state', 'active', 'created', Engine.now, 'updated', Engine.now,
    'submitted', 0, 'resumed', 0, 'existed', 0, 'failed', 0, 'params', params)
  if Backfill.finite(record.from) then redis.call('hset', Keys.backfill(id), 'from', Schedules.time(record.from)) end
  if Backfill.finite(record.to) then redis.call('hset', Keys.backfill(id), 'to', Schedules.time(record.to)) end
  Engine.call_many('rpush', Keys.backfill_ticks(id), texts)
  Engine.call_many('rpush', Keys.backfill_runs(id), run_ids)
  redis.call('zadd', Keys.backfills(), Engine.now, id)
  redis.call('zadd', Keys.backfills_active(), Engine.now, id)
  Events.log({ event = 'backfill_created', backfill = id, flow = record.flow, ticks = #ticks })
  return 'created'
end

Backfill.NUMBERS = { 'total', 'next', 'max_active', 'flow_max', 'submitted', 'resumed', 'existed',
  'failed', 'created', 'updated', 'first', 'last', 'from', 'to', 'canceled' }
Backfill.TEXTS = { 'id', 'flow', 'hash', 'file', 'state', 'last_error', 'params' }

-- The backfill's fields (the source and definition, which may be large, only `with_source`).
function Backfill.load(id, with_source)
  local fields = {}
  for _, field in ipairs(Backfill.TEXTS) do table.insert(fields, field) end
  for _, field in ipairs(Backfill.NUMBERS) do table.insert(fields, field) end
  if with_source then
    table.insert(fields, 'source')
    table.insert(fields, 'definition')
  end
  local values = redis.call('hmget', Keys.backfill(id), unpack(fields))
  if not values[1] then return nil end
  local b = {}
  for i, field in ipairs(fields) do
    local value = values[i]
    if value and i > #Backfill.TEXTS and i <= #Backfill.TEXTS + #Backfill.NUMBERS then
      value = tonumber(value)
    end
    if value then b[field] = value end
  end
  return b
end

-- The set keeps a run until backfill.due forgets it; a read leaves the set alone and says
-- only which of its runs are still active, so an ended run is not shown taking a slot.
function Backfill.describe(b)
  b.pending = b.total - b.next
  local active = {}
  for _, run_id in ipairs(redis.call('smembers', Keys.backfill_active(b.id))) do
    if Runs.active(run_id) then table.insert(active, run_id) end
  end
  table.sort(active)
  b.active = active
  return b
end

api['backfill.get'] = function(args)
  local cmd = 'BackfillGet'
  local id = Backfill.id(cmd, args[1])
  local b = Backfill.load(id, args[2] == '1')
  if not b then return nil end
  return cjson.encode(Backfill.describe(b))
end

api['backfill.list'] = function(args)
  local cmd = 'BackfillList'
  local offset = Arg.optional_integer(cmd, 'offset', args[1], 0, 0, Engine.MAX_OFFSET)
  local count = Arg.optional_integer(cmd, 'count', args[2], 100, 0, 1000)
  local out = {}
  if count > 0 then
    for _, id in ipairs(redis.call('zrevrange', Keys.backfills(), offset, offset + count - 1)) do
      local b = Backfill.load(id, false)
      if b then table.insert(out, Backfill.describe(b)) end
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

-- Its runs still active, after forgetting those that ended.
function Backfill.prune(id)
  local key = Keys.backfill_active(id)
  local active = {}
  for _, run_id in ipairs(redis.call('smembers', key)) do
    if Runs.active(run_id) then active[run_id] = true else redis.call('srem', key, run_id) end
  end
  return active
end

function Backfill.count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

-- How many more runs the flow's max_active_runs allows, its own `active` runs included.
function Backfill.flow_room(b, active)
  local running = Backfill.count(active)
  for _, run_id in ipairs(redis.call('zrevrange', Keys.flow_runs(b.flow), 0, Backfill.FLOW_LOOK - 1)) do
    if not active[run_id] and Runs.active(run_id) then running = running + 1 end
  end
  return b.flow_max - running
end

function Backfill.finish(b, state)
  redis.call('hset', Keys.backfill(b.id), 'state', state, 'updated', Engine.now)
  redis.call('zrem', Keys.backfills_active(), b.id)
end

api['backfill.due'] = function(args)
  local cmd = 'BackfillDue'
  local count_arg = Arg.optional_integer(cmd, 'count', args[1], 100, 1, 1000)
  local ids
  if args[2] ~= nil and args[2] ~= '' then
    ids = { Backfill.id(cmd, args[2]) }
  else
    ids = redis.call('zrange', Keys.backfills_active(), 0, count_arg - 1)
  end
  local out = {}
  for _, id in ipairs(ids) do
    local b = Backfill.load(id, false)
    if b and b.state == 'active' then
      local active = Backfill.prune(id)
      Backfill.skip_existing(b)
      local room = math.min(b.total - b.next, Backfill.DUE_TICKS)
      if b.max_active > 0 then room = math.min(room, b.max_active - Backfill.count(active)) end
      if b.flow_max > 0 and room > 0 then room = math.min(room, Backfill.flow_room(b, active)) end
      if b.next >= b.total and next(active) == nil then
        Backfill.finish(b, 'done')
        Events.log({ event = 'backfill_done', backfill = id, flow = b.flow,
          submitted = b.submitted, resumed = b.resumed or 0, existed = b.existed,
          failed = b.failed })
      elseif room > 0 then
        local f = redis.call('hmget', Keys.backfill(id), 'definition', 'source')
        local ticks = redis.call('lrange', Keys.backfill_ticks(id), b.next, b.next + room - 1)
        local runs = redis.call('lrange', Keys.backfill_runs(id), b.next, b.next + room - 1)
        local statuses = {}
        for i, run_id in ipairs(runs) do statuses[i] = RunState.status(run_id) end
        table.insert(out, { id = id, flow = b.flow, next = b.next, ticks = ticks, runs = runs,
          statuses = statuses, hash = b.hash, definition = f[1], source = f[2] })
      end
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

-- Whether a tick whose run has `status` is still to run: it has no run, or its run was canceled.
function Backfill.to_run(status)
  return status == 'missing' or status == 'canceled'
end

-- Move `b` past its next ticks whose run exists already and was not canceled (they ran on
-- schedule, or in an earlier backfill), a bounded number of them.
function Backfill.skip_existing(b)
  local from = b.next
  while b.next < b.total and b.next - from < Backfill.SKIP_EXISTING do
    local run_id = redis.call('lindex', Keys.backfill_runs(b.id), b.next)
    if Backfill.to_run(RunState.status(run_id)) then break end
    b.next = b.next + 1
  end
  if b.next > from then
    redis.call('hincrby', Keys.backfill(b.id), 'existed', b.next - from)
    redis.call('hset', Keys.backfill(b.id), 'next', b.next, 'updated', Engine.now)
    b.existed = b.existed + b.next - from
  end
end

-- The compare-and-set of backfill.submit and backfill.skip: the backfill when tick `index` is
-- its next one, else the reply to give.
function Backfill.claim(cmd, args)
  local id = Backfill.id(cmd, args[1])
  local index = Arg.integer(cmd, 'index', args[2], 0)
  local b = Backfill.load(id, false)
  if not b then Err.raise('NOTFOUND', cmd .. '(): no backfill ' .. id) end
  if b.state ~= 'active' then return nil, b.state end
  if b.next >= b.total then return nil, 'done' end
  if b.next ~= index then return nil, 'conflict' end
  return b, nil
end

function Backfill.handled(b, counter, ...)
  redis.call('hincrby', Keys.backfill(b.id), counter, 1)
  redis.call('hset', Keys.backfill(b.id), 'next', b.next + 1, 'updated', Engine.now, ...)
end

-- Refuse `run_id` unless it is the run id of `b`'s next tick.
function Backfill.check_run(cmd, b, run_id)
  local expected = redis.call('lindex', Keys.backfill_runs(b.id), b.next)
  if run_id ~= expected then
    Arg.fail(cmd, 'run_id must be the run id at index ' .. b.next .. ': ' .. expected)
  end
end

-- Handle `b`'s next tick, whose run exists with `status`: a canceled run is resumed as
-- run.retry resumes it and becomes one of the backfill's active runs ('resumed'; one that
-- keeps nothing to put back is handed over as failed: 'skipped'); any other ran ('exists').
function Backfill.handle_existing(b, run_id, status)
  if status ~= 'canceled' then
    Backfill.handled(b, 'existed')
    return 'exists'
  end
  local retried = RunState.retry(run_id, RunState.jids(run_id), nil)
  if not retried then
    Backfill.handled(b, 'failed', 'last_error',
      'run ' .. run_id .. ' is canceled and keeps no job to put back')
    return 'skipped'
  end
  redis.call('sadd', Keys.backfill_active(b.id), run_id)
  Backfill.handled(b, 'resumed')
  Events.log({ event = 'backfill_resumed', backfill = b.id, run = run_id, jobs = retried })
  return 'resumed'
end

api['backfill.submit'] = function(args)
  local cmd = 'BackfillSubmit'
  -- Every argument is checked before anything is written, whatever the backfill's state.
  local submission = Runs.parse(cmd, args[3], args[4], args[5])
  local b, reply = Backfill.claim(cmd, args)
  if not b then return reply end
  Backfill.check_run(cmd, b, submission.id)
  local tick = tonumber(redis.call('lindex', Keys.backfill_ticks(b.id), b.next))
  if tonumber(submission.run.tick) ~= tick then
    Arg.fail(cmd, 'run.tick must be the tick at index ' .. b.next .. ': ' .. Schedules.time(tick))
  end
  local status = RunState.status(submission.id)
  if status ~= 'missing' then return Backfill.handle_existing(b, submission.id, status) end
  Runs.write(Runs.check(cmd, submission))
  redis.call('sadd', Keys.backfill_active(b.id), submission.id)
  Backfill.handled(b, 'submitted')
  return 'submitted'
end

api['backfill.resume'] = function(args)
  local cmd = 'BackfillResume'
  local run_id = Runs.id(cmd, args[3])
  if args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local b, reply = Backfill.claim(cmd, args)
  if not b then return reply end
  Backfill.check_run(cmd, b, run_id)
  local status = RunState.status(run_id)
  if status == 'missing' then return 'missing' end
  return Backfill.handle_existing(b, run_id, status)
end

api['backfill.skip'] = function(args)
  local cmd = 'BackfillSkip'
  local reason = Arg.text(cmd, 'reason', args[3], Backfill.MAX_REASON_BYTES)
  local b, reply = Backfill.claim(cmd, args)
  if not b then return reply end
  Backfill.handled(b, 'failed', 'last_error', reason)
  return 'skipped'
end

api['backfill.cancel'] = function(args)
  local cmd = 'BackfillCancel'
  local id = Backfill.id(cmd, args[1])
  local b = Backfill.load(id, false)
  if not b then Err.raise('NOTFOUND', cmd .. '(): no backfill ' .. id) end
  if b.state ~= 'active' then
    return cjson.encode({ state = b.state, changed = false, runs = 0, jobs = 0, pending = 0 })
  end
  local runs, jobs = 0, 0
  for run_id in pairs(Backfill.prune(id)) do
    jobs = jobs + Runs.cancel(run_id, 'backfill ' .. id .. ' canceled')
    runs = runs + 1
  end
  redis.call('del', Keys.backfill_active(id))
  redis.call('hset', Keys.backfill(id), 'canceled', Engine.now)
  Backfill.finish(b, 'canceled')
  local pending = b.total - b.next
  Events.log({ event = 'backfill_canceled', backfill = id, flow = b.flow, runs = runs,
    jobs = jobs, pending = pending })
  return cjson.encode({ state = 'canceled', changed = true, runs = runs, jobs = jobs,
    pending = pending })
end

api['backfill.runs'] = function(args)
  local cmd = 'BackfillRuns'
  if #args > 1000 then Arg.fail(cmd, 'at most 1000 run ids a call') end
  local out = {}
  for i, run_id in ipairs(args) do out[i] = Runs.status(Arg.id(cmd, 'run_id', run_id)) end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end
