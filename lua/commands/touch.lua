-- touch: the worker holding a job gives it more time (ours, Tarantool's touch).
--
--   touch jid, worker, increment  -> the new lock expiry (exact text)
--
-- The lock is extended by `increment` seconds from its current expiry, and so is the job's time
-- to run: its ttr (the queue's heartbeat when it had none) grows by `increment`, so later
-- heartbeats renew for the longer time too. A job with a ttl deadline (include/ttl.lua) gets it
-- moved by `increment` as well. An increment of 0 changes nothing. Counted in the queue's
-- statistics (touch).
-- Errors: INVALID, NOTFOUND, WRONGSTATE, LOCKLOST (as heartbeat).
-- @include args
-- @include job
-- @include lock
-- @include config

api['touch'] = function(args)
  local cmd = 'Touch'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local increment = Arg.number(cmd, 'increment', args[3], 0)
  if args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local fields = Lock.check_owner(cmd, jid, worker, nil)
  local expires = tonumber(fields.expires)
  if increment > 0 then
    local queue = fields.queue
    expires = expires + increment
    local ttr = (tonumber(fields.ttr) or Config.heartbeat(queue)) + increment
    local key = Keys.job(jid)
    redis.call('hset', key, 'expires', expires, 'ttr', ttr, 'updated', Engine.now)
    redis.call('zadd', Keys.locks(queue), expires, jid)
    redis.call('zadd', Keys.worker_jobs(worker), expires, jid)
    if fields.ttl_at then
      local deadline = tonumber(fields.ttl_at) + increment
      redis.call('hset', key, 'ttl_at', string.format('%.17g', deadline))
    end
    Job.history(jid, 'touched', { worker = worker, increment = increment })
    Stats.bump(queue, 'touch', 1)
    redis.call('zadd', Keys.workers(), Engine.now, worker)
  end
  return string.format('%.17g', expires)
end
