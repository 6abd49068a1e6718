-- pop, peek: hand out the next jobs of a queue / look at them.
--
--   pop   queue, worker, count  -> JSON list of the jobs now running for `worker`
--   peek  queue, count          -> JSON list of the next jobs, not handed out
--
-- pop first reclaims jobs whose lock expired (see Queue.invalidate_locks: grace period, then one
-- retry per expiry), then spawns due recurring jobs and promotes due scheduled ones, then takes
-- waiting jobs: lower priority number first, equal priorities in insertion order. A paused queue
-- gives nothing; `<queue>-max-concurrency` caps the jobs holding a valid lock at once (expired
-- ones are still reclaimed). Each job's lock lasts `<queue>-heartbeat` (else `heartbeat`) seconds.
-- Errors: INVALID.
-- @include args
-- @include job
-- @include queue
-- @include reclaim

-- Lock a job for `worker` and record the wait-time sample.
local function hand_out(queue, jid, worker, expires)
  local key = Keys.job(jid)
  local since = tonumber(redis.call('hget', key, 'time')) or Engine.now
  redis.call('hset', key, 'state', 'running', 'worker', worker, 'expires', expires,
    'popped', Engine.now, 'updated', Engine.now)
  redis.call('zadd', Keys.locks(queue), expires, jid)
  redis.call('zadd', Keys.worker_jobs(worker), expires, jid)
  Job.history(jid, 'popped', { worker = worker })
  Stats.sample(queue, 'wait', Engine.now - since)
  Events.tracked('popped', jid)
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

  local expires = Engine.now + Config.heartbeat(queue)
  local jids = Queue.invalidate_locks(queue, count)
  for _, jid in ipairs(jids) do
    redis.call('zrem', Keys.locks(queue), jid)
  end
  local wanted = count - #jids
  if max_concurrency > 0 then
    -- Locks that invalidate_locks just put in their grace period took places too.
    wanted = math.min(wanted, max_concurrency - running(queue) - #jids)
  end
  if wanted > 0 then
    Queue.refresh(queue, wanted)
    local waiting = redis.call('zrange', Keys.work(queue), 0, wanted - 1)
    if #waiting > 0 then
      redis.call('zremrangebyrank', Keys.work(queue), 0, #waiting - 1)
      for _, jid in ipairs(waiting) do table.insert(jids, jid) end
    end
  end
  for _, jid in ipairs(jids) do
    hand_out(queue, jid, worker, expires)
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
    for _, jid in ipairs(redis.call('zrange', Keys.work(queue), 0, count - #jids - 1)) do
      table.insert(jids, jid)
    end
  end
  return encode_list(describe_all(jids))
end
