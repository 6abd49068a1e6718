-- handoff: idle workers get new jobs pushed to them, instead of being told to come and pop.
--
-- A worker with nothing to do calls `await` (commands/await.lua): it pops as usual, and when
-- there is nothing it is registered as idle on its queues until a deadline. Whenever a call of
-- the engine makes jobs waiting in a queue (Events.ready), the dispatch calls Handoff.deliver at
-- the end of that same call: the idle workers of the queue are popped for, one job each, in
-- the order they started waiting, and each job goes to its worker's inbox list, where the
-- worker blocks (BLPOP). So a put reaches an idle worker in one push, with no pub/sub message and
-- no second round trip for the pop; the pop is the ordinary one (pause, max-concurrency,
-- priorities, concurrency keys and throttles all apply, and the lock starts now).
--
-- A worker is idle on its queues only until its deadline, and stops being idle once something
-- is handed to it (it calls `await` again when it wants more). A worker that dies while idle
-- is handed nothing after its deadline; a job handed to it before that is reclaimed with its
-- other jobs when its liveness lease is reaped (include/lease.lua), or when the job's lock
-- expires for a worker without a lease.
-- A put of one job that would become waiting goes straight to the worker that waited longest
-- when an ordinary pop by that worker would take exactly that job (Handoff.direct says when):
-- the job is written running in the same write as the rest of it, never enters the work queue,
-- and `ready:<queue>` is not published (no job became waiting). The writes are those the put
-- and the pop would have made, in one pass: the job's hash, its history (put, popped), the
-- queue's locks, the worker's jobs, the wait-time sample, the inbox.
-- Keys: q:<queue>-idle (zset worker -> deadline); w:<worker>:waiting (string: the start of the
-- worker's 'popped' history entry, Job.popped_head, then its queues, a line each: what a
-- hand-off needs of the worker, made when it starts waiting and read and dropped in one command);
-- w:<worker>:inbox (list of JSON job lists, as pop replies; '[]' wakes the worker), dropped with
-- the worker (its lease reaped, or its entry in `workers` pruned: include/registry.lua).
-- Needs `api` (the command table): include it from a command file.
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include job
-- @include lean
local Handoff = {}

-- Queues this call found no idle worker on (reset by the dispatch): the hand-off at the end of
-- the call need not look again.
Handoff.nobody = {}

-- Jobs one call hands out per queue at most (a put readies one queue; flow.submit may ready a
-- few, each with many idle workers): keeps every call bounded.
Handoff.MAX_PER_QUEUE = 100

-- Register `worker` as idle on `queues` until `deadline`.
function Handoff.wait(worker, queues, deadline)
  for _, queue in ipairs(queues) do
    redis.call('zadd', Keys.idle(queue), deadline, worker)
  end
  redis.call('set', Keys.worker_waiting(worker),
    Job.popped_head(worker) .. '\n' .. table.concat(queues, '\n'))
end

-- `worker` is no longer idle on any queue (`left`: one it was taken off already). Returns the
-- start of its 'popped' history entry as it was when it started waiting, or nil when it was not
-- waiting.
function Handoff.stop_waiting(worker, left)
  local waiting = redis.call('getdel', Keys.worker_waiting(worker))
  if not waiting then return nil end
  local cut = string.find(waiting, '\n', 1, true)
  for queue in string.gmatch(string.sub(waiting, cut + 1), '[^\n]+') do
    if queue ~= left then redis.call('zrem', Keys.idle(queue), worker) end
  end
  return string.sub(waiting, 1, cut - 1)
end

-- The pop our worker uses (the lean reply: commands/pop.lua).
function Handoff.pop(queue, worker, count)
  return api['pop.lean']({ queue, worker, count })
end

-- The idle worker of `queue` that has waited longest, taken off the queue's idle workers (the
-- caller puts it back when it hands it nothing), and its deadline; nil when none waits. Workers
-- past their deadline are dropped on the way.
local function take_idle(queue)
  local key = Keys.idle(queue)
  while true do
    local first = redis.call('zpopmin', key)
    if not first[1] then return nil end
    if tonumber(first[2]) > Engine.now then return first[1], first[2] end
  end
end

-- The idle worker a job of `queue` that is about to become waiting may go straight to, as
-- {worker, lock (seconds), limit (max-job-history)}, now taken off the queue's idle workers; nil
-- when an ordinary pop must decide: no worker waits, the queue is paused or has a
-- max-concurrency, or the pop would first take or reclaim something else (jobs waiting, due
-- recurring or scheduled jobs, ttl deadlines, expired locks) or publish for a tracked job.
function Handoff.direct(queue)
  local worker, deadline = take_idle(queue)
  if not worker then
    Handoff.nobody[queue] = true
    return nil
  end
  local max_concurrency, queue_heartbeat, heartbeat, limit = Config.values(
    queue .. '-max-concurrency', queue .. '-heartbeat', 'heartbeat', 'max-job-history')
  if (tonumber(max_concurrency or 0) or 0) > 0
    or redis.call('sismember', Keys.paused(), queue) == 1
    or redis.call('exists', Keys.work(queue), Keys.fifo(queue), Keys.recur(queue),
      Keys.scheduled(queue), Keys.ttl(queue), Keys.tracked()) > 0
    or #redis.call('zrangebyscore', Keys.locks(queue), '-inf', Engine.now, 'LIMIT', 0, 1) > 0 then
    redis.call('zadd', Keys.idle(queue), deadline, worker) -- still idle, for the ordinary pop
    return nil
  end
  return { worker = worker, lock = tonumber(queue_heartbeat or heartbeat), limit = tonumber(limit) }
