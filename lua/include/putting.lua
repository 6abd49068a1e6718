-- putting: checking and writing puts (shared by put, requeue, put.many and flow.submit).
--
-- Put.parse(cmd, args) checks put's arguments (see commands/put.lua) and returns them as a table
-- (Put.parse_spec: one job object of flow.submit; Put.parse_shared and Put.parse_one: put.many's
-- options and one of its jobs); Put.write(p, old, batch) writes one, `old` being the existing
-- job's fields or nil, `batch` (Put.batch) what the puts of one bulk call share, or nil.
-- Our options (commands/put.lua): ttl, ttr, concurrency_key, concurrency_limit, throttle and
-- unique; the job fields the first five set are cleared by a later put without them.
-- @include args
-- @include job
-- @include queue
-- @include triggers
-- @include handoff
-- @include json_text
-- @include dialect
local Put = {}

local PUT_OPTIONS = { priority = true, tags = true, retries = true, depends = true, trigger = true,
  ttl = true, ttr = true, concurrency_key = true, concurrency_limit = true, throttle = true,
  unique = true }
-- The empty list of dependencies (shared, never written to).
local NONE = {}
-- Job fields of our options (and their state), cleared when a job is put again.
local OPTION_FIELDS = { 'ttl', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle', 'parked', 'reserved' }

-- A value given as an option: absent (nil), '' and JSON null all mean "not given".
local function given(value)
  return value ~= nil and value ~= '' and value ~= cjson.null
end

-- A spec field as text for the id checkers (which take strings): absent or null gives '' (which
-- they report as missing), a number its text, as put's argument would be.
local function text(value)
  if value == nil or value == cjson.null then return '' end
  if type(value) == 'string' then return value end
  return tostring(value)
end

-- A number of seconds more than 0, or nil when absent or ''.
local function seconds(cmd, name, value)
  if value == nil or value == '' then return nil end
  local n = Arg.number(cmd, name, value, 0)
  if n <= 0 then Arg.fail(cmd, 'Arg "' .. name .. '" must be more than 0: ' .. tostring(value)) end
  return n
end

-- Our options (see the header), from `options` as parse_options takes them.
local function parse_ours(cmd, p, options)
  local ttl, ttr, key, limit, throttle = options.ttl, options.ttr, options.concurrency_key,
    options.concurrency_limit, options.throttle
  -- Most puts have none of them.
  if ttl == nil and ttr == nil and key == nil and limit == nil and throttle == nil then return end
  p.ttl = seconds(cmd, 'ttl', text(ttl))
  p.ttr = seconds(cmd, 'ttr', text(ttr))
  if given(key) then p.ckey = Arg.id(cmd, 'concurrency_key', text(key)) end
  if given(limit) then
    p.climit = Arg.integer(cmd, 'concurrency_limit', text(limit), 1, Engine.MAX_COUNT)
    if not p.ckey then
      Arg.fail(cmd, 'Arg "concurrency_limit" needs "concurrency_key" (the key it limits)')
    end
  end
  if given(throttle) then p.throttle = Arg.id(cmd, 'throttle', text(throttle)) end
end

local function set_depends(cmd, p, depends)
  p.depends = depends
  for _, dependency in ipairs(depends) do
    if dependency == p.jid then Arg.fail(cmd, 'Arg "depends": job ' .. p.jid .. ' cannot depend on itself') end
  end
end

-- priority, retries, trigger and ours, from `options` (name -> text or number; not given: see
-- `given`, except for trigger, which must name a rule when present, even as '' or null).
local function parse_options(cmd, p, options)
  if given(options.priority) then
    p.priority = Arg.integer(cmd, 'priority', options.priority, -Queue.MAX_PRIORITY,
      Queue.MAX_PRIORITY)
  end
  if given(options.retries) then
    p.retries = Arg.integer(cmd, 'retries', options.retries, 0, Engine.MAX_COUNT)
  end
  local trigger = options.trigger
  if trigger ~= nil then
    if not Deps.RULES[trigger] then
      Arg.fail(cmd, 'Arg "trigger" must be one of all_success, all_done, one_failed, none_failed: ' ..
        Arg.shown(text(trigger)))
    end
    p.trigger = trigger
  end
  parse_ours(cmd, p, options)
end

-- The checked fields every put has; the options' defaults (or nil: the existing job's value).
local function base(cmd, worker, queue, jid, klass, data, delay)
  return {
    worker = worker,
    queue = queue,
    jid = Arg.jid(cmd, 'jid', jid),
    klass = Arg.id(cmd, 'klass', klass),
    data = Arg.json(cmd, 'data', data, 'payload'),
    -- qless reads a negative delay as none.
    delay = Arg.number(cmd, 'delay', delay, not Dialect.rules.lenient_arguments and 0 or nil),
    depends = NONE, climit = 1, unique = false,
    named = true, -- jid and queue checked as names (Events.log_put)
  }
