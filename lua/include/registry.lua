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

-- The last worker that listened on a queue once it is gone: `P workers-last`, queue -> JSON
-- {worker, seen}, written when a worker leaves `workers` with its registration (worker.deregister:
-- seen = when it deregistered; Registry.prune: its last activity), so job.explain can still name
-- it. Bounded: a registration's first Registry.LAST_QUEUES queues are kept, and the hash holds
-- at most Registry.LAST_MAX queues (the one whose worker was seen longest ago makes room).
Registry.LAST_QUEUES = 100
Registry.LAST_MAX = 1000

-- The last worker that listened on `queue` and left, as {worker, seen}, or nil.
function Registry.last(queue)
  local text = redis.call('hget', Keys.workers_last(), queue)
  if not text then return nil end
  local ok, entry = pcall(cjson.decode, text)
  if not ok or type(entry) ~= 'table' or type(entry.worker) ~= 'string'
    or type(entry.seen) ~= 'number' then
    return nil
  end
  return entry
end

-- Keep `worker` (last heard from at `seen`) as the last worker of each queue its registration
-- lists, unless one seen later is kept already. Call it before the registration is dropped.
function Registry.remember(worker, seen)
  local info = Registry.info(worker, false)
  if not info or type(info.queues) ~= 'table' then return end
  local entry = cjson.encode({ worker = worker, seen = seen })
  local changes = {}
  for i, queue in ipairs(info.queues) do
    if i > Registry.LAST_QUEUES then break end
    if type(queue) == 'string' and #queue > 0 and #queue <= 256 then
      local known = Registry.last(queue)
      if not known or known.seen <= seen then
        table.insert(changes, queue)
        table.insert(changes, entry)
      end
    end
  end
  if #changes == 0 then return end
  local key = Keys.workers_last()
  redis.call('hset', key, unpack(changes))
  local over = redis.call('hlen', key) - Registry.LAST_MAX
  if over <= 0 then return end
  -- Rare (more queues than LAST_MAX had workers): drop the ones seen longest ago.
  local all, kept = redis.call('hgetall', key), {}
  for i = 1, #all, 2 do
    local ok, known = pcall(cjson.decode, all[i + 1])
    local when = ok and type(known) == 'table' and tonumber(known.seen) or -math.huge
    table.insert(kept, { queue = all[i], seen = when })
  end
  table.sort(kept, function(a, b) return a.seen < b.seen end)
  local dropped = {}
  for i = 1, over do table.insert(dropped, kept[i].queue) end
  redis.call('hdel', key, unpack(dropped))
end

-- Drop workers silent for longer than max-worker-age, with their registrations and what an idle
-- one was left (its inbox, its waiting: include/handoff.lua), at most Registry.PRUNE_PER_CALL of
-- them, each kept as its queues' last worker (Registry.remember). Returns how many were dropped.
function Registry.prune()
  local cutoff = Engine.now - Config.number('max-worker-age')
  local dead = redis.call('zrangebyscore', Keys.workers(), '-inf', cutoff, 'WITHSCORES', 'LIMIT',
    0, Registry.PRUNE_PER_CALL)
  for i = 1, #dead, 2 do
    local worker = dead[i]
    Registry.remember(worker, tonumber(dead[i + 1]))
    redis.call('zrem', Keys.workers(), worker)
    redis.call('del', Keys.worker_info(worker), Keys.inbox(worker), Keys.worker_waiting(worker))
  end
  return #dead / 2
end

-- Workers active within max-worker-age, most recently active first.
function Registry.live()
  local cutoff = Engine.now - Config.number('max-worker-age')
  return redis.call('zrevrangebyscore', Keys.workers(), '+inf', '(' .. string.format('%.17g', cutoff))
end
