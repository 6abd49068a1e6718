-- pop, pop.lean, peek: hand out the next jobs of a queue / look at them.
--
--   pop       queue, worker, count  -> JSON list of the jobs now running for `worker`
--   pop.lean  queue, worker, count  -> the same, each job as a small JSON object (see below)
--   peek      queue, count          -> JSON list of the next jobs, not handed out
--
-- pop first reclaims jobs whose lock expired (see Queue.invalidate_locks: grace period, then one
-- retry per expiry for `pop`, qless's rule; `pop.lean` leaves retries alone and counts the lost
-- worker against lost-worker-retries, our rule: include/reclaim.lua), then spawns due recurring jobs and promotes due scheduled ones, then takes
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
-- priority, tags, retries, remaining, expires, popped (now), worker, state, runs} and, when it was put
-- with them, ttr, throttle and concurrency_key, and lost once it lost a worker (reclaim.lua); no history, dependents, dependencies, tracked or
-- failure (read them with `get`): about a third of a pop's time otherwise goes into its reply.
-- An entry of the queue's indexes whose job hash is gone (an outside writer, a partial restore)
-- is dropped from the index where pop, peek or a promotion meets it, never handed out or written.
-- Errors: INVALID.
-- @include args
-- @include job
-- @include queue
-- @include reclaim
-- @include slots
-- @include ttl
-- @include lean
-- @include work

