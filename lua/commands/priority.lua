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
-- @include work

api['priority'] = function(args)
  local cmd = 'Priority'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local priority = Arg.integer(cmd, 'priority', args[2], -Queue.MAX_PRIORITY, Queue.MAX_PRIORITY)
  local fields = Job.fields(jid, 'queue', 'priority')
  if not fields then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
  if fields.state == 'waiting' then
    local old = tonumber(fields.priority) or 0
    if not Work.reprioritize(fields.queue, jid, old, priority)
      and redis.call('zscore', Keys.parked(fields.queue), jid) then
      -- Parked for a concurrency-key or throttle slot (include/slots.lua): its place kept.
      Slots.rescore(jid, fields.queue, priority, old, Queue.SEQ_SPAN)
    end
  end
  redis.call('hset', Keys.job(jid), 'priority', priority, 'updated', Engine.now)
  return priority
end
