-- lock: who holds a running job, checked before a worker's complete, retry, heartbeat or fail.
-- A worker holds a job while the job is running, names it as its worker, and its lock is valid:
-- `expires > now` and not taken away (`grace` is set once the worker was told lock_lost, by
-- `timeout` or a pop after expiry). After that its late calls are refused, even before another
-- worker takes the job and whatever its clock says, so a stale worker can never finish a job it
-- no longer owns. `expires <= now` is also what pop, `queues` and `workers` count as stalled.
-- @include keys
-- @include engine
-- @include errors
-- @include job
-- @include dialect
local Lock = {}

-- Whether a running job's lock (its hash fields `expires` and `grace`) is still valid.
function Lock.valid(fields)
  return fields.grace ~= '1' and (tonumber(fields.expires) or 0) > Engine.now
end

-- Raise LOCKLOST unless `worker` holds the running job `jid` (fields: state, worker, expires,
-- grace) with a valid lock.
function Lock.check_held(cmd, jid, worker, fields)
  if fields.worker ~= worker then
    -- A qless heartbeat's words: Qless.error.
    Err.raise('LOCKLOST', cmd .. '(): Job ' .. jid .. ' has been handed to another worker: ' ..
      fields.worker)
  end
  if Dialect.rules.lock_held_until_taken then return end
  if not Lock.valid(fields) then
    Err.raise('LOCKLOST', cmd .. '(): Job ' .. jid .. "'s lock expired at " .. tostring(fields.expires) ..
      ' (now ' .. Engine.now .. ')')
  end
end

-- Check that `worker` holds the running job `jid` of `queue`, from the job's `fields` (at least
-- state, queue, worker, expires, grace; nil when there is no job); returns them.
function Lock.check_fields(cmd, jid, worker, queue, fields)
  if not fields then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist')
  end
  if fields.state ~= 'running' then
    Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is not currently running: ' .. fields.state)
  end
  if queue and fields.queue ~= queue and fields.worker == worker then
    Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is running in another queue: ' .. fields.queue)
  end
  Lock.check_held(cmd, jid, worker, fields)
  return fields
end

-- Lock.check_fields on the fields read here; returns them. Shared by retry, heartbeat, fail,
-- release, touch and bury (complete reads fewer fields itself).
function Lock.check_owner(cmd, jid, worker, queue)
  local fields = Job.fields(jid, 'queue', 'worker', 'expires', 'grace', 'priority', 'retries',
    'remaining', 'popped', 'failure', 'tags', 'ttr', 'ttl_at', 'ckey', 'climit', 'throttle')
  return Lock.check_fields(cmd, jid, worker, queue, fields)
end

-- The job leaves its worker: no longer locked, no longer in the worker's jobs; it gives back its
-- concurrency-key and throttle slots (include/slots.lua), and a ttl deadline it has is looked at
-- again on time (include/ttl.lua). `fields` as Lock.check_owner returns them (nil: read the job).
function Lock.release(jid, queue, worker, fields)
  redis.call('zrem', Keys.locks(queue), jid)
  redis.call('zrem', Keys.worker_jobs(worker), jid)
  Lock.released(jid, queue, fields)
end

-- Lock.release but for the two index entries, which the caller removes (complete does it once
-- for a batch of jobs).
function Lock.released(jid, queue, fields)
  if fields == nil then fields = Job.fields(jid, 'ttl_at', 'ckey', 'climit', 'throttle') or {} end
  Slots.stopped(jid, queue, Slots.gates(fields.ckey, fields.climit, fields.throttle))
  if fields.ttl_at then redis.call('zadd', Keys.ttl(queue), fields.ttl_at, jid) end
end