end

-- What the put of job `jid` and a pop of it by `to.worker` (Handoff.direct) write besides the
-- job's hash (which the put wrote running until `expires`): the history's two entries (`entry`
-- the put's) in one write, the locks, the wait-time sample (Stats.handed), and the push of
-- `text` (the job as Lean.job writes it) to the worker's inbox. The worker's activity in
-- `workers` is left as its `await` set it: it made no call.
function Handoff.give(to, queue, jid, expires, entry, text)
  local worker = to.worker
  local head = Handoff.stop_waiting(worker, queue) or Job.popped_head(worker)
  Job.append_history(jid, { entry, Job.popped_entry(head) }, to.limit, false)
  redis.call('zadd', Keys.locks(queue), expires, jid)
  redis.call('zadd', Keys.worker_jobs(worker), expires, jid)
  Stats.handed(queue)
  redis.call('rpush', Keys.inbox(worker), '[' .. text .. ']')
end

local function deliver_queue(queue)
  if Handoff.nobody[queue] then return end
  for _ = 1, Handoff.MAX_PER_QUEUE do
    local worker, deadline = take_idle(queue)
    if not worker then return end
    local jobs = Handoff.pop(queue, worker, 1)
    if jobs == '[]' then -- paused, at its concurrency cap, or nothing left
      redis.call('zadd', Keys.idle(queue), deadline, worker)
      return
    end
    Handoff.stop_waiting(worker, queue)
    redis.call('rpush', Keys.inbox(worker), jobs)
  end
end

-- Hand the jobs this call made waiting to idle workers (called by the dispatch).
function Handoff.deliver()
  local only = next(Events.readied)
  if only == nil then return end
  if next(Events.readied, only) == nil then return deliver_queue(only) end -- most calls
  local queues = {}
  for queue in pairs(Events.readied) do table.insert(queues, queue) end
  table.sort(queues) -- the same order on a replica and after a restart: deterministic writes
  for _, queue in ipairs(queues) do deliver_queue(queue) end
end

-- `worker` stops waiting, and the jobs handed to it that it did not take go back to their
-- queues without using a retry (as `release`). Returns how many went back.
function Handoff.give_back(worker)
  Handoff.stop_waiting(worker)
  local jobs = Handoff.take_inbox(worker)
  if not jobs then return 0 end
  local count = 0
  for _, job in ipairs(cjson.decode(jobs)) do
    local held = Job.hmget(job.jid, 'state', 'worker')
    if held[1] == 'running' and held[2] == worker then
      api['release']({ job.jid, worker, 0 })
      count = count + 1
    end
  end
  return count
end

-- The inbox's jobs `worker` may still start, as one JSON list text (nil: none), the inbox
-- emptied. A job handed over while the worker did not read its inbox (paused, or busy between
-- two waits) may have lost its lock meanwhile: the worker would start it with a lock it no
-- longer has, beside whoever reclaims it. Only the jobs still running for it under a valid lock
-- are returned; one taken by another worker meanwhile is no longer its, and one whose lock ran
-- out is left to the reclaim of expired locks (`await` pops next, so it comes back to this
-- worker at once, timed out, under a new lock).
function Handoff.take_fresh(worker)
  local jobs = Handoff.take_inbox(worker)
  if not jobs then return nil end
  local fresh, stale = {}, false
  for _, job in ipairs(cjson.decode(jobs)) do
    local held = Job.hmget(job.jid, 'state', 'worker', 'expires')
    if held[1] == 'running' and held[2] == worker and (tonumber(held[3]) or 0) > Engine.now then
      fresh[#fresh + 1] = job
    else
      stale = true
    end
  end
  if #fresh == 0 then return nil end
  -- Re-encoded only when a job was left out: the inbox's own text otherwise.
  return stale and cjson.encode(fresh) or jobs
end

-- Everything in `worker`'s inbox, as one JSON list text (the inbox is emptied).
function Handoff.take_inbox(worker)
  local inbox = Keys.inbox(worker)
  local items = redis.call('lrange', inbox, 0, -1)
  if #items == 0 then return nil end
  redis.call('del', inbox)
  local parts = {}
  for _, item in ipairs(items) do
    -- '[]' is what a worker pushes to wake itself: no jobs.
    if item ~= '[]' then table.insert(parts, string.sub(item, 2, -2)) end
  end
  if #parts == 0 then return nil end
  return '[' .. table.concat(parts, ',') .. ']'
end