end

function Put.parse(cmd, args)
  -- qless takes a put without a worker (its clients' `job.move()` sends the empty string).
  local worker = args[1]
  if not (Dialect.rules.lenient_arguments and worker == '') then worker = Arg.id(cmd, 'worker', worker) end
  local queue = Arg.name(cmd, 'queue', args[2])
  local p = base(cmd, worker, queue, args[3], args[4], args[5], args[6])
  -- Most puts have no options: their defaults are above (the others are nil).
  if #args > 6 then
    local options = Arg.options(cmd, args, 7, PUT_OPTIONS)
    if options.tags then p.tags = Arg.id_list(cmd, 'tags', options.tags, Arg.id, Arg.MAX_TAGS) end
    if options.depends then
      set_depends(cmd, p, Arg.id_list(cmd, 'depends', options.depends, Arg.jid, Engine.MAX_COUNT))
    end
    parse_options(cmd, p, options)
    local unique = options.unique
    if unique ~= nil and unique ~= '' and unique ~= '0' and unique ~= '1' then
      Arg.fail(cmd, 'Arg "unique" must be 0 or 1: ' .. Arg.shown(unique))
    end
    p.unique = unique == '1'
  end
  return p
end

-- An empty list (absent, null, [] or {}) is not given: put gives every list option that default.
local function is_empty_list(value)
  return value == nil or value == cjson.null or (type(value) == 'table' and next(value) == nil)
end

-- `depends` as it is when it lists distinct jids of `known` (jids checked already: the earlier
-- jobs of a run), which need no check again; nil otherwise (then Arg.id_items checks each item
-- and says what is wrong).
local function known_jids(depends, known)
  if not known or type(depends) ~= 'table' then return nil end
  local count = 0
  for _, item in next, depends do
    if not known[item] then return nil end
    count = count + 1
  end
  if count ~= #depends or count > Engine.MAX_COUNT then return nil end
  if count == 2 then
    -- The most common case of more than one (a join of two steps): no set to make.
    if depends[1] == depends[2] then return nil end
  elseif count > 2 then
    local seen = {}
    for _, item in ipairs(depends) do
      if seen[item] then return nil end
      seen[item] = true
    end
  end
  return depends
end

-- The fields of a job object a run's jobs may share (flow.submit's `shared`, include/runs.lua),
-- each with the field of a parsed put it sets (concurrency_key and concurrency_limit are taken
-- together: a job giving either gives both).
Put.SHARED_FIELDS = { queue = 'queue', klass = 'klass', priority = 'priority',
  retries = 'retries', tags = 'tags', trigger = 'trigger', ttl = 'ttl', ttr = 'ttr',
  throttle = 'throttle' }

