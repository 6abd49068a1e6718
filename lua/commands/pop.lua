-- pop, peek: hand out the next jobs of a queue / look at them.
--
--   pop   queue, worker, count  -> JSON list of the jobs now running for `worker`
--   peek  queue, count          -> JSON list of the next jobs, not handed out
--
-- pop first reclaims jobs whose lock expired (see Queue.invalidate_locks: grace period, then one
-- retry per expiry), then spawns due recurring jobs and promotes due scheduled ones, then takes
-- waiting jobs: lower priority number first, equal priorities in insertion order. A paused queue
-- gives nothing; `<queue>-max-concurrency` caps the jobs holding a valid lock at once (expired
-- ones are still reclaimed). Each job's lock lasts its ttr when it was put with one, else
-- `<queue>-heartbeat` (else `heartbeat`) seconds.
-- Ours (lua/README.md, "Tarantool queue extensions"): jobs whose ttl deadline passed are expired
-- instead of handed out (include/ttl.lua), and a job whose concurrency key or throttle is full is
-- parked instead (include/slots.lua). A pop looks at no more than `count` + Slots.LOOKAHEAD
-- waiting jobs, so it may return fewer jobs than it could: the jobs it passed over are parked or
-- expired, so the next pop goes on behind them (and is woken on `ready:<queue>` at once).
-- Errors: INVALID.
-- @include args
-- @include job
-- @include queue
-- @include reclaim
-- @include slots
-- @include ttl

-- What pop needs of a job: time (waiting since), ttl_at, ttr, ckey, climit, throttle, state,
-- reserved.
local function candidate(jid)
  return redis.call('hmget', Keys.job(jid), 'time', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle',
    'state', 'reserved')
end

-- Lock a job for `worker` (`f` from candidate()) and record the wait-time sample.
local function hand_out(queue, jid, worker, f, lock)
  local key = Keys.job(jid)
  local since = tonumber(f[1]) or Engine.now
  local expires = Engine.now + (tonumber(f[3]) or lock)
  redis.call('hset', key, 'state', 'running', 'worker', worker, 'expires', expires,
    'popped', Engine.now, 'updated', Engine.now)
  redis.call('zadd', Keys.locks(queue), expires, jid)
  redis.call('zadd', Keys.worker_jobs(worker), expires, jid)
  -- A ttl deadline is looked at again once the lock could have expired (include/ttl.lua).
  if f[2] then redis.call('zadd', Keys.ttl(queue), math.max(tonumber(f[2]), expires), jid) end
  Job.history(jid, 'popped', { worker = worker })
  Stats.sample(queue, 'wait', Engine.now - since)
  Events.tracked('popped', jid)
end

-- Take up to `wanted` waiting jobs of `queue` for `worker`, appending them to `jids`, looking at
-- no more than `wanted + Slots.LOOKAHEAD` of them (see the header). The first batch is exactly as
-- many as wanted (all a queue of plain jobs needs); once jobs had to be passed over, larger ones.
local function take(queue, worker, wanted, lock, jids)
  local budget = wanted + Slots.LOOKAHEAD
  local got, work, size = 0, Keys.work(queue), wanted
  while got < wanted and budget > 0 do
    local batch = redis.call('zrange', work, 0, math.min(size, budget) - 1, 'WITHSCORES')
    if #batch == 0 then return end
    local seen = {}
    for i = 1, #batch, 2 do
      if got >= wanted then break end
      local jid = batch[i]
      budget = budget - 1
      table.insert(seen, jid)
      local f = candidate(jid)
      local gates = Slots.gates(f[4], f[5], f[6], f[8])
      local gate = gates and Slots.blocked(queue, gates)
      if not f[7] then -- an index entry without its job: dropped, never handed out
      elseif f[2] and tonumber(f[2]) <= Engine.now then
        Ttl.expire(jid, { state = 'waiting', queue = queue })
      elseif gate then
        Slots.park(queue, jid, batch[i + 1], gates, gate)
      else
        if gates then Slots.started(queue, jid, gates) end
        hand_out(queue, jid, worker, f, lock)
        table.insert(jids, jid)
        got = got + 1
      end
    end
    -- In slices: unpack() of more than a few thousand values overflows Lua's C stack.
    for first = 1, #seen, 1000 do
      redis.call('zrem', work, unpack(seen, first, math.min(first + 999, #seen)))
    end
    size = math.max(wanted - got, 16)
  end
  -- Stopped by the look-ahead bound: whoever pops next goes on behind the jobs passed over.
  if got < wanted and redis.call('zcard', work) > 0 then Events.ready(queue) end
end

local function describe_all(jids)
  local jobs = {}
  for _, jid in ipairs(jids) do
    local job = Job.describe(jid)
    if job then table.insert(jobs, job) end
  end
  return jobs
end

-- Jobs of `queue` holding a valid lock.
local function running(queue)
  return redis.call('zcount', Keys.locks(queue), Engine.after_now(), '+inf')
end

local function encode_list(list)
  if #list == 0 then return '[]' end
  return cjson.encode(list)
end

api['pop'] = function(args)
  local queue = Arg.id('Pop', 'queue', args[1])
  local worker = Arg.id('Pop', 'worker', args[2])
  local count = Arg.integer('Pop', 'count', args[3], 0, Engine.MAX_COUNT)

  redis.call('zadd', Keys.workers(), Engine.now, worker)
  if redis.call('sismember', Keys.paused(), queue) == 1 then return '[]' end

  -- The concurrency cap counts valid locks only (a job in its grace period counts: its worker may
  -- still run it). Expired ones are reclaimed below, each taking the place it held.
  local max_concurrency = tonumber(Config.get(queue .. '-max-concurrency') or 0) or 0
  if max_concurrency > 0 then
    count = math.max(0, math.min(count, max_concurrency - running(queue)))
  end
  if count == 0 then return '[]' end

  local lock = Config.heartbeat(queue)
  -- Reclaimed jobs go straight to this worker, keeping their concurrency-key and throttle slots.
  local jids = Queue.invalidate_locks(queue, count, true)
  for _, jid in ipairs(jids) do
    redis.call('zrem', Keys.locks(queue), jid)
    hand_out(queue, jid, worker, candidate(jid), lock)
  end
  local wanted = count - #jids
  if max_concurrency > 0 then
    -- Locks that invalidate_locks just put in their grace period took places too.
    wanted = math.min(wanted, max_concurrency - running(queue) - #jids)
  end
  if wanted > 0 then
    Queue.refresh(queue, wanted)
    Ttl.expire_due(queue, Ttl.BATCH)
    take(queue, worker, wanted, lock, jids)
  end
  return encode_list(describe_all(jids))
end

api['peek'] = function(args)
  local queue = Arg.id('Peek', 'queue', args[1])
  local count = Arg.integer('Peek', 'count', args[2], 0, Engine.MAX_COUNT)
  if count == 0 then return '[]' end
  local jids = redis.call('zrangebyscore', Keys.locks(queue), '-inf', Engine.now, 'LIMIT', 0, count)
  if #jids < count then
    Queue.refresh(queue, count - #jids)
    Ttl.expire_due(queue, Ttl.BATCH)
    for _, jid in ipairs(redis.call('zrange', Keys.work(queue), 0, count - #jids - 1)) do
      table.insert(jids, jid)
    end
  end
  return encode_list(describe_all(jids))
end
