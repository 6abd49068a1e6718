-- work: a queue's waiting jobs, in the order pop takes them, kept in two keys.
--
-- `q:<queue>-fifo` (a list) holds the jobs put with priority 0, the common one, in put order: a
-- list entry is the jid alone (about 34 bytes in a listpack node, where a sorted set's entry
-- costs about 100), and RPUSH needs no sequence number. `q:<queue>-work` (a sorted set, score
-- `priority * 2^32 + seq`, `seq` from `P seq`) holds every other waiting job: those of another
-- priority, and those of priority 0 whose place the list cannot express: given back at the
-- front of their priority (score `priority * 2^32`: leases, returns), back from a parked set
-- with their score (include/slots.lua; a job taken from the list is scored when parked), or
-- changed to 0 from another priority (keeping its sequence number, as `priority` does). Pop
-- order: the sorted set's entries below 2^32 (negative priorities, then those priority-0
-- jobs), then the list, then the rest. A job of the list whose priority changes goes behind
-- the jobs of its new priority (the list keeps no sequence number).
-- Taking a job out of the list by its jid (cancel, a put over it, expiry, a priority change) is
-- an LREM, O(n) in the list's length; the sorted set is tried first.
-- @include keys
-- @include engine
local Work = {}

-- Work-queue scores: priority * 2^32 + insertion sequence. Lower pops first, equal priorities
-- in insertion order, exact (no timestamp precision involved). Priorities are bounded by
-- Queue.MAX_PRIORITY so the score stays an exact integer in a double (< 2^53).
Work.SPAN = 4294967296
-- The lower bound of the scores that pop after the list: (0 + 1) * 2^32, exclusive. A member,
-- not a local: the bundle's main chunk keeps its few locals for modules.
Work.AFTER_LIST = '(4294967296'

function Work.score(priority, seq)
  return priority * Work.SPAN + seq % Work.SPAN
end

-- A new place at the back of `priority` in the sorted set.
function Work.next_score(priority)
  return Work.score(priority, redis.call('incr', Keys.seq()))
end

-- Waiting jobs of `queue` (parked ones not included).
function Work.count(queue)
  return redis.call('zcard', Keys.work(queue)) + redis.call('llen', Keys.fifo(queue))
end

-- At the back of its priority (a put, a promotion, a retry).
function Work.add(queue, jid, priority)
  if priority == 0 then
    redis.call('rpush', Keys.fifo(queue), jid)
  else
    redis.call('zadd', Keys.work(queue), Work.next_score(priority), jid)
  end
end

