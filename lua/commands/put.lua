-- put, requeue: create a job, or move an existing one (any state) into a queue.
--
--   put     worker, queue, jid, klass, data, delay,
--           ['priority', p], ['tags', JSON], ['retries', r], ['depends', JSON]  -> jid
--   requeue the same arguments                                                  -> jid
--
-- A job put with pending dependencies waits in state depends; with a delay too, the delay starts
-- when its last dependency completes (our extension: qless refuses delay with depends). Moving a
-- running job revokes its worker's lock (the worker is told lock_lost unless it is the putter).
-- Priority: lower runs sooner. Options left out keep the existing job's values (retries
-- default 5, priority 0, tags []); dependencies are replaced by `depends` (none when left out).
-- Errors: INVALID (arguments), TOOLARGE (sizes), NOTFOUND (requeue of a job that does not exist).
-- @include args
-- @include job
-- @include queue
local PUT_OPTIONS = { priority = true, tags = true, retries = true, depends = true }

local function parse_put(cmd, args)
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
      if dependency == p.jid then Arg.fail(cmd, 'job ' .. p.jid .. ' cannot depend on itself') end
    end
  end
  return p
end

-- Write a checked put. `old` is the existing job's fields (or nil).
local function write_put(p, old)
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
  redis.call('hdel', key, 'grace', 'result')

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
  end
  redis.call('zadd', Keys.queues(), 'NX', Engine.now, queue)
  Events.tracked('put', jid)
  Events.log({ jid = jid, event = 'put', queue = queue })
  return jid
end

local function put(cmd, args, must_exist)
  local p = parse_put(cmd, args)
  local old = Job.fields(p.jid, 'queue', 'worker', 'failure', 'tags', 'priority', 'retries')
  if must_exist and not old then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. p.jid .. ' does not exist')
  end
  return write_put(p, old)
end

api['put'] = function(args) return put('Put', args, false) end
api['requeue'] = function(args) return put('Requeue', args, true) end
