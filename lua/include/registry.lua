-- registry: what workers registered about themselves (Blueque's listener registry), used where
-- the engine records or lists who ran a job.
--
-- A worker's registration is `w:<worker>:info` (JSON object, opaque to the engine; the Python
-- worker stores host, pid, queues, threads, strategy, started) and its last activity is its
-- score in `workers`. A worker silent for longer than `max-worker-age` seconds is dead: its
-- entry and its registration are dropped together (Registry.prune), never one without the other.
-- @include keys
-- @include engine
-- @include config
local Registry = {}

-- Registrations larger than this are not copied into job history (the Python worker's is about
-- 200 bytes; decoding a huge one on every pop would slow pops down).
Registry.MAX_STAMP_BYTES = 8192
-- Dead workers one call drops at most (the next call drops more).
Registry.PRUNE_PER_CALL = 100

-- The decoded registration of `worker`, or nil (none, not JSON, or too large when `small`).
function Registry.info(worker, small)
  local text = redis.call('get', Keys.worker_info(worker))
  if not text or (small and #text > Registry.MAX_STAMP_BYTES) then return nil end
  local ok, info = pcall(cjson.decode, text)
  if not ok or type(info) ~= 'table' then return nil end
  return info
end

-- Copy the host and pid `entry.worker` registered into a history entry, so a job records which
-- process ran it even after that worker is gone. Entries without a registered worker, and host
-- or pid already in the entry, are left as they are.
function Registry.stamp(entry)
  local worker = entry.worker
  if type(worker) ~= 'string' or worker == '' or (entry.host ~= nil and entry.pid ~= nil) then
    return entry
  end
  local info = Registry.info(worker, true)
  if not info then return entry end
  if entry.host == nil and type(info.host) == 'string' then entry.host = info.host end
  if entry.pid == nil and (type(info.pid) == 'number' or type(info.pid) == 'string') then
    entry.pid = info.pid
  end
  return entry
end

-- Drop workers silent for longer than max-worker-age, with their registrations (at most
-- Registry.PRUNE_PER_CALL of them). Returns how many were dropped.
function Registry.prune()
  local cutoff = Engine.now - Config.number('max-worker-age')
  local dead = redis.call('zrangebyscore', Keys.workers(), '-inf', cutoff, 'LIMIT', 0,
    Registry.PRUNE_PER_CALL)
  for _, worker in ipairs(dead) do
    redis.call('zrem', Keys.workers(), worker)
    redis.call('del', Keys.worker_info(worker))
  end
  return #dead
end

-- Workers active within max-worker-age, most recently active first.
function Registry.live()
  local cutoff = Engine.now - Config.number('max-worker-age')
  return redis.call('zrevrangebyscore', Keys.workers(), '+inf', '(' .. string.format('%.17g', cutoff))
end
