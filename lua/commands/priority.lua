-- priority: change a job's priority (lower runs sooner); a waiting job is re-ordered now.
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
    -- Keep the job's place among equal priorities: the score's low part is its sequence number.
    local old = tonumber(redis.call('zscore', Keys.work(fields.queue), jid))
    if old then
      local seq = old - (tonumber(fields.priority) or 0) * Queue.SEQ_SPAN
      redis.call('zadd', Keys.work(fields.queue), priority * Queue.SEQ_SPAN + seq, jid)
    else -- parked for a concurrency-key or throttle slot (include/slots.lua)
      Slots.rescore(jid, fields.queue, priority, tonumber(fields.priority) or 0, Queue.SEQ_SPAN)
    end
  end
  redis.call('hset', Keys.job(jid), 'priority', priority, 'updated', Engine.now)
  return priority
end