-- The fields every job of a run shares (flow.submit's `shared` object, decoded), checked once as
-- Put.parse_spec checks a job's: {queue, klass, priority, retries, tags, trigger, ttl, ttr,
-- ckey, climit, throttle}, nil for those not given. `extra`: more names it may hold (the run's
-- own: notify, deadline), checked by the caller.
function Put.parse_shared_spec(cmd, shared, extra)
  for name in pairs(shared) do
    if not Put.SHARED_FIELDS[name] and name ~= 'concurrency_key' and name ~= 'concurrency_limit'
        and not extra[name] then
      Arg.fail(cmd, 'field "' .. Arg.shown(name) .. '" is not one the jobs may share (a job\'s ' ..
        'own: jid, data, depends, delay, wait, empty, fanout)')
    end
  end
  -- `given`: the {name, field} pairs it gives, which Put.take_shared visits (not every name).
  local p = { given = {} }
  for name, field in pairs(Put.SHARED_FIELDS) do
    if shared[name] ~= nil then p.given[#p.given + 1] = { name, field } end
  end
  if shared.queue ~= nil then p.queue = Arg.name(cmd, 'queue', text(shared.queue)) end
  if shared.klass ~= nil then p.klass = Arg.id(cmd, 'klass', text(shared.klass)) end
  if not is_empty_list(shared.tags) then
    p.tags = Arg.id_items(cmd, 'tags', shared.tags, Arg.id, Arg.MAX_TAGS)
  end
  parse_options(cmd, p, shared)
  return p
end

-- A job's field it leaves out, from the fields its run shares (Put.parse_shared_spec's).
function Put.take_shared(p, spec, shared)
  local given = shared.given
  for i = 1, #given do
    local pair = given[i]
    if spec[pair[1]] == nil then p[pair[2]] = shared[pair[2]] end
  end
  if spec.concurrency_key == nil and spec.concurrency_limit == nil and shared.ckey then
    p.ckey, p.climit = shared.ckey, shared.climit or 1
  end
end

-- A job object of flow.submit (include/runs.lua), decoded: {jid, queue, klass, data (JSON text),
-- delay, priority, retries, tags, depends, trigger, ttl, ttr, concurrency_key, concurrency_limit,
-- throttle, wait (include/waits.lua), empty (an empty fan-out: Deps.complete_empty)}, checked as
-- put checks the same arguments; `worker` is the putter. `known` (a set
-- of jids, or nil): jids checked already, the run's earlier jobs. `shared` (or nil): the
-- fields of the run's jobs that a job object leaves out (Put.parse_shared_spec's, checked once).
function Put.parse_spec(cmd, spec, worker, known, shared)
  local delay = spec.delay
  if delay == nil then delay = 0 elseif delay == cjson.null then delay = '' end
  local queue, klass = spec.queue, spec.klass
  if shared then
    -- Checked already: the memo of names and ids (Arg.name, Arg.id) answers at once.
    if queue == nil then queue = shared.queue end
    if klass == nil then klass = shared.klass end
  end
  local p = base(cmd, worker, Arg.name(cmd, 'queue', text(queue)), text(spec.jid),
    text(klass), text(spec.data), delay)
  if not is_empty_list(spec.tags) then
    p.tags = Arg.id_items(cmd, 'tags', spec.tags, Arg.id, Arg.MAX_TAGS)
  end
  if not is_empty_list(spec.depends) then
    set_depends(cmd, p, known_jids(spec.depends, known) or
      Arg.id_items(cmd, 'depends', spec.depends, Arg.jid, Engine.MAX_COUNT))
  end
  parse_options(cmd, p, spec)
  if shared then Put.take_shared(p, spec, shared) end
  if spec.wait ~= nil and spec.wait ~= cjson.null then p.wait = Waits.parse(cmd, spec.wait, p) end
  if spec.empty ~= nil and spec.empty ~= cjson.null and spec.empty ~= false then
    if spec.empty ~= true then Arg.fail(cmd, 'Arg "empty" must be true or false') end
    if p.wait then Arg.fail(cmd, 'Arg "empty": a wait has items of no kind to be empty of') end
    p.empty = true
  end
  return p
