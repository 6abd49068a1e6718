-- queue: moving jobs between a queue's indexes (work, scheduled, depends, locks, recur).
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include job
-- @include waits
-- @include dialect
-- @include work
local Queue = {}

-- Work-queue scores (include/work.lua). Priorities are bounded by Queue.MAX_PRIORITY so a score
-- stays an exact integer in a double (< 2^53).
Queue.SEQ_SPAN = Work.SPAN
Queue.MAX_PRIORITY = 1000000

-- `queue` is in `queues` from its first put on (score: first seen). Looked up first: nearly
-- every put is to a queue already there, and a lookup costs half a ZADD NX.
function Queue.known(queue)
  if not redis.call('zscore', Keys.queues(), queue) then
    redis.call('zadd', Keys.queues(), 'NX', Engine.now, queue)
  end
end

-- Into `queue`'s work queue, waking its workers; the job's hash is the caller's (Queue.enqueue
-- writes its state; put writes it with the rest of the job).
function Queue.push(queue, jid, priority)
  Work.add(queue, jid, priority)
  Events.ready(queue)
end

-- Push `jobs` ({jid, priority} pairs, flat) into `queue`'s work queue in that order: what one
-- Queue.push per job does, in a few commands for all (Work.add_many).
function Queue.push_many(queue, jobs)
  Work.add_many(queue, jobs)
  Events.ready(queue)
end

-- The job becomes waiting in `queue` (it must already be out of its previous index).
-- `since` (default now) is when it became eligible: the start of its wait-time sample.
function Queue.enqueue(queue, jid, priority, since)
  Queue.push(queue, jid, priority)
  RunCounts.touch(jid)
  redis.call('hset', Keys.job(jid), 'state', 'waiting', 'time', since or Engine.now)
end

-- Into `queue`'s scheduled jobs until `when`; the job's hash is the caller's (as Queue.push).
function Queue.defer(queue, jid, when)
  redis.call('zadd', Keys.scheduled(queue), when, jid)
end

-- The job becomes scheduled in `queue` until `when`.
function Queue.schedule(queue, jid, when)
  Queue.defer(queue, jid, when)
  RunCounts.touch(jid)
  redis.call('hset', Keys.job(jid), 'state', 'scheduled')
end

-- Waiting, or scheduled when `delay` > 0: where a job goes when nothing holds it back.
function Queue.release(queue, jid, priority, delay)
  if delay and delay > 0 then
    Queue.schedule(queue, jid, Engine.now + delay)
    return 'scheduled'
  end
  Queue.enqueue(queue, jid, priority)
  return 'waiting'
end

