-- lease: one liveness lease per worker process, so the jobs of a worker that died come back in
-- seconds whatever their own lock time (ours).
--
-- A worker that takes a lease (`worker.lease`) renews it every second or so; it expires a few
-- seconds after the last renewal (`P leases`, worker -> expiry). Once it has expired, every job
-- the worker holds (running, prefetched, or handed to it while idle: `w:<worker>:jobs`) is a
-- lost worker's job under our rule (include/reclaim.lua): it waits again at the front of its
-- priority (history 'reclaimed'), or past lost-worker-retries fails in worker-lost. The worker
-- stops being idle and its inbox is dropped. The survivors' renewals do this reaping, so no
-- extra work falls on put, pop or complete. A worker without a lease (a qless client) is judged
-- by its jobs' locks and heartbeats alone, as in qless.
-- A live worker may also name the jobs it holds when it renews (Lease.reconcile): a job locked
-- to it that it does not hold (the reply of its pop, or of its complete, was lost on the way:
-- a failover, a broken connection) waits again at once, without using a retry, rather than
-- staying locked until its lock expires. A job is given back only when two renewals at least
-- Lease.SETTLE seconds apart did not name it; the jobs in its inbox count as held.
-- Pops in flight: a pop's reply may take any time to become a held job (the worker starved of
-- CPU, its pop of several queues not done), and a renewal meanwhile does not name it. So the
-- worker numbers its renewals (1, 2, ...) and says in each one `settled`: the number of a
-- renewal whose reply it had received before it sent every pop still in flight (with none in
-- flight, the latest reply it received). A job first found unnamed by renewal `r` was popped
-- (or taken from the inbox) before that renewal ran, so by a pop sent before the worker
-- received renewal `r`'s reply: once `settled` >= `r`, the worker is done with that pop (its
-- jobs taken in, or its reply lost) and the job, had the worker got it, would be named. Until
-- then it may be on its way and is left alone. The
-- pops themselves carry nothing: the guard costs the fast path no argument and no round trip.
-- A worker paused past its lease may wake up still holding jobs another worker now runs: the
-- engine refuses its calls about them (include/lock.lua), and the worker checks a job with the
-- engine before starting it once its lease may have lapsed.
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include job
-- @include queue
-- @include lock
-- @include reclaim
-- @include handoff
-- @include work
local Lease = {}

