-- lock: who holds a running job, checked before a worker's complete, retry or heartbeat.
-- A worker holds a job while the job is running, names it as its worker, and its lock has not
-- expired: after expiry (or `timeout`) its late calls are refused, even before another worker
-- takes the job, so a stale worker can never finish a job it no longer owns.
-- @include keys
-- @include engine
-- @include errors
-- @include job
local Lock = {}

-- Check that `worker` holds the running job `jid` of `queue`; returns its fields.
-- Shared by complete, retry and heartbeat.
function Lock.check_owner(cmd, jid, worker, queue)
  local fields = Job.fields(jid, 'queue', 'worker', 'expires', 'priority', 'retries',
    'remaining', 'popped', 'failure', 'tags')
  if not fields then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist')
  end
  if fields.state ~= 'running' then
    Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is not currently running: ' .. fields.state)
  end
  if fields.worker ~= worker then
    Err.raise('LOCKLOST', cmd .. '(): Job ' .. jid .. ' has been handed to another worker: ' .. fields.worker)
  end
  if queue and fields.queue ~= queue then
    Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is running in another queue: ' .. fields.queue)
  end
  if (tonumber(fields.expires) or 0) < Engine.now then
    Err.raise('LOCKLOST', cmd .. '(): Job ' .. jid .. "'s lock expired at " .. fields.expires ..
      ' (now ' .. Engine.now .. ')')
  end
  return fields
end

-- The job leaves its worker: no longer locked, no longer in the worker's jobs.
function Lock.release(jid, queue, worker)
  redis.call('zrem', Keys.locks(queue), jid)
  redis.call('zrem', Keys.worker_jobs(worker), jid)
end