-- Scheduled jobs whose time has come become waiting (at most `limit`). Returns how many.
-- Promotion is lazy (on pop or peek), so each job's wait starts at the time it was due.
-- An entry whose job hash is gone is only dropped: enqueued, it would write a partial job.
function Queue.promote(queue, limit)
  local due = redis.call('zrangebyscore', Keys.scheduled(queue), '-inf', Engine.now,
    'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #due, 2 do
    local jid = due[i]
    local f = Job.hmget(jid, 'priority', 'state')
    if f[2] then Queue.enqueue(queue, jid, tonumber(f[1]) or 0, tonumber(due[i + 1])) end
  end
  if #due > 0 then
    redis.call('zremrangebyrank', Keys.scheduled(queue), 0, #due / 2 - 1)
  end
  return #due / 2
end

-- A job put with a ttl (include/ttl.lua) becomes ready `delay` seconds from now: its deadline is
-- then `ttl` seconds later. Indexed in q:<queue>-ttl by the deadline.
function Queue.arm_ttl(queue, jid, ttl, delay)
  local deadline = Engine.now + (delay or 0) + ttl
  redis.call('hset', Keys.job(jid), 'ttl_at', string.format('%.17g', deadline))
  redis.call('zadd', Keys.ttl(queue), deadline, jid)
end

-- A dependent whose last dependency completed: it waits, or is scheduled after its own delay;
-- a wait (include/waits.lua) awaits its signal instead.
function Queue.release_dependent(jid)
  local fields = Job.fields(jid, 'queue', 'priority', 'delay', 'ttl', 'scheduled', 'wait')
  if not fields or fields.state ~= 'depends' then return end
  redis.call('zrem', Keys.depends(fields.queue), jid)
  if fields.wait then return Waits.arm(jid, fields.queue, fields.wait) end
  local delay = tonumber(fields.delay) or 0
  if fields.scheduled then
    -- Put in the qless dialect: its delay ran from the put (qless's rule), due now or later.
    redis.call('hdel', Keys.job(jid), 'scheduled')
    Queue.schedule(fields.queue, jid, tonumber(fields.scheduled))
    delay = math.max(0, tonumber(fields.scheduled) - Engine.now)
  else
    Queue.release(fields.queue, jid, tonumber(fields.priority) or 0, delay)
  end
  if fields.ttl then Queue.arm_ttl(fields.queue, jid, tonumber(fields.ttl), delay) end
end

-- Recurring jobs of `queue` that are due spawn their children (at most `limit` children), jids
-- `<jid>-<count>` skipping any that exist. A recurring job behind by several intervals spawns
-- one child per missed interval, at most its backlog when it has one (then it skips ahead).
function Queue.spawn_recurring(queue, limit)
  local spawned = 0
  local due = redis.call('zrangebyscore', Keys.recur(queue), '-inf', Engine.now, 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #due, 2 do
    local jid, score = due[i], tonumber(due[i + 1])
    local r = redis.call('hmget', Keys.recurring(jid), 'klass', 'data', 'priority', 'tags',
      'retries', 'interval', 'count', 'backlog')
    local interval = tonumber(r[6]) or 0
    if not r[1] or interval <= 0 then
      redis.call('zrem', Keys.recur(queue), jid)
    else
      local count = tonumber(r[7]) or 0
      local backlog = tonumber(r[8]) or 0
      local missed = math.floor((Engine.now - score) / interval) + 1
      if backlog > 0 and Dialect.rules.qless_recurring_spawns then
        -- Skip whole intervals beyond the backlog counted from the first due spawn (one more
        -- child than the backlog when now falls on a spawn time).
        local behind = (Engine.now - score) / interval
        if behind > backlog then score = score + math.ceil(behind - backlog) * interval end
        missed = math.floor((Engine.now - score) / interval) + 1
      elseif backlog > 0 and missed > backlog then
        score = score + (missed - backlog) * interval
        missed = backlog
      end
      local n = math.min(missed, limit - spawned)
      local tags = Job.decode_list(r[4])
      local priority = tonumber(r[3]) or 0
      for _ = 1, n do
        -- A child's jid is never reused while a job has it (after unrecur and recur again the
        -- count restarts): skip the numbers still taken, so a running job is never overwritten.
        local child
        repeat
          count = count + 1
          child = jid .. '-' .. count
        until redis.call('exists', Keys.job(child)) == 0
        local fields = { 'jid', child, 'klass', r[1], 'data', r[2], 'state', 'waiting',
          'queue', queue, 'spawned_from_jid', jid, 'failure', '{}', 'created', Engine.now,
          'updated', Engine.now }
        Job.put_fields(fields, priority, #tags == 0 and Job.DEFAULTS.tags or r[4], '', 0,
          tonumber(r[5]) or Job.numbers().retries)
        redis.call('hset', Keys.job(child), unpack(fields))
        Job.retag(child, {}, tags)
        if Dialect.rules.qless_recurring_spawns then
          -- Put at the time it was due.
          Job.append_history(child,
            cjson.encode({ what = 'put', when = math.floor(score), q = queue }), nil, false)
          Queue.enqueue(queue, child, priority, score)
        else
          Job.history(child, 'put', { q = queue }, nil, false)
          Queue.enqueue(queue, child, priority)
        end
        score = score + interval
      end
      spawned = spawned + n
      redis.call('hset', Keys.recurring(jid), 'count', count)
      redis.call('zadd', Keys.recur(queue), score, jid)
    end
    if spawned >= limit then break end
  end
  return spawned
end

-- Everything a pop or peek of `queue` must do first so that due work is visible in `work`.
function Queue.refresh(queue, limit)
  Queue.spawn_recurring(queue, limit)
  Queue.promote(queue, math.max(limit, 100))
end
