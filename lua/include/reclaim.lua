-- reclaim: taking back the jobs of workers whose locks expired (used by pop and housekeeping).
--
-- Two rules for what an expired lock costs a job:
-- * qless's (every call in the qless dialect, and qless's own `pop` command in either dialect,
--   which `Queue.pop` of the Python client calls): each expiry after the grace period uses up
--   one of the job's retries; none left, it fails in failed-retries-<queue>;
-- * ours (`pop.lean`, `await`, hand-offs, `maintain` in the native dialect: our worker, flows and
--   the scheduler service): a lost worker is not the job's own error, so its retries are left alone. The job runs again at
--   most `lost-worker-retries` times (default 2) after lost workers (counted in its `lost`
--   field); the next loss fails it in group `worker-lost` with a message naming the worker and
--   when its lock expired.
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include job
-- @include queue
-- @include failing
-- @include registry
-- @include dialect

Queue.LOST_GROUP = 'worker-lost'

-- Epoch seconds as ISO 8601 UTC text, to the second (Lua in Redis has no os.date).
local function iso_utc(t)
  local secs = math.floor(t)
  local days = math.floor(secs / 86400)
  local rest = secs - days * 86400
  -- Days since 1970-01-01 to a civil date (proleptic Gregorian), in 400-year eras.
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02dZ', year, month, day,
    math.floor(rest / 3600), math.floor(rest % 3600 / 60), rest % 60)
end

local function exhaust(queue, jid, worker)
  Job.fail(jid, { state = 'running', queue = queue, worker = worker }, worker,
    'failed-retries-' .. queue, 'Job exhausted retries in queue "' .. queue .. '"', nil, 'lock')
end

-- `what` expired at `expires`: the job's 'lock', or the worker's 'lease' (include/lease.lua).
local function lost(queue, jid, worker, expires, allowance, what)
  local known = Registry.identity(worker)
  local where = ''
  if known.host or known.pid then
    where = ' (host ' .. tostring(known.host or '?') .. ', pid ' .. tostring(known.pid or '?') .. ')'
  end
  local runs = allowance == 1 and ' time' or ' times'
  Job.fail(jid, { state = 'running', queue = queue, worker = worker }, worker, Queue.LOST_GROUP,
    'Worker "' .. worker .. '"' .. where .. ' was lost: its ' .. what .. ' expired at ' ..
    iso_utc(tonumber(expires) or Engine.now) .. ' and the job had already run again ' ..
    allowance .. runs .. ' after lost workers (lost-worker-retries ' .. allowance ..
    '); its own retries are untouched')
end

-- Whether the job may run again after losing its worker (our rule); fails it when not.
-- `what` (default 'lock') and `expires`: what expired when, for the failure's message.
function Queue.survives(queue, jid, worker, expires, allowance, what)
  local count = tonumber(redis.call('hincrby', Keys.job(jid), 'lost', 1))
  if count <= allowance then return true end
  lost(queue, jid, worker, expires, allowance, what or 'lock')
  return false
end
local survives = Queue.survives

-- Expired locks of `queue` (at most `limit`). The first expiry of a lock gives its worker a
-- grace period (lock_lost, history 'timed-out'); the next one returns the job for the caller to
-- hand out, or fails it: under qless's rule (`qless_rule`, or any call in the qless dialect) it
-- uses up a retry (failed-retries-<queue> when none are left), else it counts against
-- lost-worker-retries (see the top of this file).
-- A returned job stops running, so it gives back its concurrency-key and throttle slots
-- (include/slots.lua), unless `handing_out`: pop gives it straight to its new worker, slots and all.
-- Returns the reclaimed jids and how many jobs were failed.
function Queue.invalidate_locks(queue, limit, handing_out, qless_rule)
  local reclaimed = {}
  local expired = redis.call('zrangebyscore', Keys.locks(queue), '-inf', Engine.now, 'LIMIT', 0, limit)
  if #expired == 0 then return reclaimed, 0 end
  local grace, allowance = Config.values('grace-period', 'lost-worker-retries')
  grace, allowance = tonumber(grace), tonumber(allowance) or 0
  local failed = 0
  for _, jid in ipairs(expired) do
    local fields = Job.fields(jid, 'worker', 'grace', 'expires', 'remaining')
    local worker = fields and fields.worker or ''
    local warned = fields and fields.grace == '1'
    if not fields then
      redis.call('zrem', Keys.locks(queue), jid) -- an index entry without a job: drop it
    elseif grace > 0 and not warned then
      redis.call('zrem', Keys.worker_jobs(worker), jid)
      redis.call('zadd', Keys.locks(queue), Engine.now + grace, jid)
      redis.call('hset', Keys.job(jid), 'grace', 1)
      Job.history(jid, 'timed-out', Dialect.entry_by(worker))
      Stats.bump(queue, 'retries', 1)
      Events.tracked('stalled', jid)
      Events.to_worker(worker, 'lock_lost', jid)
    else
      if grace <= 0 then
        if Dialect.rules.timeout_always_recorded then Job.history(jid, 'timed-out') end
        Events.tracked('stalled', jid)
        Events.to_worker(worker, 'lock_lost', jid)
        Stats.bump(queue, 'retries', 1)
      end
      redis.call('zrem', Keys.worker_jobs(worker), jid)
      local again
      if qless_rule or Dialect.rules.lost_lock_uses_retry then
        -- Read, not HINCRBY: the hash leaves `remaining` out while it equals retries.
        local remaining = tonumber(fields.remaining) - 1
        redis.call('hset', Keys.job(jid), 'remaining', remaining)
        again = remaining >= 0
        if not again then exhaust(queue, jid, worker) end
      else
        again = survives(queue, jid, worker, fields.expires, allowance)
      end
      if again then
        redis.call('hdel', Keys.job(jid), 'grace', 'cclaim') -- its next start claims again
        if not handing_out then Slots.stopped(jid, queue, nil) end
        table.insert(reclaimed, jid)
      else
        failed = failed + 1
      end
    end
  end
  return reclaimed, failed
end