-- What pop needs of a job: time (waiting since), ttl_at, ttr, ckey, climit, throttle, state,
-- reserved, what its run's counts need (counted, child, deadline_missed: RunCounts.moving), and
-- last runs and created; a lean pop reads the fields of its reply in the same read (from
-- position 9 on, the counts' fields after them).
local CANDIDATE = { 'time', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle', 'state', 'reserved',
  'counted', 'child', 'deadline_missed', 'runs', 'created' }
local CANDIDATE_LEAN = { 'time', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle', 'state', 'reserved',
  'klass', 'data', 'priority', 'tags', 'retries', 'remaining', 'lost',
  'counted', 'child', 'deadline_missed', 'runs', 'created' }

-- The reply of pop: the qless job JSON of each job.
local function full_reply(_, job)
  return Job.describe_json(job.jid, job.tracked)
end

-- The reply of pop.lean (include/lean.lua).
local function lean_reply(c, job)
  return Lean.job(c, job.jid, job.f, job.expires, job.runs)
end

-- One call of pop: queue, worker; lock (seconds, for jobs without a ttr); limit (max-job-history);
-- names (what candidate() reads); reply (a job's text in the reply); handed (the jobs handed out,
-- {jid, f, expires, tracked}); entry (the 'popped' history entry, the same for all of them);
-- tracked (false once seen that the namespace tracks no job). The writes every job makes to the
-- same keys wait in locks ({expires, jid} pairs) and waits (wait-time samples) until written
-- once for all (write_shared).
local function new_pop(queue, worker, lock, limit, lean)
  return { queue = queue, worker = worker, lock = lock, limit = limit,
    names = lean and CANDIDATE_LEAN or CANDIDATE, counted_at = lean and 16 or 9,
    reply = lean and lean_reply or full_reply,
    handed = {}, entry = nil, tracked = nil, locks = {}, waits = {} }
end

local function candidate(c, jid)
  return Job.hmget(jid, unpack(c.names))
end

-- The writes of the jobs handed out so far to keys they share: the queue's locks, the worker's
-- jobs, the wait-time statistics. `more`: jobs may be handed out after this.
local function write_shared(c, more)
  if #c.locks == 0 then return end
  Engine.call_many('zadd', Keys.locks(c.queue), c.locks)
  Engine.call_many('zadd', Keys.worker_jobs(c.worker), c.locks)
  Stats.add(c.queue, 'wait', c.waits)
  if more then c.locks, c.waits = {}, {} end
end

-- Lock a job for the worker (`f` from candidate()) and record the wait-time sample.
local function hand_out(c, jid, f)
  local key = Keys.job(jid)
  RunCounts.touch(jid)
  -- A job waiting since its put has no `time`: its wait started when it was created.
  local since = tonumber(f[1]) or tonumber(f[#c.names]) or Engine.now
  local expires = Engine.now + (tonumber(f[3]) or c.lock)
  -- `runs`: the times it started running since it was put, its step log's attempt
  -- (commands/log.lua); read with the candidate, so the job is written once.
  local runs = (tonumber(f[#c.names - 1]) or 0) + 1
  -- What its run counts it as, written with the rest (RunCounts.moving).
  local at = c.counted_at
  local move = RunCounts.moving(jid, f[at], 'running')
  if move and move.counted then
    redis.call('hset', key, 'state', 'running', 'worker', c.worker, 'expires', expires,
      'popped', Engine.now, 'updated', Engine.now, 'runs', runs, 'counted', move.counted)
  else
    redis.call('hset', key, 'state', 'running', 'worker', c.worker, 'expires', expires,
      'popped', Engine.now, 'updated', Engine.now, 'runs', runs)
  end
  table.insert(c.locks, expires)
  table.insert(c.locks, jid)
  -- A ttl deadline is looked at again once the lock could have expired (include/ttl.lua).
  if f[2] then redis.call('zadd', Keys.ttl(c.queue), math.max(tonumber(f[2]), expires), jid) end
  c.entry = c.entry or Job.popped_entry(Job.popped_head(c.worker))
  -- The job's queue is the one popped, so an implied history needs no read.
  Job.append_history(jid, c.entry, c.limit, { queue = c.queue, created = f[#c.names] })
  -- (RunCounts.FIELDS: counted, state, skipped, child, cached, runs, popped, wait_since, updated,
  -- deadline_missed)
  RunCounts.moved(jid, move, { false, 'running', false, f[at + 1], false, runs, Engine.now, false,
    Engine.now, f[at + 2] })
  table.insert(c.waits, Engine.now - since)
  local tracked = c.tracked ~= false and Events.tracked('popped', jid)
  table.insert(c.handed, { jid = jid, f = f, expires = expires, tracked = tracked, runs = runs })
end

-- Take up to `wanted` waiting jobs of the queue, looking at no more than
-- `wanted + Slots.LOOKAHEAD` of them (see the header). The first batch is exactly as many as
-- wanted (all a queue of plain jobs needs); once jobs had to be passed over, larger ones.
-- A batch runs across the queue's two keys in pop order (include/work.lua).
local function take(c, wanted)
  local queue = c.queue
  local budget = wanted + Slots.LOOKAHEAD
  local got, size = 0, wanted
  while got < wanted and budget > 0 do
    local asked = math.min(size, budget)
    -- Out of the work queue before any is looked at: a job this pass parks can be unparked back
    -- into it by a later one (a reservation given back by an expiry), and must then stay there.
    local batch, whole = Work.take(queue, asked)
    if #batch == 0 then return end
    local passed = #batch + 1
    -- Whether this pass expired or parked a job (either may put jobs back into the work queue).
    local moved = false
    for i = 1, #batch, 2 do
      if got >= wanted then passed = i; break end
      local jid = batch[i]
      budget = budget - 1
      local f = candidate(c, jid)
      local gates = Slots.gates(f[4], f[5], f[6], f[8])
      local gate = gates and Slots.blocked(queue, gates)
      if not f[7] then -- an index entry without its job: dropped, never handed out
      elseif f[2] and tonumber(f[2]) <= Engine.now then
        moved = true
        Ttl.expire(jid, { state = 'waiting', queue = queue, taken = true })
      elseif gate then
        -- A job from the list has no score: its place among the parked is taken now, behind
        -- those parked before it (which were ahead of it in the list).
        moved = true
        Slots.park(queue, jid, batch[i + 1] or Work.next_score(0), gates, gate)
      else
        if gates then Slots.started(queue, jid, gates) end
        hand_out(c, jid, f)
        got = got + 1
      end
    end
    -- The jobs not looked at go back where they were.
    Work.give_back(queue, batch, passed)
    -- Every waiting job was in the batch, each handed out or dropped: the next read would find
    -- nothing (the usual end of a pop that takes every waiting job).
    if whole and not moved then return end
    size = math.max(wanted - got, 16)
  end
  -- Stopped by the look-ahead bound: whoever pops next goes on behind the jobs passed over.
  if got < wanted and Work.count(queue) > 0 then Events.ready(queue) end
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
  -- `pop` is qless's command: an expired lock uses a retry there, as qless clients expect.
  local reclaimed = Queue.invalidate_locks(queue, count, true, not lean)
  for _, jid in ipairs(reclaimed) do
    redis.call('zrem', Keys.locks(queue), jid)
    hand_out(c, jid, candidate(c, jid))
  end
  -- Their locks written before the places are counted again below.
  write_shared(c, true)
  local wanted = count - #reclaimed
  if max_concurrency > 0 then
    -- Locks that invalidate_locks just put in their grace period took places too.
    wanted = math.min(wanted, max_concurrency - running(queue) - #reclaimed)
  end
  if wanted > 0 then
    -- Most queues have no recurring, scheduled or ttl jobs, and most namespaces track no job:
    -- one look instead of three, and of one per job handed out.
    if redis.call('exists', Keys.recur(queue), Keys.scheduled(queue), Keys.ttl(queue),
        Keys.tracked()) == 0 then
      c.tracked = false
    else
      Queue.refresh(queue, wanted)
      Ttl.expire_due(queue, Ttl.BATCH)
    end
    take(c, wanted)
  end
  write_shared(c, false)
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
    for _, jid in ipairs(Work.range(queue, 0, count - #jids)) do
      table.insert(jids, jid)
    end
  end
  local texts, missing = Job.describe_list(jids)
  -- Entries whose job hash is gone: nothing can run them, so the next pop need not meet them.
  if #missing > 0 then
    for _, jid in ipairs(missing) do Work.remove(queue, jid) end
    Engine.call_many('zrem', Keys.locks(queue), missing)
  end
  return texts
end