-- `jobs` ({jid, priority} pairs, flat) at the back of their priorities in that order: one
-- RPUSH for the jobs of priority 0, one INCRBY and a few ZADDs for the others.
function Work.add_many(queue, jobs)
  local listed, scored = {}, {}
  for i = 1, #jobs, 2 do
    if jobs[i + 1] == 0 then
      listed[#listed + 1] = jobs[i]
    else
      scored[#scored + 1] = jobs[i + 1]
      scored[#scored + 1] = jobs[i]
    end
  end
  if #listed > 0 then Engine.call_many('rpush', Keys.fifo(queue), listed) end
  if #scored == 0 then return end
  local count = #scored / 2
  local seq = redis.call('incrby', Keys.seq(), count) - count
  for i = 1, count do scored[2 * i - 1] = Work.score(scored[2 * i - 1], seq + i) end
  Engine.call_many('zadd', Keys.work(queue), scored)
end

-- At the front of its priority (a lost worker's job given back: it was taken once already),
-- ahead of every job put with that priority since (score `priority * 2^32`).
function Work.add_front(queue, jid, priority)
  redis.call('zadd', Keys.work(queue), priority * Work.SPAN, jid)
end

-- Back with the score it had (a parked job unparked, include/slots.lua: its place kept).
function Work.add_scored(queue, jid, score)
  redis.call('zadd', Keys.work(queue), score, jid)
end

-- Waiting job `jid` of `queue` changes from priority `old` to `new`: in the sorted set it keeps
-- its place among equal priorities (the score's low part is its sequence number, so a job
-- changed to 0 stays there, ahead of the list); out of the list, which keeps no sequence number,
-- it goes behind the jobs of its new priority. Returns whether it was in either key (false:
-- parked, or in the list already at `new`).
function Work.reprioritize(queue, jid, old, new)
  local work = Keys.work(queue)
  local score = tonumber(redis.call('zscore', work, jid))
  if score then
    redis.call('zadd', work, new * Work.SPAN + (score - old * Work.SPAN), jid)
    return true
  end
  if new ~= old and redis.call('lrem', Keys.fifo(queue), 1, jid) == 1 then
    redis.call('zadd', work, Work.next_score(new), jid)
    return true
  end
  return false
end

-- Out of the waiting jobs of `queue` (either key). Returns whether it was there.
function Work.remove(queue, jid)
  if redis.call('zrem', Keys.work(queue), jid) == 1 then return true end
  return redis.call('lrem', Keys.fifo(queue), 1, jid) == 1
end

-- The next up to `n` waiting jobs of `queue` in pop order, taken out of it: a flat list of jids
-- and scores (a list entry's score false), and whether it holds every job that was waiting (fewer
-- than `n`: no need to ask again). Work.give_back returns those not used.
function Work.take(queue, n)
  local work = Keys.work(queue)
  local batch =
    redis.call('zrangebyscore', work, '-inf', Work.AFTER_LIST, 'WITHSCORES', 'LIMIT', 0, n)
  -- The sorted set's entries taken, ranks 0 to scored - 1 (the front band, then the rest).
  local scored = #batch / 2
  if scored < n then
    -- LRANGE and LTRIM, which the documented users are granted (docs/pages/acl.md), not LPOP.
    local fifo = Keys.fifo(queue)
    local jids = redis.call('lrange', fifo, 0, n - scored - 1)
    local size = #batch
    for i, jid in ipairs(jids) do
      batch[size + 2 * i - 1], batch[size + 2 * i] = jid, false
    end
    if #jids > 0 then redis.call('ltrim', fifo, #jids, -1) end
    local wanted = n - scored - #jids
    if wanted > 0 then
      local rest = redis.call('zrange', work, scored, scored + wanted - 1, 'WITHSCORES')
      size = #batch
      for i = 1, #rest do batch[size + i] = rest[i] end
      scored = scored + #rest / 2
    end
  end
  if scored > 0 then redis.call('zremrangebyrank', work, 0, scored - 1) end
  return batch, #batch < 2 * n
end

-- The entries `batch[from...]` of a Work.take back where they were, in their order.
function Work.give_back(queue, batch, from)
  local listed, scored = {}, {}
  for i = #batch - 1, from, -2 do
    local score = batch[i + 1]
    if score == false then
      listed[#listed + 1] = batch[i] -- pushed back to the head in reverse: their order kept
    else
      scored[#scored + 1] = score
      scored[#scored + 1] = batch[i]
    end
  end
  Engine.call_many('lpush', Keys.fifo(queue), listed)
  Engine.call_many('zadd', Keys.work(queue), scored)
end

-- Up to `count` waiting jids of `queue` from `offset` on, in pop order.
function Work.range(queue, offset, count)
  if count <= 0 then return {} end
  local work, fifo = Keys.work(queue), Keys.fifo(queue)
  local first = redis.call('zcount', work, '-inf', Work.AFTER_LIST)
  local listed = redis.call('llen', fifo)
  local out = {}
  local function read(jids)
    for _, jid in ipairs(jids) do out[#out + 1] = jid end
  end
  if offset < first then
    read(redis.call('zrange', work, offset, math.min(first, offset + count) - 1))
  end
  local wanted = count - #out
  local from = math.max(offset - first, 0)
  if wanted > 0 and from < listed then
    read(redis.call('lrange', fifo, from, from + wanted - 1))
  end
  wanted = count - #out
  if wanted > 0 then
    local rest = first + math.max(offset - first - listed, 0)
    read(redis.call('zrange', work, rest, rest + wanted - 1))
  end
  return out
end

-- How many waiting jobs of `queue` pop before `jid`, or nil when it is not waiting there.
function Work.rank(queue, jid)
  local work = Keys.work(queue)
  local score = tonumber(redis.call('zscore', work, jid))
  if score then
    local rank = redis.call('zrank', work, jid)
    if score < Work.SPAN then return rank end
    return rank + redis.call('llen', Keys.fifo(queue))
  end
  local at = redis.call('lpos', Keys.fifo(queue), jid)
  if not at then return nil end
  return redis.call('zcount', work, '-inf', Work.AFTER_LIST) + at
end

-- How many waiting jobs of `queue` pop before a job that joins the back of `priority` now.
function Work.ahead_of_new(queue, priority)
  local below = string.format('(%.17g', (priority + 1) * Work.SPAN)
  local ahead = redis.call('zcount', Keys.work(queue), '-inf', below)
  if priority >= 0 then ahead = ahead + redis.call('llen', Keys.fifo(queue)) end
  return ahead
end
