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

-- The host and pid of each registration text seen lately ({host, pid}, each nil when absent or
-- not a string / number). Which they are depends on nothing but the text, so this memo may
-- outlive a call (lua/README.md, per-call state): a worker's many pops and completes decode its
-- registration once, and a changed registration is a new text. Bounded, small texts only.
local identities = { by_text = {}, count = 0, MAX = 128, MAX_BYTES = 1024, NONE = {} }

local function identity_of(text)
  local known = identities.by_text[text]
  if known then return known end
  local ok, info = pcall(cjson.decode, text)
  known = identities.NONE
  if ok and type(info) == 'table' then
    local pid = info.pid
    if type(pid) ~= 'number' and type(pid) ~= 'string' then pid = nil end
    known = { host = type(info.host) == 'string' and info.host or nil, pid = pid }
  end
  if #text <= identities.MAX_BYTES then
    if identities.count >= identities.MAX then identities.by_text, identities.count = {}, 0 end
    identities.by_text[text] = known
    identities.count = identities.count + 1
  end
  return known
end

-- What `worker` registered of itself for job history: a table {host, pid} (read only; either
-- may be nil), empty when it has no registration, one that is not JSON, or one too large.
function Registry.identity(worker)
  if type(worker) ~= 'string' or worker == '' then return identities.NONE end
  local text = redis.call('get', Keys.worker_info(worker))
  if not text or #text > Registry.MAX_STAMP_BYTES then return identities.NONE end
  return identity_of(text)
end

-- Copy the host and pid `entry.worker` registered into a history entry, so a job records which
-- process ran it even after that worker is gone. Entries without a registered worker, and host
-- or pid already in the entry, are left as they are.
function Registry.stamp(entry)
  if entry.host ~= nil and entry.pid ~= nil then return entry end
  local known = Registry.identity(entry.worker)
  if entry.host == nil then entry.host = known.host end
  if entry.pid == nil then entry.pid = known.pid end
  return entry
end

-- Drop workers silent for longer than max-worker-age, with their registrations and what an idle
-- one was left (its inbox, its waiting: include/handoff.lua), at most Registry.PRUNE_PER_CALL of
-- them. Returns how many were dropped.
function Registry.prune()
  local cutoff = Engine.now - Config.number('max-worker-age')
  local dead = redis.call('zrangebyscore', Keys.workers(), '-inf', cutoff, 'LIMIT', 0,
    Registry.PRUNE_PER_CALL)
  for _, worker in ipairs(dead) do
    redis.call('zrem', Keys.workers(), worker)
    redis.call('del', Keys.worker_info(worker), Keys.inbox(worker), Keys.worker_waiting(worker))
  end
  return #dead
end

-- Workers active within max-worker-age, most recently active first.
function Registry.live()
  local cutoff = Engine.now - Config.number('max-worker-age')
  return redis.call('zrevrangebyscore', Keys.workers(), '+inf', '(' .. string.format('%.17g', cutoff))
end
