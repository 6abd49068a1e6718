-- heartbeat: the worker holding a job renews its lock (and may update the job's data).
--
--   heartbeat jid, worker, [data]  -> the new expiry time
--
-- The lock is renewed from now for the job's ttr (a put option, ours), else the queue's
-- heartbeat. Refused once the lock expired, was taken by another worker, or the job was moved or
-- canceled: the worker must stop the job.
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE, LOCKLOST.
-- @include args
-- @include job
-- @include lock

api['heartbeat'] = function(args)
  local cmd = 'Heartbeat'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local data
  if args[3] ~= nil and args[3] ~= '' then data = Arg.json(cmd, 'data', args[3], 'payload') end
  local fields = Lock.check_owner(cmd, jid, worker, nil)

  local expires = Engine.now + (tonumber(fields.ttr) or Config.heartbeat(fields.queue))
  local key = Keys.job(jid)
  redis.call('hset', key, 'expires', expires, 'updated', Engine.now)
  if data then redis.call('hset', key, 'data', data) end
  redis.call('zadd', Keys.locks(fields.queue), expires, jid)
  redis.call('zadd', Keys.worker_jobs(worker), expires, jid)
  redis.call('zadd', Keys.workers(), Engine.now, worker)
  -- As exact text: an integer reply would truncate fractional seconds, tostring round them.
  return string.format('%.17g', expires)
end