end

-- put.many's options (commands/put.lua), decoded: the fields every job of the call gets.
-- Options are those of put but depends, trigger (dependencies are what flows are for) and
-- unique; absent or null: not given.
local MANY_OPTIONS = { priority = true, tags = true, retries = true, ttl = true, ttr = true,
  concurrency_key = true, concurrency_limit = true, throttle = true }

function Put.parse_shared(cmd, options)
  for name in pairs(options) do
    if name == 'depends' or name == 'trigger' then
      Arg.fail(cmd, 'option "' .. name .. '" is not taken by put.many (a job with dependencies ' ..
        'is put alone, or as part of a flow)')
    end
    if not MANY_OPTIONS[name] then
      Arg.fail(cmd, 'unknown option "' .. Arg.shown(name) .. '" (known: concurrency_key, ' ..
        'concurrency_limit, priority, retries, tags, throttle, ttl, ttr)')
    end
  end
  local shared = { climit = 1, unique = false }
  -- [] is given (as put's 'tags' '[]': the job's tags become none); null is not.
  if options.tags ~= nil and options.tags ~= cjson.null then
    shared.tags = Arg.id_items(cmd, 'tags', options.tags, Arg.id, Arg.MAX_TAGS)
  end
  parse_options(cmd, shared, options)
  return shared
end

-- One job of put.many: its own fields, checked as put checks them, and the `shared` ones.
function Put.parse_one(cmd, worker, queue, shared, jid, klass, data, delay)
  local p = base(cmd, worker, queue, jid, klass, data, delay)
  p.priority, p.retries, p.tags = shared.priority, shared.retries, shared.tags
  p.ttl, p.ttr, p.ckey, p.climit, p.throttle = shared.ttl, shared.ttr, shared.ckey,
    shared.climit, shared.throttle
  return p
end

