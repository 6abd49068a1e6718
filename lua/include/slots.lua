-- slots: concurrency keys and throttles (ours: Tarantool's utube sub-queues, generalised, and
-- Sidekiq Enterprise-style named throttles).
--
-- A job put with ('concurrency_key', k) holds a slot of key k in its queue while it runs: at most
-- its `concurrency_limit` (default 1, utube's one at a time) jobs of k run at once. A job put with
-- ('throttle', name) holds a slot of that throttle while it runs, whatever its queue: at most the
-- throttle's limit (throttle.set; none set: no bound) run at once. A job may have both.
--
-- Counting. A slot is taken when pop hands a job out (Slots.started) and given back in the same
-- call that ends the run (Slots.stopped): complete, fail, fail.held, retry, release, bury, cancel,
-- delete, a put over the running job, a lock reclaimed by `maintain` or failed for want of
-- retries. A lock that pop reclaims goes straight to the new worker, and its slot with it; during
-- a lock's grace period (and after `timeout`) the slot stays taken: the old worker may still run.
--
-- Parking keeps pop bounded. Pop looks at no more than `count + Slots.LOOKAHEAD` waiting jobs; a
-- job whose key or throttle is full leaves the work queue for a parked set (same score), so no
-- later pop looks at it again until a slot frees. Whenever a slot frees, a parked job's stand-in
-- leaves the work queue unstarted, or a throttle's limit rises, up to (free slots) parked jobs of
-- that key (per queue, for a throttle) go back to the work queue with their old scores: within a
-- key jobs still start in priority order, then in put order.
--
-- A job with both: its key is looked at first. One whose key has room but whose throttle is full
-- reserves its key's slot while it waits for the throttle (counted as if running), so later jobs
-- of the key cannot overtake it; it starts on that reservation, or gives it back if it leaves.
--
-- Job fields: ckey, climit, throttle, parked ('k' or 't') while the job is parked, and reserved
-- ('1') while it holds its key's slot waiting for the throttle.
-- @include keys
-- @include engine
-- @include events
-- @include work
local Slots = {}

-- Waiting jobs a pop may look at beyond the number it was asked for.
Slots.LOOKAHEAD = 100
-- Parked jobs moved back to one queue by one refill at most (bounds a call that raises or
-- removes a throttle's limit while many jobs are parked).
Slots.MAX_REFILL = 1000

-- A job's gates from its hash fields ckey, climit, throttle, reserved (as read): a table, or
-- false.
function Slots.gates(ckey, climit, throttle, reserved)
  if not ckey and not throttle then return false end
  return { ckey = ckey or nil, climit = tonumber(climit) or 1, throttle = throttle or nil,
    reserved = reserved == '1' }
end

-- The gates of job `jid` (false: none), and where it is parked (false: not parked).
function Slots.of(jid)
  local f = redis.call('hmget', Keys.job(jid), 'ckey', 'climit', 'throttle', 'reserved', 'parked')
  return Slots.gates(f[1], f[2], f[3], f[4]), f[5]
end

local function key_running(queue, key)
  return tonumber(redis.call('hget', Keys.key_running(queue), key)) or 0
end

local function throttle_running(name)
  return tonumber(redis.call('hget', Keys.throttle_running(), name)) or 0
end

-- A throttle's limit, or nil when none is set.
function Slots.throttle_limit(name)
  return tonumber(redis.call('hget', Keys.throttles(), name))
end

-- Which gate keeps a job with gates `g` from starting in `queue` now: 'k' (its concurrency key is
-- full), 't' (its throttle is full), or nil.
function Slots.blocked(queue, g)
  if g.ckey and not g.reserved and key_running(queue, g.ckey) >= g.climit then return 'k' end
  if g.throttle then
    local limit = Slots.throttle_limit(g.throttle)
    if limit and throttle_running(g.throttle) >= limit then return 't' end
  end
  return nil
end

-- Job `jid` with gates `g` starts running in `queue` (on its key's reservation if it has one).
function Slots.started(queue, jid, g)
  if g.reserved then
    redis.call('hdel', Keys.job(jid), 'reserved')
  elseif g.ckey then
    redis.call('hincrby', Keys.key_running(queue), g.ckey, 1)
  end
  if g.throttle then redis.call('hincrby', Keys.throttle_running(), g.throttle, 1) end
end

-- The parked set a job of `queue` with gates `g` waits in for `gate` ('k' or 't').
local function parked_key(queue, g, gate)
  if gate == 'k' then return Keys.key_parked(queue, g.ckey) end
  return Keys.throttle_parked(g.throttle, queue)
end

-- Park a waiting job (already out of the work queue) behind `gate`, keeping its score; one held
-- back by its throttle reserves its key's slot (see the header).
function Slots.park(queue, jid, score, g, gate)
  redis.call('zadd', parked_key(queue, g, gate), score, jid)
  if gate == 't' then
    redis.call('sadd', Keys.throttle_queues(g.throttle), queue)
    if g.ckey and not g.reserved then
      redis.call('hincrby', Keys.key_running(queue), g.ckey, 1)
      redis.call('hset', Keys.job(jid), 'reserved', 1)
    end
  end
  redis.call('zadd', Keys.parked(queue), score, jid)
  redis.call('hset', Keys.job(jid), 'parked', gate)
end

-- Move up to `n` jobs from the parked set `key` back into `queue`'s work queue.
local function unpark(queue, key, n)
  n = math.min(n, Slots.MAX_REFILL)
  if n <= 0 then return end
  local heads = redis.call('zrange', key, 0, n - 1, 'WITHSCORES')
  if #heads == 0 then return end
  for i = 1, #heads, 2 do
    Work.add_scored(queue, heads[i], heads[i + 1])
    redis.call('zrem', Keys.parked(queue), heads[i])
    redis.call('hdel', Keys.job(heads[i]), 'parked')
  end
  redis.call('zremrangebyrank', key, 0, #heads / 2 - 1)
  Events.ready(queue)
end

-- Parked jobs of key `key` take the key's free slots (the first one's limit decides).
function Slots.refill_key(queue, key)
  local parked = Keys.key_parked(queue, key)
  local head = redis.call('zrange', parked, 0, 0)[1]
  if not head then return end
  local limit = tonumber(redis.call('hget', Keys.job(head), 'climit')) or 1
  unpark(queue, parked, limit - key_running(queue, key))
end

-- Parked jobs of throttle `name` take its free slots: up to that many from each queue, so a
-- queue nobody pops cannot hold back the others.
function Slots.refill_throttle(name)
  local queues_key = Keys.throttle_queues(name)
  local queues = redis.call('smembers', queues_key)
  if #queues == 0 then return end
  local limit = Slots.throttle_limit(name)
  local free = Slots.MAX_REFILL
  if limit then free = limit - throttle_running(name) end
  if free <= 0 then return end
  for _, queue in ipairs(queues) do
    local parked = Keys.throttle_parked(name, queue)
    unpark(queue, parked, free)
    if redis.call('exists', parked) == 0 then redis.call('srem', queues_key, queue) end
  end
end

local function refill(queue, g)
  if g.ckey then Slots.refill_key(queue, g.ckey) end
  if g.throttle then Slots.refill_throttle(g.throttle) end
end

local function decrement(key, field)
  if tonumber(redis.call('hincrby', key, field, -1)) <= 0 then redis.call('hdel', key, field) end
end

-- The one place every "job stops running" path goes through (via Lock.release or Job.unindex):
-- job `jid` of `queue` gives its slots back, and parked jobs may take them. `g`: its gates as
-- Slots.gates gives them (false: none), or nil to read them from the job.
function Slots.stopped(jid, queue, g)
  if g == nil then g = Slots.of(jid) end
  if not g then return end
  if g.ckey then decrement(Keys.key_running(queue), g.ckey) end
  if g.throttle then decrement(Keys.throttle_running(), g.throttle) end
  refill(queue, g)
end

-- A waiting job of `queue` leaves it without starting (canceled, deleted, expired, buried, put
-- elsewhere, failed): out of the parked sets it may be in, its key's reservation given back, and
-- parked jobs it stood in front of may take its place.
function Slots.left(jid, queue)
  local g, parked = Slots.of(jid)
  if not g then return end
  if parked then
    redis.call('zrem', parked_key(queue, g, parked), jid)
    redis.call('zrem', Keys.parked(queue), jid)
    redis.call('hdel', Keys.job(jid), 'parked')
    if parked == 't' and redis.call('exists', Keys.throttle_parked(g.throttle, queue)) == 0 then
      redis.call('srem', Keys.throttle_queues(g.throttle), queue)
    end
  end
  if g.reserved then
    decrement(Keys.key_running(queue), g.ckey)
    redis.call('hdel', Keys.job(jid), 'reserved')
  end
  refill(queue, g)
end

-- A parked job's priority changed: it keeps its place among equal priorities (see `priority`).
function Slots.rescore(jid, queue, priority, old_priority, span)
  local g, parked = Slots.of(jid)
  if not g or not parked then return end
  local old = tonumber(redis.call('zscore', Keys.parked(queue), jid))
  if not old then return end
  local score = priority * span + (old - old_priority * span)
  redis.call('zadd', Keys.parked(queue), score, jid)
  redis.call('zadd', parked_key(queue, g, parked), score, jid)
end
