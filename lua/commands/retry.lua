-- retry: the worker holding a job gives it back to be run again, using one of its retries.
--
--   retry jid, queue, worker, [delay=0], [group], [message]  -> retries remaining;
--                                                              below 0: the job was failed
--
-- With retries left the job waits again (or is scheduled after `delay`). With none left it fails
-- in `group` (default failed-retries-<queue>) with `message` (at most 512 KiB). The qless dialect
-- records no `retried` entry, keeps a given group and message as the job's failure, and when
-- the retries run out publishes only the jid on `failed` for a tracked job (include/failing.lua).
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE, LOCKLOST.
-- @include args
-- @include job
-- @include queue
-- @include lock
-- @include commands/fail
-- @include dialect

api['retry'] = function(args)
  local cmd = 'Retry'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local queue = Arg.id(cmd, 'queue', args[2])
  local worker = Arg.id(cmd, 'worker', args[3])
  local delay = Arg.optional_number(cmd, 'delay', args[4], 0, 0)
  local group, message
  if args[5] ~= nil and args[5] ~= '' then group = Arg.id(cmd, 'group', args[5]) end
  if args[6] ~= nil and args[6] ~= '' then message = Arg.text(cmd, 'message', args[6]) end
  local fields = Lock.check_owner(cmd, jid, worker, queue)

  Lock.release(jid, queue, worker, fields)
  -- Read, not HINCRBY: the hash leaves `remaining` out while it equals retries (Job.DEFAULTS).
  local remaining = tonumber(fields.remaining) - 1
  redis.call('zadd', Keys.workers(), Engine.now, worker)
  if remaining < 0 then
    redis.call('hset', Keys.job(jid), 'remaining', remaining)
    fields.state = 'failed-pending' -- already out of every index: nothing for Job.fail to unindex
    fields.defaulted = not (group and message)
    Job.fail(jid, fields, worker, group or ('failed-retries-' .. queue),
      message or ('Job exhausted retries in queue "' .. queue .. '"'), nil, 'retry')
    return remaining
  end
  redis.call('hset', Keys.job(jid), 'remaining', remaining, 'updated', Engine.now)
  -- No worker and no expiry, their defaults (Job.DEFAULTS); its next start claims again.
  redis.call('hdel', Keys.job(jid), 'worker', 'expires', 'grace', 'cclaim')
  if Dialect.rules.retry_records_failure then
    if group and message then
      redis.call('hset', Keys.job(jid), 'failure', cjson.encode({ group = group, message = message,
        when = math.floor(Engine.now), worker = worker }))
    end
  else
    Job.history(jid, 'retried',
      { worker = worker, group = group, message = message, delay = delay })
    Stats.bump(queue, 'retries', 1)
  end
  Queue.release(queue, jid, tonumber(fields.priority) or 0, delay)
  return remaining
end