-- Whether any of the puts' jobs exists, asked 1000 jids at a time: the jobs of a bulk put are
-- nearly always new, and then none needs a look-up of its own.
function Put.any_exist(puts)
  local keys = {}
  for _, p in ipairs(puts) do
    keys[#keys + 1] = Keys.job(p.jid)
    if #keys == 1000 then
      if redis.call('exists', unpack(keys)) > 0 then return true end
      keys = {}
    end
  end
  return #keys > 0 and redis.call('exists', unpack(keys)) > 0
end

-- Whether a put with `unique` finds the job already there and not finished (a no-op then).
function Put.exists(p, old)
  return p.unique and old ~= nil and old.state ~= 'complete' and old.state ~= 'expired'
end

-- The dependencies (jids) of a put that are not complete yet. qless treats a dependency that is
-- complete or does not exist as already satisfied. `known` (a set of jids, or nil) are known to
-- be pending without a look: flow.submit's jobs of the same run, just written (include/runs.lua).
local function pending_dependencies(depends, known)
  if #depends == 0 then return NONE end
  -- Most often all of them (a run's jobs depend on its earlier ones): the list as it is.
  local all_known = known ~= nil
  for i = 1, all_known and #depends or 0 do
    if not known[depends[i]] then
      all_known = false
      break
    end
  end
  if all_known then return depends end
  local pending = {}
  for _, dependency in ipairs(depends) do
    if known and known[dependency] then
      table.insert(pending, dependency)
    else
      local state = Job.state(dependency)
      if state and state ~= 'complete' then table.insert(pending, dependency) end
    end
  end
  return pending
end

-- Hash fields cleared before a put over an existing job writes it: its lock's grace, its result,
-- its lost workers (a new life: include/reclaim.lua), our options (a put without them clears them), and the trigger when put back to the default.
local function stale_fields(p)
  -- `child`: a sub-flow step's child run (commands/subflow.lua); a put over it starts afresh.
  -- `runs`: the times it started running, its step log's attempt number (commands/pop.lua).
  -- `rerun_child`: the child run a re-run of the step runs again (commands/run_admin.lua).
  -- `cached`: the job a step cache hit took its result from (commands/cache.lua); put again, the
  -- job has not taken it yet (its next cache.use may take it again, or run it). `cclaim`: a
  -- cache miss's claim (commands/cache.lua), only its own run's: put again, the job claims
  -- again when it starts, if it is still a cached step's.
  -- Job.DEFAULTED: the hash written next leaves out those at their default.
  local stale = { 'grace', 'result', 'lost', 'scheduled', 'wait', 'wait_since', 'wait_at', 'child',
    'rerun_child', 'skipped', 'popped', 'empty', 'cached', 'cclaim', unpack(Job.DEFAULTED) }
  for _, name in ipairs(OPTION_FIELDS) do stale[#stale + 1] = name end
  if not p.keep_logs then table.insert(stale, 'runs') end
  if p.trigger == 'all_success' then table.insert(stale, 'trigger') end
  return stale
end

-- The job's hash fields as HSET arguments: the whole job with its state, in one write (those
-- at their default left out: Job.put_fields). A job handed straight to an idle worker
-- (`handed`: {worker, expires}) is written running, as a pop leaves it. A new job put waiting
-- stores no state (Job.hmget reads it as waiting): its hash then fits a smaller allocation.
local function job_fields(p, old, state, priority, retries, tags_text, handed)
  -- No `jid`: the key names the job (Job.describe_json reads it from there).
  local f = { 'klass', p.klass, 'data', p.data, 'queue', p.queue }
  if handed then
    f[7], f[8] = 'state', 'running'
  elseif old or state ~= 'waiting' then
    f[7], f[8] = 'state', state
  end
  Job.put_fields(f, priority, tags_text, handed and handed.worker or '',
    handed and handed.expires or 0, retries)
  local n = #f
  if old then
    -- A new job has no failure and no delay to clear, and every reader takes their absence as
    -- none; its `updated` and `time` are its `created`, which their readers fall back to (a
    -- waiting job is smaller without the four: Job.describe_json, commands/pop.lua).
    -- `time`: when a waiting job became eligible, the start of its wait-time sample.
    f[n + 1], f[n + 2], f[n + 3], f[n + 4], n = 'failure', '{}', 'delay', p.delay, n + 4
    f[n + 1], f[n + 2], n = 'updated', Engine.now, n + 2
    if state == 'waiting' then f[n + 1], f[n + 2], n = 'time', Engine.now, n + 2 end
  else
    if p.delay ~= 0 then f[n + 1], f[n + 2], n = 'delay', p.delay, n + 2 end
    f[n + 1], f[n + 2], n = 'created', Engine.now, n + 2
    -- As the pop of a waiting job writes it (commands/pop.lua).
    if handed then f[n + 1], f[n + 2], n = 'updated', Engine.now, n + 2 end
  end
  if handed then f[n + 1], f[n + 2], n = 'popped', Engine.now, n + 2 end
  if p.needs then
    -- A fan-out's item: the template's needs (include/fanout.lua).
    f[n + 1], f[n + 2], n = 'needs', p.needs, n + 2
  elseif p.trigger then
    -- The full list of needs lets run.retry re-arm jobs (see commands/run_admin.lua).
    f[n + 1], f[n + 2], n = 'needs', #p.depends == 0 and '[]' or cjson.encode(p.depends), n + 2
  end
  if p.trigger and p.trigger ~= 'all_success' then
    f[n + 1], f[n + 2], n = 'trigger', p.trigger, n + 2
  end
  if p.ttl then f[n + 1], f[n + 2], n = 'ttl', p.ttl, n + 2 end
  if p.ttr then f[n + 1], f[n + 2], n = 'ttr', p.ttr, n + 2 end
  if p.ckey then f[n + 1], f[n + 2], f[n + 3], f[n + 4], n = 'ckey', p.ckey, 'climit', p.climit, n + 4 end
  if p.throttle then f[n + 1], f[n + 2], n = 'throttle', p.throttle, n + 2 end
  if p.wait then f[n + 1], f[n + 2], n = 'wait', p.wait, n + 2 end
  if p.empty then f[n + 1], f[n + 2], n = 'empty', 1, n + 2 end
  -- A run's job that tells of its state (include/notify.lua), in the job's first write: a wait
  -- armed by its own put already tells of it. Its step's deadline (include/deadlines.lua).
  if p.notify then
    f[n + 1], f[n + 2], f[n + 3], f[n + 4], n = 'notify', p.notify, 'notify_run', p.count_in, n + 4
  end
  if p.deadline then f[n + 1], f[n + 2], n = 'deadline', p.deadline, n + 2 end
  -- A run's new job is counted in the same write (RunCounts.join: its counts need no read).
  if p.counted then f[n + 1], f[n + 2] = 'counted', p.counted .. ' ' .. p.count_in end
  return f
end

-- What the puts of one call share (a bulk put, a flow run): the jids written so far (pending
-- for a later job's dependencies: nothing of the call ran yet), the put count per queue, each
-- queue's history entry (the same text for every job: where and when), whether any job is
-- tracked at all, and the jobs that become waiting, per queue, pushed by Put.finish in a few
-- ZADDs. Likewise the jobs that wait for dependencies, per queue (`blocked`), and each
-- dependency's new dependents (`dependents`, the dependencies in first-seen order in
-- `upstream`), each key written once, its members in put order. Put.finish also counts the puts
-- and registers the queues, once per queue. `announced`: the call tells of its new jobs in one
-- event of its own (a run's `run_submitted`, a fan-out's `fanout`), not a `put` event each.
function Put.batch(announced)
  return { written = {}, counts = {}, entries = {}, waiting = {}, blocked = {}, dependents = {},
    upstream = {}, empty = {}, tracking = redis.call('zcard', Keys.tracked()) > 0,
    announced = announced }
end

-- `batch`'s queues of `field` (a table by queue), sorted: the same insertion sequence on a
-- replica and after a restart.
local function sorted_queues(batch, field)
  local queues = {}
  for queue in pairs(batch[field]) do queues[#queues + 1] = queue end
  table.sort(queues)
  return queues
end

-- ZADD of `jids` to `key`, all scored now.
local function add_now(key, jids)
  local args = {}
  for i, jid in ipairs(jids) do args[2 * i - 1], args[2 * i] = Engine.now, jid end
  Engine.call_many('zadd', key, args)
end

function Put.finish(batch)
  for _, queue in ipairs(sorted_queues(batch, 'waiting')) do
    Queue.push_many(queue, batch.waiting[queue])
  end
  for _, dependency in ipairs(batch.upstream) do
    Engine.call_many('sadd', Keys.dependents(dependency), batch.dependents[dependency])
  end
  for _, queue in ipairs(sorted_queues(batch, 'blocked')) do
    add_now(Keys.depends(queue), batch.blocked[queue])
  end
  for queue, count in pairs(batch.counts) do
    Stats.bump(queue, 'put', count)
    Queue.known(queue)
  end
  -- Empty fan-outs nothing held back: complete, their dependents settled by their rules.
  for _, jid in ipairs(batch.empty) do
    local queue = redis.call('hget', Keys.job(jid), 'queue')
    redis.call('zrem', Keys.depends(queue), jid)
    Deps.complete_empty(jid, queue)
    Deps.settle(jid, 'complete')
  end
end

-- A job of `batch` that waits for its `pending` dependencies: indexed by Put.finish.
local function block_later(batch, queue, jid, pending)
  local blocked = batch.blocked[queue]
  if not blocked then blocked = {}; batch.blocked[queue] = blocked end
  blocked[#blocked + 1] = jid
  local dependents, upstream = batch.dependents, batch.upstream
  for _, dependency in ipairs(pending) do
    local jids = dependents[dependency]
    if not jids then
      jids = {}
      dependents[dependency] = jids
      upstream[#upstream + 1] = dependency
    end
    jids[#jids + 1] = jid
  end
end

-- The history entry of a put into `queue` now (Job.put_entry).
function Put.entry(queue)
  return Job.put_entry(queue, Engine.now)
end

-- The put's history entry, for a job put over: a new job's is implied (Job.implied_history).
local function record(jid, queue, batch)
  if not batch then return Job.append_history(jid, Put.entry(queue)) end
  local entry = batch.entries[queue]
  if not entry then
    entry = Put.entry(queue)
    batch.entries[queue] = entry
  end
  Job.append_history(jid, entry)
end

-- Write a checked put (from Put.parse...). `old` is the existing job's fields (or nil); `batch`
-- (Put.batch, or nil for a put of its own) when the call writes many puts.
function Put.write(p, old, batch)
  local jid, queue = p.jid, p.queue
  -- A new job joining a run (`count_in`) is counted by its caller (RunCounts.join, start).
  if old or not p.count_in then RunCounts.touch(jid) end
  if old then RunCounts.again(jid) end
  local old_tags = NONE
  -- A put of its own keeps the qless dialect's order of events and its rules (Dialect); a batch
  -- put keeps ours.
  local qless_order = not batch and Dialect.rules.qless_events
  local lost
  local pending
  if old then
    old_tags = Job.decode_list(old.tags)
    if old.state == 'running' and old.worker ~= '' and old.worker ~= p.worker then
      if qless_order then lost = old.worker else Events.to_worker(old.worker, 'lock_lost', jid) end
    end
    Job.keep_history(jid) -- written before the queue changes, which an implied one reads
    Job.unindex(jid, old)
    if not batch and Dialect.rules.reput_keeps_dependencies and #p.depends == 0 then
      pending = redis.call('smembers', Keys.dependencies(jid))
    else
      Job.drop_dependencies(jid)
    end
    -- Its attempts count from 1 again, unless the put resumes it (run.retry, run.rerun:
    -- `keep_logs`: `runs` counts on).
    if not p.keep_logs then Job.drop_logs(jid) end
  end
  -- Not given: the job's own (Job.fields fills in a default it left out), else the default.
  local defaults = Job.numbers()
  local priority = p.priority or (old and tonumber(old.priority)) or defaults.priority
  local retries = p.retries or (old and tonumber(old.retries)) or defaults.retries
  local tags = p.tags or old_tags
  if #old_tags > 0 or #tags > 0 then Job.retag(jid, old_tags, tags) end

  if not pending or #pending == 0 then
    pending = pending_dependencies(p.depends, batch and batch.written)
  end
  local state = 'waiting'
  if #pending > 0 then
    state = 'depends'
  elseif p.empty and batch then
    -- An empty fan-out that nothing holds back completes once the whole batch is written
    -- (Put.finish), so that the later jobs of its run are settled by its completion.
    state = 'depends'
    batch.empty[#batch.empty + 1] = jid
  elseif p.empty then
    state = 'complete' -- an empty fan-out that nothing holds back (Deps.complete_empty)
  elseif p.wait then
    state = Waits.STATE
  elseif p.delay > 0 then
    state = 'scheduled'
  end
  -- The job of a put alone (`p.alone`) that becomes waiting may go straight to an idle worker
  -- (include/handoff.lua): not in the qless dialect (its order of events), nor a job whose ttl,
  -- concurrency key or throttle a pop must look at.
  local to = p.alone and state == 'waiting' and not Dialect.rules.qless_events and not p.ttl and
    not p.ckey and not p.throttle and Handoff.direct(queue)
  local handed = to and { worker = to.worker, expires = Engine.now + (p.ttr or to.lock) }
  local tags_text = #tags == 0 and '{}' or cjson.encode(tags)
  -- `count_in`: the run a new job joins (include/runs.lua); its class as the counts see it,
  -- unless a wait's arming (which writes its start) or a hand-off makes it more than its state.
  if p.count_in and not old and not handed and not p.wait then
    p.counted = RunCounts.class(state)
  end
  local key = Keys.job(jid)
  -- A new job has no stale fields (its hash does not exist: Job.fields found no state).
  if old then redis.call('hdel', key, unpack(stale_fields(p))) end
  redis.call('hset', key, unpack(job_fields(p, old, state, priority, retries, tags_text, handed)))
  -- Its step's deadline (include/deadlines.lua) counts from its start: looked at from now on
  -- (a job put back by run.retry or run.rerun too, unless it missed it already).
  if p.deadline and not p.deadline_missed and not p.empty then
    redis.call('zadd', Keys.deadlines(), Engine.now + p.deadline, 'j:' .. jid)
  end
  local runs = handed and redis.call('hincrby', key, 'runs', 1)
  if not batch and Dialect.rules.failure_kept_until_complete and old and old.failure then
    redis.call('hset', key, 'failure', old.failure)
  end
  if not batch and Dialect.rules.delay_counts_from_put and state == 'depends' and p.delay > 0 then
    -- Queue.release_dependent makes it scheduled until then.
    redis.call('hset', key, 'delay', 0, 'scheduled', string.format('%.17g', Engine.now + p.delay))
  end
  -- A new job's put entry is implied; a job handed over gets it with the pop's (Handoff.give).
  if old and not handed then record(jid, queue, batch) end

  if state == 'depends' then
    Engine.call_many('sadd', Keys.dependencies(jid), pending)
    if batch then
      block_later(batch, queue, jid, pending)
    else
      for _, dependency in ipairs(pending) do
        redis.call('sadd', Keys.dependents(dependency), jid)
      end
      redis.call('zadd', Keys.depends(queue), Engine.now, jid)
    end
  elseif state == Waits.STATE then
    Waits.arm(jid, queue, p.wait)
  elseif state == 'complete' then
    Deps.complete_empty(jid, queue)
    Deps.settle(jid, 'complete')
  else
    if state == 'scheduled' then
      Queue.defer(queue, jid, Engine.now + p.delay)
    elseif handed then
      -- As pop.lean reads the job back (include/lean.lua): numbers as the hash stores them.
      Handoff.give(to, queue, jid, handed.expires, Put.entry(queue),
        Lean.job({ queue = queue, worker = to.worker }, jid, { [3] = p.ttr, [9] = p.klass,
          [10] = p.data, [11] = tostring(priority), [12] = tags_text, [13] = tostring(retries),
          [14] = tostring(retries) }, handed.expires, runs))
    elseif batch then
      local waiting = batch.waiting[queue]
      if not waiting then waiting = {}; batch.waiting[queue] = waiting end
      waiting[#waiting + 1] = jid
      waiting[#waiting + 1] = priority
    else
      Queue.push(queue, jid, priority)
    end
    if p.ttl then Queue.arm_ttl(queue, jid, p.ttl, p.delay) end
  end
  if batch then
    batch.written[jid] = true
    batch.counts[queue] = (batch.counts[queue] or 0) + 1
    -- With nothing tracked, no job of the batch can be (and tracking happens in other calls).
    if batch.tracking then Events.tracked('put', jid) end
  else
    -- A job handed over is counted as put by Stats.handed (Handoff.give).
    if not handed then Stats.bump(queue, 'put', 1) end
    Queue.known(queue)
    -- A job handed over directly is not tracked: Handoff.direct saw no job tracked at all.
    if not qless_order and not handed then Events.tracked('put', jid) end
  end
  if not (batch and batch.announced) then Events.log_put(jid, queue, p.named) end
  if qless_order then
    if lost then Events.to_worker(lost, 'lock_lost', jid) end
    Events.tracked('put', jid)
  end
  return jid
end
