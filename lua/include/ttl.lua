-- ttl: jobs that must start within a time to live (ours, from Tarantool's fifottl queues).
--
-- A job put with ('ttl', seconds) gets a deadline when it becomes ready: put time + delay + ttl
-- (for a job waiting on dependencies: the time its last dependency completes + delay + ttl;
-- Queue.arm_ttl). A job still waiting, scheduled or buried at its deadline is expired: out of its
-- queue, state 'expired', history 'expired', an `expired` event (P log and, when tracked, the
-- `expired` channel) and the queue's `expired` statistic; its dependents are settled as after a
-- failure (include/triggers.lua), and its run's end is notified when the expiry ended it
-- (include/notify.lua). A running job is not stopped by its deadline (its lock is its
-- ttr), but once it is handed back (release, retry with a delay, lock expiry) it expires there
-- too. `touch` moves the deadline. Expired jobs are kept, like completed ones, by jobs-history
-- and jobs-history-count (index `expired`, trimmed as jobs expire).
--
-- q:<queue>-ttl indexes the queue's jobs with a deadline, scored by when to look at each next:
-- its deadline, or for a running job its lock expiry. Pop, peek and `maintain` look at the due
-- ones (Ttl.expire_due, at most `limit` per call); pop also never hands out a job whose deadline
-- has passed, however far behind the index is.
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include job
-- @include triggers
-- @include notify
local Ttl = {}

-- Jobs looked at per call of pop or peek.
Ttl.BATCH = 100

-- States a job expires in.
local EXPIRABLE = { waiting = true, scheduled = true, buried = true }
Ttl.EXPIRABLE = EXPIRABLE

-- Expire job `jid`; `fields` holds its state and queue (and worker, failure, as Job.unindex needs).
function Ttl.expire(jid, fields)
  local queue = fields.queue
  Job.unindex(jid, fields)
  local key = Keys.job(jid)
  redis.call('hset', key, 'state', 'expired', 'worker', '', 'expires', 0, 'updated', Engine.now)
  redis.call('zrem', Keys.ttl(queue), jid)
  redis.call('zadd', Keys.expired(), Engine.now, jid)
  Job.history(jid, 'expired', { q = queue })
  Stats.bump(queue, 'expired', 1)
  Events.tracked('expired', jid)
  Events.log({ jid = jid, event = 'expired', queue = queue })
  Deps.settle(jid, 'failed')
  -- Not a step's `failure` (it never ran), but it may end its run: told as every ending is.
  Notify.job(jid, 'expired')
end

-- Look at the jobs of `queue` due in its ttl index (at most `limit`): expire those past their
-- deadline, look again later at the others, drop entries of jobs that ended or moved. Returns how
-- many jobs expired.
function Ttl.expire_due(queue, limit)
  local index = Keys.ttl(queue)
  local due = redis.call('zrangebyscore', index, '-inf', Engine.now, 'LIMIT', 0, limit)
  local expired = 0
  for _, jid in ipairs(due) do
    local f = Job.fields(jid, 'queue', 'ttl_at', 'expires', 'worker', 'failure')
    local deadline = f and tonumber(f.ttl_at)
    if not deadline or f.queue ~= queue or not (EXPIRABLE[f.state] or f.state == 'running') then
      redis.call('zrem', index, jid)
    elseif f.state == 'running' then
      -- Not before its lock could have expired (and at most once a second for a stalled job).
      local again = math.max(deadline, tonumber(f.expires) or 0, Engine.now + 1)
      redis.call('zadd', index, again, jid)
    elseif deadline <= Engine.now then
      Ttl.expire(jid, f)
      expired = expired + 1
    else
      redis.call('zadd', index, deadline, jid) -- touched since it was indexed
    end
  end
  if expired > 0 then Job.expire_finished(Keys.expired(), limit) end
  return expired
end
