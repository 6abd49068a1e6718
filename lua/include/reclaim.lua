-- reclaim: taking back the jobs of workers whose locks expired (used by pop and housekeeping).
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include job
-- @include queue
-- @include failing

local function exhaust(queue, jid, worker)
  Job.fail(jid, { state = 'running', queue = queue, worker = worker }, worker,
    'failed-retries-' .. queue, 'Job exhausted retries in queue "' .. queue .. '"', nil, 'lock')
end

-- Expired locks of `queue` (at most `limit`). The first expiry of a lock gives its worker a
-- grace period (lock_lost, history 'timed-out'); the next one uses up a retry and returns the
-- job for the caller to hand out, or fails it as failed-retries-<queue> when none are left.
-- A returned job stops running, so it gives back its concurrency-key and throttle slots
-- (include/slots.lua), unless `handing_out`: pop gives it straight to its new worker, slots and all.
function Queue.invalidate_locks(queue, limit, handing_out)
  local reclaimed = {}
  local expired = redis.call('zrangebyscore', Keys.locks(queue), '-inf', Engine.now, 'LIMIT', 0, limit)
  if #expired == 0 then return reclaimed end
  local grace = Config.number('grace-period')
  for _, jid in ipairs(expired) do
    local fields = Job.fields(jid, 'worker', 'grace', 'remaining')
    local worker = fields and fields.worker or ''
    local warned = fields and fields.grace == '1'
    if not fields then
      redis.call('zrem', Keys.locks(queue), jid) -- an index entry without a job: drop it
    elseif grace > 0 and not warned then
      redis.call('zrem', Keys.worker_jobs(worker), jid)
      redis.call('zadd', Keys.locks(queue), Engine.now + grace, jid)
      redis.call('hset', Keys.job(jid), 'grace', 1)
      Job.history(jid, 'timed-out', not Engine.qless and { worker = worker } or nil)
      Stats.bump(queue, 'retries', 1)
      Events.tracked('stalled', jid)
      Events.to_worker(worker, 'lock_lost', jid)
    else
      if grace <= 0 then
        -- qless records the time-out whatever the grace period.
        if Engine.qless then Job.history(jid, 'timed-out') end
        Events.tracked('stalled', jid)
        Events.to_worker(worker, 'lock_lost', jid)
        Stats.bump(queue, 'retries', 1)
      end
      redis.call('zrem', Keys.worker_jobs(worker), jid)
      local remaining = tonumber(redis.call('hincrby', Keys.job(jid), 'remaining', -1))
      if remaining < 0 then
        exhaust(queue, jid, worker)
      else
        redis.call('hdel', Keys.job(jid), 'grace')
        if not handing_out then Slots.stopped(jid, queue, nil) end
        table.insert(reclaimed, jid)
      end
    end
  end
  return reclaimed
end

