-- schedule.due, schedule.fire, schedule.trigger: firing cron ticks exactly once (ours).
--
--   schedule.due     [offset=0], [limit=500], [name]
--       -> JSON {due: [{name, next, hash, origin, paused, last_run, active, buffered}],
--                buffered: [{name, tick, hash, origin, last_run, active}]}
--       due: schedules whose next fire time is <= now (oldest first, a page of them);
--       buffered: schedules holding a tick back for their previous run (overlap buffer_one).
--       With `name`: schedule `name` alone, as the whole index would list it (the ticks of one
--       schedule are handled without reading every other due one).
--       `active`: whether the last run still waits, is scheduled or runs (checked only where
--       the overlap policy needs it); `origin`: the source it belongs to ('' for none: a
--       service fires only its own); times are exact text.
--   schedule.fire    name, hash, expected, next, action, tick, skips JSON,
--                    [run_id, run JSON, jobs JSON, [cancel_run_id]]
--       -> 'fired' | 'exists' | 'skipped' | 'buffered' | 'conflict'
--   schedule.trigger name, run_id, run JSON, jobs JSON  -> 'fired' | 'exists'
--
-- schedule.fire is the compare-and-set of a tick: it writes only if schedule `name` still has
-- content `hash` and score `expected` (for action 'buffered': buffered tick `expected`), else
-- replies 'conflict' having written nothing. In the same call it moves the score to `next`
-- ('' = no fire time left), records the `skips` ({first, last, count, reason}) that the move
-- passes over, and by `action`:
--   fire      submits the run of `tick` (jobs as flow.submit takes them), after canceling run
--             `cancel_run_id` when given (overlap cancel_running; it must be the last run);
--   skip      nothing more (the skipped ticks are in `skips`);
--   buffer    holds `tick` back until the last run ends (refused as 'conflict' when a tick is
--             buffered already);
--   buffered  submits the buffered tick's run and clears it (the score is left alone; `next`
--             must be '').
-- A run whose object holds `max_active_runs` (the flow's concurrency.max_active_runs) is only
-- submitted while fewer of the flow's runs are active (among its newest Runs.LIMIT_LOOK; the run
-- cancel_running cancels in the same call does not count): otherwise the overlap policy decides,
-- in this same call: buffer_one holds the tick back (reply 'buffered', unless one is held
-- already: then it is skipped), every other policy skips it (reply 'skipped'; the skip's reason
-- is 'max_active_runs'); a buffered tick stays buffered until there is room.
-- A run id that exists already is not submitted again: the reply is 'exists' and the schedule
-- moves on as if it had fired (its last run and tick are that run's), except that its `fired`
-- count is left alone: each tick's run is counted once, by the fire that made it. So two
-- services, a crash between any two steps or a restart fire a tick once: whoever moves the
-- score first fires it, everyone else gets 'conflict'.
-- schedule.trigger submits a run now, outside the cron ticks (the score is left alone); it
-- becomes the schedule's last run. At the flow's max_active_runs it is refused as flow.submit
-- refuses a run (WRONGSTATE, naming the limit and the active runs), changing nothing.
-- Errors: INVALID, TOOLARGE (the arguments, the run as flow.submit checks it), NOTFOUND
-- (trigger), WRONGSTATE (trigger at the limit).
-- @include args
-- @include runs
-- @include schedules

local ACTIONS = { fire = true, skip = true, buffer = true, buffered = true }
local SUBMITS = { fire = true, buffered = true }

local function due_entry(name, score)
  local f = redis.call('hmget', Keys.schedule(name), 'hash', 'overlap', 'paused', 'file_paused',
    'last_run', 'buffered', 'origin')
  if not f[1] then return nil end -- an index entry without its schedule: not ours to fire
  return {
    name = name, next = score, hash = f[1], origin = f[7] or '', paused = f[3] == '1' or f[4] == '1',
    last_run = f[5] or '', active = Schedules.last_run_active(f[2], f[5]), buffered = f[6] or '',
  }
end

api['schedule.due'] = function(args)
  local cmd = 'ScheduleDue'
  local offset = Arg.optional_integer(cmd, 'offset', args[1], 0, 0, Engine.MAX_OFFSET)
  local limit = Arg.optional_integer(cmd, 'limit', args[2], 500, 1, 10000)
  local name
  if args[3] ~= nil and args[3] ~= '' then name = Schedules.name(cmd, args[3]) end
  if args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local due, buffered = {}, {}
  local page
  if name then
    local score = redis.call('zscore', Keys.schedules(), name)
    page = (score and offset == 0 and tonumber(score) <= Engine.now) and { name, score } or {}
  else
    page = redis.call('zrangebyscore', Keys.schedules(), '-inf', Engine.now, 'WITHSCORES',
      'LIMIT', offset, limit)
  end
  for i = 1, #page, 2 do
    local entry = due_entry(page[i], page[i + 1])
    if entry then table.insert(due, entry) end
  end
  if name then
    local tick = redis.call('zscore', Keys.schedules_buffered(), name)
    page = tick and { name, tick } or {}
  else
    page = redis.call('zrange', Keys.schedules_buffered(), 0, limit - 1, 'WITHSCORES')
  end
  for i = 1, #page, 2 do
    local f = redis.call('hmget', Keys.schedule(page[i]), 'hash', 'last_run', 'origin')
    if f[1] then
      table.insert(buffered, { name = page[i], tick = page[i + 1], hash = f[1], last_run = f[2] or '',
        origin = f[3] or '', active = Runs.active(f[2]) })
    end
  end
  return cjson.encode({ due = due, buffered = buffered })
end

-- Checks every argument of schedule.fire; returns them as a table.
local function parse_fire(cmd, args)
  local a = {}
  a.name = Schedules.name(cmd, args[1])
  a.hash = Arg.id(cmd, 'hash', args[2])
  a.expected = Arg.number(cmd, 'expected', args[3], 0)
  a.next = Arg.optional_number(cmd, 'next', args[4], nil, 0)
  a.action = args[5]
  if not ACTIONS[a.action] then
    Arg.fail(cmd, 'Arg "action" must be one of fire, skip, buffer, buffered: ' .. Arg.shown(a.action))
  end
  if a.action == 'skip' then
    a.tick = Arg.optional_number(cmd, 'tick', args[6], nil, 0)
  else
    a.tick = Arg.number(cmd, 'tick', args[6], 0)
  end
  if a.action == 'buffered' and a.next ~= nil then
    Arg.fail(cmd, 'Arg "next" must be empty for action buffered (the score is left alone)')
  end
  a.skips = Schedules.parse_skips(cmd, args[7])
  if SUBMITS[a.action] then
    a.submission = Runs.parse(cmd, args[8], args[9], args[10])
    if args[11] ~= nil and args[11] ~= '' then a.cancel = Runs.id(cmd, args[11], 'cancel_run_id') end
    if args[12] ~= nil then Arg.fail(cmd, 'too many arguments') end
  elseif args[8] ~= nil then
    Arg.fail(cmd, 'action ' .. a.action .. ' takes no run')
  end
  return a
end

-- Whether the schedule is still as the caller saw it (see the header). Reads its `fired` count
-- with the rest (a.fired), for fired(): nothing the call writes before it changes that field;
-- and whether it is marked ended (a.ended, for Schedules.move).
local function unchanged(a)
  local f = redis.call('hmget', Keys.schedule(a.name), 'hash', 'last_run', 'buffered', 'fired',
    'ended')
  a.fired, a.ended = f[4], f[5] ~= false
  if f[1] ~= a.hash then return false end
  if a.action == 'buffered' then
    return Schedules.same_score(redis.call('zscore', Keys.schedules_buffered(), a.name), a.expected)
  end
  if not Schedules.same_score(redis.call('zscore', Keys.schedules(), a.name), a.expected) then
    return false
  end
  if a.action == 'buffer' and f[3] then return false end
  if a.cancel and a.cancel ~= f[2] then return false end
  return true
end

-- The run of a tick becomes the schedule's last run: one HSET (each write is an entry of the
-- append-only file and the replicas' stream). Its `fired` count (`before`, as unchanged() read
-- it) counts each tick's run once: a run that `exists` was counted by the fire that made it, or
-- was made by no fire (a resent fire, a second service, a backfill), and is not counted again.
local function fired(name, run_id, tick, exists, before)
  local fields = { 'last_run', run_id, 'last_fired_at', Schedules.time(Engine.now) }
  if tick then
    fields[#fields + 1] = 'last_tick'
    fields[#fields + 1] = Schedules.time(tick)
  end
  if not exists then
    fields[#fields + 1] = 'fired'
    fields[#fields + 1] = (tonumber(before) or 0) + 1
  end
  redis.call('hset', Keys.schedule(name), unpack(fields))
  Events.log({ event = 'schedule_fired', schedule = name, run = run_id, tick = tick or cjson.null,
    exists = exists })
end

api['schedule.fire'] = function(args)
  local cmd = 'ScheduleFire'
  local a = parse_fire(cmd, args)
  if not unchanged(a) then return 'conflict' end
  local exists = false
  if a.submission then
    exists = Runs.exists(a.submission.id)
    if not exists then Runs.check(cmd, a.submission) end
  end
  if a.submission and not exists and Runs.at_limit(a.submission, a.cancel) then
    -- The flow's max_active_runs is reached: the overlap policy decides, nothing is submitted.
    if a.action == 'buffered' then return 'buffered' end
    local f = redis.call('hmget', Keys.schedule(a.name), 'overlap', 'buffered')
    Schedules.move(a.name, a.next, a.ended)
    Schedules.record_skips(a.name, a.skips)
    if f[1] == 'buffer_one' and not f[2] then
      redis.call('hset', Keys.schedule(a.name), 'buffered', Schedules.time(a.tick))
      redis.call('zadd', Keys.schedules_buffered(), a.tick, a.name)
      Events.log({ event = 'schedule_buffered', schedule = a.name, tick = a.tick })
      return 'buffered'
    end
    Schedules.record_skips(a.name, { { first = a.tick, last = a.tick, count = 1,
      reason = 'max_active_runs' } })
    return 'skipped'
  end

  if a.action ~= 'buffered' then Schedules.move(a.name, a.next, a.ended) end
  Schedules.record_skips(a.name, a.skips)
  if a.action == 'buffer' then
    redis.call('hset', Keys.schedule(a.name), 'buffered', Schedules.time(a.tick))
    redis.call('zadd', Keys.schedules_buffered(), a.tick, a.name)
    Events.log({ event = 'schedule_buffered', schedule = a.name, tick = a.tick })
    return 'buffered'
  end
  if a.action == 'skip' then return 'skipped' end
  if a.action == 'buffered' then
    redis.call('hdel', Keys.schedule(a.name), 'buffered')
    redis.call('zrem', Keys.schedules_buffered(), a.name)
  end
  if a.cancel and not exists then
    Runs.cancel(a.cancel, 'cancel_running: superseded by ' .. a.submission.id)
  end
  if not exists then Runs.write(a.submission) end
  fired(a.name, a.submission.id, a.tick, exists, a.fired)
  if exists then return 'exists' end
  return 'fired'
end

api['schedule.trigger'] = function(args)
  local cmd = 'ScheduleTrigger'
  local name = Schedules.name(cmd, args[1])
  local submission = Runs.parse(cmd, args[2], args[3], args[4])
  if args[5] ~= nil then Arg.fail(cmd, 'too many arguments') end
  if redis.call('exists', Keys.schedule(name)) == 0 then
    Err.raise('NOTFOUND', cmd .. '(): no schedule ' .. name)
  end
  if Runs.exists(submission.id) then return 'exists' end
  Runs.check(cmd, submission)
  Runs.hold_limit(cmd, submission)
  Runs.write(submission)
  local key = Keys.schedule(name)
  redis.call('hset', key, 'last_run', submission.id, 'last_fired_at', Schedules.time(Engine.now),
    'triggered', (tonumber(redis.call('hget', key, 'triggered')) or 0) + 1)
  Events.log({ event = 'schedule_triggered', schedule = name, run = submission.id })
  return 'fired'
end