-- Workers whose lease expired that one call reaps at most (the next call reaps more).
Lease.REAP_PER_CALL = 10
-- Seconds a job locked to a live worker must have gone unnamed by its renewals before it is
-- given back (Lease.reconcile): more than the time a pop's reply takes to reach the worker.
Lease.SETTLE = 1
-- Live workers renew every second or so: no renewal at all for this long means the server (or
-- every worker's network) stalled, not that the workers died.
Lease.STALL_SECONDS = 3

-- `worker`'s lease runs `seconds` from now. Returns whether it had one not yet reaped: when not
-- (its first renewal, or a lease reaped after it lapsed), the jobs it held are no longer its.
function Lease.renew(worker, seconds)
  local had = redis.call('zadd', Keys.leases(), Engine.now + seconds, worker) == 0
  return had
end

function Lease.drop(worker)
  redis.call('zrem', Keys.leases(), worker)
  redis.call('del', Keys.unheld(worker))
end

-- One job `jid` of `worker`, whose lease expired at `expires`: back to waiting, or failed.
local function reclaim(worker, jid, expires, allowance)
  local fields = Job.fields(jid, 'queue', 'worker', 'priority', 'ttl_at', 'ckey', 'climit',
    'throttle')
  redis.call('zrem', Keys.worker_jobs(worker), jid)
  if not fields or fields.state ~= 'running' or fields.worker ~= worker then return 'gone' end
  local queue = fields.queue
  redis.call('zrem', Keys.locks(queue), jid)
  Events.tracked('stalled', jid)
  Events.to_worker(worker, 'lock_lost', jid)
  Stats.bump(queue, 'retries', 1)
  if not Queue.survives(queue, jid, worker, expires, allowance, 'lease') then return 'failed' end
  redis.call('hdel', Keys.job(jid), 'grace', 'cclaim') -- its next start claims again
  Lock.released(jid, queue, fields)
  redis.call('hset', Keys.job(jid), 'worker', '', 'expires', 0, 'updated', Engine.now,
    'state', 'waiting', 'time', Engine.now)
  Job.history(jid, 'reclaimed', { worker = worker })
  -- It was taken once already: ahead of the jobs of its priority put since.
  Work.add_front(queue, jid, tonumber(fields.priority) or 0)
  Events.ready(queue)
  return 'reclaimed'
end

-- After a stall (no renewal for Lease.STALL_SECONDS: a paused or overloaded server), every
-- lease is pushed back by the stall's length, so that workers get to renew before anyone is
-- reaped. Records this renewal's time (`P leases-seen`).
local function forgive_stall()
  local seen = tonumber(redis.call('get', Keys.leases_seen()))
  redis.call('set', Keys.leases_seen(), string.format('%.17g', Engine.now))
  if not seen or Engine.now - seen <= Lease.STALL_SECONDS then return end
  local gap = Engine.now - seen
  local leases = redis.call('zrange', Keys.leases(), 0, -1, 'WITHSCORES')
  for i = 1, #leases, 2 do
    redis.call('zadd', Keys.leases(), tonumber(leases[i + 1]) + gap, leases[i])
  end
end

-- Reap workers whose lease expired (at most Lease.REAP_PER_CALL), unless the server stalled
-- since the last renewal. Returns how many workers, and how many of their jobs went back to
-- waiting and were failed.
function Lease.reap()
  forgive_stall()
  local lapsed = redis.call('zrangebyscore', Keys.leases(), '-inf', Engine.now, 'WITHSCORES',
    'LIMIT', 0, Lease.REAP_PER_CALL)
  if #lapsed == 0 then return 0, 0, 0 end
  local allowance = tonumber(Config.get('lost-worker-retries')) or 0
  local reclaimed, failed = 0, 0
  for i = 1, #lapsed, 2 do
    local worker, expires = lapsed[i], lapsed[i + 1]
    redis.call('zrem', Keys.leases(), worker)
    redis.call('del', Keys.unheld(worker))
    Handoff.stop_waiting(worker)
    redis.call('del', Keys.inbox(worker))
    for _, jid in ipairs(redis.call('zrange', Keys.worker_jobs(worker), 0, -1)) do
      local outcome = reclaim(worker, jid, expires, allowance)
      if outcome == 'reclaimed' then reclaimed = reclaimed + 1 end
      if outcome == 'failed' then failed = failed + 1 end
    end
  end
  return #lapsed / 2, reclaimed, failed
end

-- The jids of the jobs waiting in `worker`'s inbox (handed over, not yet read by the worker).
local function in_inbox(worker)
  local jids = {}
  for _, text in ipairs(redis.call('lrange', Keys.inbox(worker), 0, -1)) do
    local ok, jobs = pcall(cjson.decode, text)
    if ok and type(jobs) == 'table' then
      for _, job in ipairs(jobs) do
        if type(job) == 'table' and job.jid then jids[job.jid] = true end
      end
    end
  end
  return jids
end

-- One job locked to live `worker` that it no longer holds: waiting again at the front of its
-- priority (history 'returned'), its retries and lost count untouched (the worker never ran it
-- to an end the engine heard of, and is alive).
local function give_back(worker, jid)
  redis.call('zrem', Keys.worker_jobs(worker), jid)
  local fields = Job.fields(jid, 'queue', 'worker', 'priority', 'ttl_at', 'ckey', 'climit',
    'throttle')
  if not fields or fields.state ~= 'running' or fields.worker ~= worker then return false end
  local queue = fields.queue
  redis.call('zrem', Keys.locks(queue), jid)
  redis.call('hdel', Keys.job(jid), 'grace', 'cclaim') -- its next start claims again
  Lock.released(jid, queue, fields)
  redis.call('hset', Keys.job(jid), 'worker', '', 'expires', 0, 'updated', Engine.now,
    'state', 'waiting', 'time', Engine.now)
  Job.history(jid, 'returned', { worker = worker })
  Work.add_front(queue, jid, tonumber(fields.priority) or 0)
  Events.ready(queue)
  return true
end

-- When a job was first found unnamed, as kept in `w:<worker>:unheld`: "<time>" (a renewal
-- without numbers) or "<time> <renewal>".
local function first_unnamed(text)
  if not text then return nil, nil end
  local at, renewal = string.match(text, '^(%S+) (%S+)$')
  if at then return tonumber(at), tonumber(renewal) end
  return tonumber(text), nil
end

-- `worker` (alive: it is renewing) holds the jobs `held` (a list of jids). Jobs locked to it
-- that it did not name at two renewals Lease.SETTLE seconds apart are given back. With
-- `renewal` (this renewal's number) and `settled` (every pop the worker sent before it had
-- renewal `settled`'s reply is answered), only a job first found unnamed by a renewal numbered
-- `settled` or lower: one found later may still be on its way to the worker. Returns how many
-- were given back.
function Lease.reconcile(worker, held, renewal, settled)
  local holding = {}
  for _, jid in ipairs(held) do holding[jid] = true end
  local unheld_key = Keys.unheld(worker)
  local seen = redis.call('hgetall', unheld_key)
  local since = {}
  for i = 1, #seen, 2 do since[seen[i]] = seen[i + 1] end
  local inbox
  local suspects, returned = {}, 0
  for _, jid in ipairs(redis.call('zrange', Keys.worker_jobs(worker), 0, -1)) do
    if not holding[jid] then
      inbox = inbox or in_inbox(worker)
      if not inbox[jid] then
        local first, found_by = first_unnamed(since[jid])
        -- Found by a renewal without numbers, or by one numbered above this one (the worker
        -- restarted under its name): counted as found by this one.
        if renewal and first and (not found_by or found_by > renewal) then
          first, found_by = nil, nil
        end
        local answered = not renewal or (found_by ~= nil and found_by <= settled)
        if first and Engine.now - first >= Lease.SETTLE and answered then
          if give_back(worker, jid) then returned = returned + 1 end
        else
          local mark = string.format('%.17g', first or Engine.now)
          if renewal then mark = mark .. ' ' .. string.format('%.17g', found_by or renewal) end
          table.insert(suspects, jid)
          table.insert(suspects, mark)
        end
      end
    end
  end
  redis.call('del', unheld_key)
  if #suspects > 0 then Engine.call_many('hset', unheld_key, suspects) end
  return returned
end
