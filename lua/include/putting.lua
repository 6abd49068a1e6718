-- putting: checking and writing one put (shared by put, requeue and flow.submit).
--
-- Put.parse(cmd, args) checks put's arguments (see commands/put.lua) and returns them as a table;
-- Put.write(p, old) writes them, `old` being the existing job's fields or nil.
-- Our options (commands/put.lua): ttl, ttr, concurrency_key, concurrency_limit, throttle and
-- unique; the job fields the first five set are cleared by a later put without them.
-- @include args
-- @include job
-- @include queue
-- @include triggers
local Put = {}

local PUT_OPTIONS = { priority = true, tags = true, retries = true, depends = true, trigger = true,
  ttl = true, ttr = true, concurrency_key = true, concurrency_limit = true, throttle = true,
  unique = true }
-- Job fields of our options (and their state), cleared when a job is put again.
local OPTION_FIELDS = { 'ttl', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle', 'parked', 'reserved' }

-- A number of seconds more than 0, or nil when absent or ''.
local function seconds(cmd, name, value)
  if value == nil or value == '' then return nil end
  local n = Arg.number(cmd, name, value, 0)
  if n <= 0 then Arg.fail(cmd, 'Arg "' .. name .. '" must be more than 0: ' .. tostring(value)) end
  return n
end

local function parse_ours(cmd, p, options)
  p.ttl = seconds(cmd, 'ttl', options.ttl)
  p.ttr = seconds(cmd, 'ttr', options.ttr)
  if options.concurrency_key and options.concurrency_key ~= '' then
    p.ckey = Arg.id(cmd, 'concurrency_key', options.concurrency_key)
  end
  p.climit = Arg.optional_integer(cmd, 'concurrency_limit', options.concurrency_limit, 1, 1,
    Engine.MAX_COUNT)
  if options.concurrency_limit and options.concurrency_limit ~= '' and not p.ckey then
    Arg.fail(cmd, 'Arg "concurrency_limit" needs "concurrency_key" (the key it limits)')
  end
  if options.throttle and options.throttle ~= '' then
    p.throttle = Arg.id(cmd, 'throttle', options.throttle)
  end
  local unique = options.unique
  if unique ~= nil and unique ~= '' and unique ~= '0' and unique ~= '1' then
    Arg.fail(cmd, 'Arg "unique" must be 0 or 1: ' .. tostring(unique))
  end
  p.unique = unique == '1'
end

-- The options after put's six arguments (priority, tags, retries, depends, trigger and ours).
local function parse_options(cmd, p, args)
  local options = Arg.options(cmd, args, 7, PUT_OPTIONS)
  p.priority = Arg.optional_integer(cmd, 'priority', options.priority, nil,
    -Queue.MAX_PRIORITY, Queue.MAX_PRIORITY)
  p.retries = Arg.optional_integer(cmd, 'retries', options.retries, nil, 0, Engine.MAX_COUNT)
  if options.tags then p.tags = Arg.id_list(cmd, 'tags', options.tags, Arg.id, Arg.MAX_TAGS) end
  if options.depends then
    p.depends = Arg.id_list(cmd, 'depends', options.depends, Arg.jid, Engine.MAX_COUNT)
    for _, dependency in ipairs(p.depends) do
      if dependency == p.jid then Arg.fail(cmd, 'Arg "depends": job ' .. p.jid .. ' cannot depend on itself') end
    end
  end
  if options.trigger then
    if not Deps.RULES[options.trigger] then
      Arg.fail(cmd, 'Arg "trigger" must be one of all_success, all_done, one_failed, none_failed: ' ..
        tostring(options.trigger))
    end
    p.trigger = options.trigger
  end
  parse_ours(cmd, p, options)
end

function Put.parse(cmd, args)
  local worker = Arg.id(cmd, 'worker', args[1])
  local queue = Arg.id(cmd, 'queue', args[2])
  local jid = Arg.jid(cmd, 'jid', args[3])
  local klass = Arg.id(cmd, 'klass', args[4])
  local data = Arg.json(cmd, 'data', args[5], 'object')
  local delay = Arg.number(cmd, 'delay', args[6], 0)
  local p = { worker = worker, queue = queue, jid = jid, klass = klass, data = data, delay = delay,
    depends = {}, climit = 1, unique = false }
  -- Most puts have no options: their defaults are above (the others are nil).
  if #args > 6 then parse_options(cmd, p, args) end
  return p
end

-- Whether a put with `unique` finds the job already there and not finished (a no-op then).
function Put.exists(p, old)
  return p.unique and old ~= nil and old.state ~= 'complete' and old.state ~= 'expired'
end

-- The dependencies (jids) of a put that are not complete yet. qless treats a dependency that is
-- complete or does not exist as already satisfied. `known` (a set of jids, or nil) are known to
-- be pending without a look: flow.submit's jobs of the same run, just written (include/runs.lua).
local function pending_dependencies(depends, known)
  local pending = {}
  for _, dependency in ipairs(depends) do
    if known and known[dependency] then
      table.insert(pending, dependency)
    else
      local state = redis.call('hget', Keys.job(dependency), 'state')
      if state and state ~= 'complete' then table.insert(pending, dependency) end
    end
  end
  return pending
end

-- Hash fields cleared before a put over an existing job writes it: its lock's grace, its result,
-- our options (a put without them clears them), and the trigger when put back to the default.
local function stale_fields(p)
  local stale = { 'grace', 'result', unpack(OPTION_FIELDS) }
  if p.trigger == 'all_success' then table.insert(stale, 'trigger') end
  return stale
end

-- The job's hash fields as HSET arguments: the whole job with its state, in one write.
local function job_fields(p, old, state, priority, retries, tags)
  local f = { 'jid', p.jid, 'klass', p.klass, 'data', p.data, 'priority', priority,
    'tags', #tags == 0 and '{}' or cjson.encode(tags), 'queue', p.queue, 'worker', '',
    'expires', 0, 'retries', retries, 'remaining', retries, 'failure', '{}', 'delay', p.delay,
    'updated', Engine.now, 'state', state }
  local function add(name, value) f[#f + 1] = name; f[#f + 1] = value end
  -- `time`: when a waiting job became eligible, the start of its wait-time sample.
  if state == 'waiting' then add('time', Engine.now) end
  if not old then add('created', Engine.now) end
  if p.trigger then
    -- The full list of needs lets run.retry re-arm jobs (see commands/run_admin.lua).
    add('needs', #p.depends == 0 and '[]' or cjson.encode(p.depends))
    if p.trigger ~= 'all_success' then add('trigger', p.trigger) end
  end
  if p.ttl then add('ttl', p.ttl) end
  if p.ttr then add('ttr', p.ttr) end
  if p.ckey then add('ckey', p.ckey); add('climit', p.climit) end
  if p.throttle then add('throttle', p.throttle) end
  return f
end

-- Write a checked put (from Put.parse). `old` is the existing job's fields (or nil).
function Put.write(p, old)
  local jid, queue = p.jid, p.queue
  local old_tags = {}
  if old then
    old_tags = Job.decode_list(old.tags)
    if old.state == 'running' and old.worker ~= '' and old.worker ~= p.worker then
      Events.to_worker(old.worker, 'lock_lost', jid)
    end
    Job.unindex(jid, old)
    Job.drop_dependencies(jid)
  end
  local priority = p.priority or tonumber(old and old.priority) or 0
  local retries = p.retries or tonumber(old and old.retries) or 5
  local tags = p.tags or old_tags
  if #old_tags > 0 or #tags > 0 then Job.retag(jid, old_tags, tags) end

  local pending = pending_dependencies(p.depends, p.pending_jids)
  local state = 'waiting'
  if #pending > 0 then
    state = 'depends'
  elseif p.delay > 0 then
    state = 'scheduled'
  end
  local key = Keys.job(jid)
  -- A new job has no stale fields (its hash does not exist: Job.fields found no state).
  if old then redis.call('hdel', key, unpack(stale_fields(p))) end
  redis.call('hset', key, unpack(job_fields(p, old, state, priority, retries, tags)))
  Job.history(jid, 'put', { q = queue })

  if state == 'depends' then
    for _, dependency in ipairs(pending) do
      redis.call('sadd', Keys.dependencies(jid), dependency)
      redis.call('sadd', Keys.dependents(dependency), jid)
    end
    redis.call('zadd', Keys.depends(queue), Engine.now, jid)
  else
    if state == 'scheduled' then
      Queue.defer(queue, jid, Engine.now + p.delay)
    else
      Queue.push(queue, jid, priority)
    end
    if p.ttl then Queue.arm_ttl(queue, jid, p.ttl, p.delay) end
  end
  -- flow.submit counts its puts and registers its queues once per queue (include/runs.lua).
  if not p.uncounted then
    Stats.bump(queue, 'put', 1)
    Queue.known(queue)
  end
  Events.tracked('put', jid)
  Events.log({ jid = jid, event = 'put', queue = queue })
  return jid
end
