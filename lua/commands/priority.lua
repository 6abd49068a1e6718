-- priority: change a job's priority (lower runs sooner); a waiting job is re-ordered now,
-- keeping its place among the jobs put with the same priority, except where the list of
-- priority 0 keeps no place (include/work.lua): a job that waits there goes behind the jobs of
-- its new priority, and one changed to 0 waits ahead of the jobs put with 0.
--
--   priority jid, priority  -> the priority
--
-- Errors: INVALID, NOTFOUND.
-- @include args
-- @include job
-- @include queue

api['priority'] = function(args)
  local cmd = 'Priority'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local priority = Arg.integer(cmd, 'priority', args[2], -Queue.MAX_PRIORITY, Queue.MAX_PRIORITY)
  local fields = Job.fields(jid, 'queue', 'priority')
  if not fields then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
  if fields.state == 'waiting' then
    local old_priority = tonumber(fields.priority) or 0
    local queue = fields.queue
    local work = Keys.work(queue)
    local old = tonumber(redis.call('zscore', work, jid))
    if old then
      -- Its place among equal priorities kept: the score's low part is its sequence number (a
      -- job changed to 0 stays in the sorted set, ahead of the list: include/work.lua).
      local seq = old - old_priority * Queue.SEQ_SPAN
      redis.call('zadd', work, priority * Queue.SEQ_SPAN + seq, jid)
    elseif priority ~= old_priority and redis.call('lrem', Keys.fifo(queue), 1, jid) == 1 then
      -- Out of the list, which keeps no sequence number: behind the jobs of its new priority.
      redis.call('zadd', work, Work.next_score(priority), jid)
    elseif redis.call('zscore', Keys.parked(queue), jid) then
      -- Parked for a concurrency-key or throttle slot (include/slots.lua): its place kept.
      Slots.rescore(jid, queue, priority, old_priority, Queue.SEQ_SPAN)
    end
  end
  redis.call('hset', Keys.job(jid), 'priority', priority, 'updated', Engine.now)
  return priority
end
