-- complete: the worker holding a job finishes it.
--
--   complete jid, worker, queue, data, ['next', q], ['delay', d], ['depends', JSON],
--            ['result', JSON]                     -> 'complete', 'waiting', 'scheduled' or 'depends'
--
-- Without `next` the job is complete: kept by jobs-history (age) and jobs-history-count, and every
-- dependent whose last dependency this was is released in this same call. With `next` it moves
-- to that queue (waiting, scheduled after `delay`, or waiting for `depends`), retries reset.
-- `result` (our extension) is JSON text stored on the job as its result (a flow step's outputs).
-- The call succeeds once per pop: a second complete, or one from a worker whose lock expired or
-- was taken away, is refused.
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE (not running, or running in another queue),
-- LOCKLOST (another worker holds it, or the lock expired).
-- @include args
-- @include job
-- @include queue
-- @include triggers
-- @include lock
local COMPLETE_OPTIONS = { next = true, delay = true, depends = true, result = true }

api['complete'] = function(args)
  local cmd = 'Complete'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local queue = Arg.id(cmd, 'queue', args[3])
  local data = Arg.json(cmd, 'data', args[4], 'object')
  local options = Arg.options(cmd, args, 5, COMPLETE_OPTIONS)
  local next_queue, delay, depends, result
  if options.next then next_queue = Arg.id(cmd, 'next', options.next) end
  if options.delay then delay = Arg.number(cmd, 'delay', options.delay, 0) end
  if options.depends then
    depends = Arg.id_list(cmd, 'depends', options.depends, Arg.jid, Engine.MAX_COUNT)
    for _, dependency in ipairs(depends) do
      if dependency == jid then Arg.fail(cmd, 'Arg "depends": job ' .. jid .. ' cannot depend on itself') end
    end
  end
  if options.result then result = Arg.json(cmd, 'result', options.result, 'any') end
  if (delay or depends) and not next_queue then
    Arg.fail(cmd, '"delay" and "depends" need "next" (the queue to move the job to)')
  end
  local fields = Lock.check_owner(cmd, jid, worker, queue)

  local key = Keys.job(jid)
  Lock.release(jid, queue, worker, fields)
  Stats.sample(queue, 'run', Engine.now - (tonumber(fields.popped) or Engine.now))
  Job.history(jid, 'done', { worker = worker })
  redis.call('hset', key, 'data', data, 'worker', '', 'expires', 0, 'updated', Engine.now)
  redis.call('hdel', key, 'grace')
  if result then redis.call('hset', key, 'result', result) end
  redis.call('zadd', Keys.workers(), Engine.now, worker)
  Events.tracked('completed', jid)

  if next_queue then
    Events.log({ jid = jid, event = 'advanced', queue = queue, to = next_queue })
    redis.call('hset', key, 'queue', next_queue, 'remaining', fields.retries, 'delay', delay or 0)
    redis.call('zadd', Keys.queues(), 'NX', Engine.now, next_queue)
    Job.history(jid, 'put', { q = next_queue })
    local pending = 0
    for _, dependency in ipairs(depends or {}) do
      local state = redis.call('hget', Keys.job(dependency), 'state')
      if state and state ~= 'complete' then
        redis.call('sadd', Keys.dependencies(jid), dependency)
        redis.call('sadd', Keys.dependents(dependency), jid)
        pending = pending + 1
      end
    end
    if pending > 0 then
      redis.call('zadd', Keys.depends(next_queue), Engine.now, jid)
      redis.call('hset', key, 'state', 'depends')
      return 'depends'
    end
    return Queue.release(next_queue, jid, tonumber(fields.priority) or 0, delay)
  end

  Events.log({ jid = jid, event = 'completed', queue = queue })
  redis.call('hset', key, 'state', 'complete')
  redis.call('zadd', Keys.completed(), Engine.now, jid)
  Deps.settle(jid, 'complete')
  redis.call('del', Keys.dependents(jid))
  Job.expire_completed(100)
  return 'complete'
end
