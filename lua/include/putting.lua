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

function Put.parse(cmd, args)
  local p = {}
  p.worker = Arg.id(cmd, 'worker', args[1])
  p.queue = Arg.id(cmd, 'queue', args[2])
  p.jid = Arg.jid(cmd, 'jid', args[3])
  p.klass = Arg.id(cmd, 'klass', args[4])
  p.data = Arg.json(cmd, 'data', args[5], 'object')
  p.delay = Arg.number(cmd, 'delay', args[6], 0)
  local options = Arg.options(cmd, args, 7, PUT_OPTIONS)
  p.priority = Arg.optional_integer(cmd, 'priority', options.priority, nil,
    -Queue.MAX_PRIORITY, Queue.MAX_PRIORITY)
  p.retries = Arg.optional_integer(cmd, 'retries', options.retries, nil, 0, Engine.MAX_COUNT)
  if options.tags then p.tags = Arg.id_list(cmd, 'tags', options.tags, Arg.id, Arg.MAX_TAGS) end
  p.depends = {}
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
  return p
end

-- Whether a put with `unique` finds the job already there and not finished (a no-op then).
function Put.exists(p, old)
  return p.unique and old ~= nil and old.state ~= 'complete' and old.state ~= 'expired'
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
  Job.retag(jid, old_tags, tags)

  local key = Keys.job(jid)
  redis.call('hset', key, 'jid', jid, 'klass', p.klass, 'data', p.data, 'priority', priority,
    'tags', cjson.encode(tags), 'queue', queue, 'worker', '', 'expires', 0,
    'retries', retries, 'remaining', retries, 'failure', '{}', 'delay', p.delay,
    'updated', Engine.now)
  if not old then redis.call('hset', key, 'created', Engine.now) end
  if p.trigger then
    -- The full list of needs lets run.retry re-arm jobs (see commands/run_admin.lua).
    redis.call('hset', key, 'needs', #p.depends == 0 and '[]' or cjson.encode(p.depends))
    if p.trigger == 'all_success' then
      redis.call('hdel', key, 'trigger')
    else
      redis.call('hset', key, 'trigger', p.trigger)
    end
  end
  redis.call('hdel', key, 'grace', 'result')
  if old then redis.call('hdel', key, unpack(OPTION_FIELDS)) end
  local ours = {}
  if p.ttl then table.insert(ours, 'ttl'); table.insert(ours, p.ttl) end
  if p.ttr then table.insert(ours, 'ttr'); table.insert(ours, p.ttr) end
  if p.ckey then
    table.insert(ours, 'ckey'); table.insert(ours, p.ckey)
    table.insert(ours, 'climit'); table.insert(ours, p.climit)
  end
  if p.throttle then table.insert(ours, 'throttle'); table.insert(ours, p.throttle) end
  if #ours > 0 then redis.call('hset', key, unpack(ours)) end

  local pending = 0
  for _, dependency in ipairs(p.depends) do
    local state = redis.call('hget', Keys.job(dependency), 'state')
    -- qless treats a dependency that is complete or does not exist as already satisfied.
    if state and state ~= 'complete' then
      redis.call('sadd', Keys.dependencies(jid), dependency)
      redis.call('sadd', Keys.dependents(dependency), jid)
      pending = pending + 1
    end
  end

  Job.history(jid, 'put', { q = queue })
  if pending > 0 then
    redis.call('zadd', Keys.depends(queue), Engine.now, jid)
    redis.call('hset', key, 'state', 'depends')
  else
    Queue.release(queue, jid, priority, p.delay)
    if p.ttl then Queue.arm_ttl(queue, jid, p.ttl, p.delay) end
  end
  -- flow.submit counts its puts per queue once (include/runs.lua).
  if not p.uncounted then Stats.bump(queue, 'put', 1) end
  redis.call('zadd', Keys.queues(), 'NX', Engine.now, queue)
  Events.tracked('put', jid)
  Events.log({ jid = jid, event = 'put', queue = queue })
  return jid
end

