-- pop, pop.lean, peek: hand out the next jobs of a queue / look at them.
--
--   pop       queue, worker, count  -> JSON list of the jobs now running for `worker`
--   pop.lean  queue, worker, count  -> the same, each job as a small JSON object (see below)
--   peek      queue, count          -> JSON list of the next jobs, not handed out
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
-- pop.lean (ours) is pop, with a reply made for a worker: each job as {jid, klass, queue, data,
-- priority, tags, retries, remaining, expires, popped (now), worker, state} and, when it was put
-- with them, ttr, throttle and concurrency_key; no history, dependents, dependencies, tracked or
-- failure (read them with `get`): about a third of a pop's time otherwise goes into its reply.
-- Errors: INVALID.
-- @include args
-- @include job
-- @include queue
-- @include reclaim
-- @include slots
-- @include ttl

-- What pop needs of a job: time (waiting since), ttl_at, ttr, ckey, climit, throttle, state,
-- reserved; a lean pop reads the fields of its reply in the same read (from position 9 on).
local CANDIDATE = { 'time', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle', 'state', 'reserved' }
local CANDIDATE_LEAN = { 'time', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle', 'state', 'reserved',
  'klass', 'data', 'priority', 'tags', 'retries', 'remaining' }

-- The state a job just handed out is reported in (Job.describe's rule: a lock of 0 seconds is
-- stalled at once).
local function running_state(expires)
  return expires > Engine.now and 'running' or 'stalled'
end

-- The reply of pop: the qless job JSON of each job.
local function full_reply(_, job)
  return Job.describe_json(job.jid, job.tracked)
end

-- The reply of pop.lean, from what the candidate read already holds.
local function lean_reply(c, job)
  local f = job.f
  return cjson.encode({
    jid = job.jid, klass = f[9] or '', queue = c.queue, worker = c.worker,
    state = running_state(job.expires), data = f[10] or '{}',
    priority = tonumber(f[11]) or 0, tags = Job.decode_list(f[12]),
    retries = tonumber(f[13]) or 0, remaining = tonumber(f[14]) or 0,
    expires = job.expires, popped = Engine.now,
    ttr = tonumber(f[3]), throttle = f[6] or nil, concurrency_key = f[4] or nil,
  })
end

-- One call of pop: queue, worker; lock (seconds, for jobs without a ttr); limit (max-job-history);
-- names (what candidate() reads); reply (a job's text in the reply); handed (the jobs handed out,
-- {jid, f, expires, tracked}); entry (the 'popped' history entry, the same for all of them).
local function new_pop(queue, worker, lock, limit, lean)
  return { queue = queue, worker = worker, lock = lock, limit = limit,
    names = lean and CANDIDATE_LEAN or CANDIDATE, reply = lean and lean_reply or full_reply,
    handed = {}, entry = nil }
end

local function candidate(c, jid)
  return redis.call('hmget', Keys.job(jid), unpack(c.names))
end

-- Lock a job for the worker (`f` from candidate()) and record the wait-time sample.
local function hand_out(c, jid, f)
  local key = Keys.job(jid)
  local since = tonumber(f[1]) or Engine.now
  local expires = Engine.now + (tonumber(f[3]) or c.lock)
  redis.call('hset', key, 'state', 'running', 'worker', c.worker, 'expires', expires,
    'popped', Engine.now, 'updated', Engine.now)
  redis.call('zadd', Keys.locks(c.queue), expires, jid)
  redis.call('zadd', Keys.worker_jobs(c.worker), expires, jid)
  -- A ttl deadline is looked at again once the lock could have expired (include/ttl.lua).
  if f[2] then redis.call('zadd', Keys.ttl(c.queue), math.max(tonumber(f[2]), expires), jid) end
  c.entry = c.entry or Job.history_entry('popped', { worker = c.worker })
  Job.append_history(jid, c.entry, c.limit)
  Stats.sample(c.queue, 'wait', Engine.now - since)
  local tracked = Events.tracked('popped', jid)
  table.insert(c.handed, { jid = jid, f = f, expires = expires, tracked = tracked })
end

-- Take up to `wanted` waiting jobs of the queue, looking at no more than
-- `wanted + Slots.LOOKAHEAD` of them (see the header). The first batch is exactly as many as
-- wanted (all a queue of plain jobs needs); once jobs had to be passed over, larger ones.
local function take(c, wanted)
  local queue = c.queue
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
      local f = candidate(c, jid)
      local gates = Slots.gates(f[4], f[5], f[6], f[8])
      local gate = gates and Slots.blocked(queue, gates)
      if not f[7] then -- an index entry without its job: dropped, never handed out
      elseif f[2] and tonumber(f[2]) <= Engine.now then
        Ttl.expire(jid, { state = 'waiting', queue = queue })
      elseif gate then
        Slots.park(queue, jid, batch[i + 1], gates, gate)
      else
        if gates then Slots.started(queue, jid, gates) end
        hand_out(c, jid, f)
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

-- Jobs of `queue` holding a valid lock.
local function running(queue)
  return redis.call('zcount', Keys.locks(queue), Engine.after_now(), '+inf')
end

-- A JSON list of JSON texts. Described after every job was handed out, as each is at the end of
-- the call.
local function reply_list(c)
  local texts = {}
  for _, job in ipairs(c.handed) do
    local text = c.reply(c, job)
    if text then table.insert(texts, text) end
  end
  if #texts == 0 then return '[]' end
  return '[' .. table.concat(texts, ',') .. ']'
end

local function pop(cmd, args, lean)
  local queue = Arg.id(cmd, 'queue', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local count = Arg.integer(cmd, 'count', args[3], 0, Engine.MAX_COUNT)

  redis.call('zadd', Keys.workers(), Engine.now, worker)
  if redis.call('sismember', Keys.paused(), queue) == 1 then return '[]' end

  -- Every setting pop needs, in one read.
  local max_concurrency, queue_heartbeat, heartbeat, history_limit = Config.values(
    queue .. '-max-concurrency', queue .. '-heartbeat', 'heartbeat', 'max-job-history')
  -- The concurrency cap counts valid locks only (a job in its grace period counts: its worker may
  -- still run it). Expired ones are reclaimed below, each taking the place it held.
  max_concurrency = tonumber(max_concurrency or 0) or 0
  if max_concurrency > 0 then
    count = math.max(0, math.min(count, max_concurrency - running(queue)))
  end
  if count == 0 then return '[]' end

  -- Lock duration: `<queue>-heartbeat`, else `heartbeat` (as Config.heartbeat).
  local lock = tonumber(queue_heartbeat or heartbeat)
  local c = new_pop(queue, worker, lock, tonumber(history_limit), lean)
  -- Reclaimed jobs go straight to this worker, keeping their concurrency-key and throttle slots.
  local reclaimed = Queue.invalidate_locks(queue, count, true)
  for _, jid in ipairs(reclaimed) do
    redis.call('zrem', Keys.locks(queue), jid)
    hand_out(c, jid, candidate(c, jid))
  end
  local wanted = count - #reclaimed
  if max_concurrency > 0 then
    -- Locks that invalidate_locks just put in their grace period took places too.
    wanted = math.min(wanted, max_concurrency - running(queue) - #reclaimed)
  end
  if wanted > 0 then
    Queue.refresh(queue, wanted)
    Ttl.expire_due(queue, Ttl.BATCH)
    take(c, wanted)
  end
  return reply_list(c)
end

api['pop'] = function(args) return pop('Pop', args, false) end
api['pop.lean'] = function(args) return pop('PopLean', args, true) end

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
  local texts = {}
  for _, jid in ipairs(jids) do
    local text = Job.describe_json(jid)
    if text then table.insert(texts, text) end
  end
  if #texts == 0 then return '[]' end
  return '[' .. table.concat(texts, ',') .. ']'
end
