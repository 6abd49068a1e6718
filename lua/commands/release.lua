-- release: the worker holding a job hands it back without using a retry (Tarantool's release).
--
--   release jid, worker, [delay=0]  -> 'waiting' or 'scheduled'
--
-- Used by a worker that shuts down before its jobs finish, or by a job that asks to run later.
-- The job keeps its retries; history records 'released'; it counts in the queue's `release`
-- statistic (ours).
-- Errors: INVALID, NOTFOUND, WRONGSTATE, LOCKLOST.
-- @include args
-- @include job
-- @include queue
-- @include lock

api['release'] = function(args)
  local cmd = 'Release'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local delay = Arg.optional_number(cmd, 'delay', args[3], 0, 0)
  local fields = Lock.check_owner(cmd, jid, worker, nil)

  Lock.release(jid, fields.queue, worker, fields)
  redis.call('hset', Keys.job(jid), 'updated', Engine.now)
  -- No worker and no expiry, their defaults (Job.DEFAULTS); its next start claims again.
  redis.call('hdel', Keys.job(jid), 'worker', 'expires', 'grace', 'cclaim')
  Job.history(jid, 'released', { worker = worker, delay = delay })
  Stats.bump(fields.queue, 'release', 1)
  redis.call('zadd', Keys.workers(), Engine.now, worker)
  return Queue.release(fields.queue, jid, tonumber(fields.priority) or 0, delay)
end
