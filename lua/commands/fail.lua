-- fail, failed, unfail: failing jobs by group, listing failures, putting failed jobs back.
--
--   fail    jid, worker, group, message, [data]   -> jid
--   failed  [group, [start=0, [limit=25]]]         -> no group: JSON {group: count};
--                                                     else JSON {total, dropped, jobs: [job...]}
--                                                     (dropped: by max-failed-per-group; an
--                                                     entry an outside writer left that is no
--                                                     jid is skipped, Arg.jids_in)
--   unfail  queue, group, [count=25]               -> number of jobs moved back to `queue`
--   fail.held jid, worker, group, message          -> jid (ours: fails only a job `worker` holds)
--
-- A job in any state can be failed; a running job only by the worker that holds its lock (a
-- stale worker's fail is refused, as in include/lock.lua). Failed jobs keep their dependents
-- blocked (a flow resumes after an unfail or a retry) and are kept until canceled, unfailed or
-- put again. The qless dialect fails only a running job, by the worker it was given to, keeps a
-- failure over unfail, and `failed group` lists jids (include/qless.lua).
-- Errors: INVALID, TOOLARGE, NOTFOUND, LOCKLOST, WRONGSTATE (fail.held).
-- @include args
-- @include job
-- @include queue
-- @include lock
-- @include failing
-- @include qless
-- @include dialect

api['fail'] = function(args)
  local cmd = 'Fail'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local group = Arg.id(cmd, 'group', args[3])
  local message = Arg.text(cmd, 'message', args[4])
  local data
  if args[5] ~= nil then data = Arg.json(cmd, 'data', args[5], 'payload') end
  local fields = Job.fields(jid, 'queue', 'worker', 'failure', 'expires', 'grace')
  if not fields then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist')
  end
  if Dialect.rules.fail_by_given_worker then
    -- Its worker fails it whether its lock expired or not.
    if fields.state ~= 'running' then
      Err.raise('WRONGSTATE', cmd .. '(): Job not currently running: ' .. fields.state)
    elseif fields.worker ~= worker then
      Err.raise('LOCKLOST', cmd .. '(): Job running with another worker: ' .. fields.worker)
    end
  elseif fields.state == 'running' then
    Lock.check_held(cmd, jid, worker, fields)
  end
  Job.fail(jid, fields, worker, group, message, data)
  return jid
end

api['fail.held'] = function(args)
  local cmd = 'FailHeld'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local group = Arg.id(cmd, 'group', args[3])
  local message = Arg.text(cmd, 'message', args[4])
  local fields = Lock.check_owner(cmd, jid, worker, nil)
  Lock.release(jid, fields.queue, worker, fields)
  fields.state = 'released' -- out of every index already: nothing for Job.fail to unindex
  Job.fail(jid, fields, worker, group, message)
  return jid
end

-- `failed` without a group: each group's count of failed jobs, in both dialects.
local function failed_counts()
  local counts = {}
  for _, group in ipairs(redis.call('smembers', Keys.failures())) do
    counts[group] = redis.call('llen', Keys.failed(group))
  end
  if next(counts) == nil then return '{}' end
  return cjson.encode(counts)
end

-- `failed group [start [limit]]`'s checked arguments.
local function failed_range(args)
  local cmd = 'Failed'
  return Arg.id(cmd, 'group', args[1]),
    Arg.optional_integer(cmd, 'start', args[2], 0, 0, Engine.MAX_OFFSET),
    Arg.optional_integer(cmd, 'limit', args[3], 25, 0, Engine.MAX_COUNT)
end

api['failed'] = function(args)
  if args[1] == nil then return failed_counts() end
  local group, start, limit = failed_range(args)
  local jids = {}
  if limit > 0 then jids = Arg.jids_in(redis.call('lrange', Keys.failed(group), start, start + limit - 1)) end
  local reply = { total = redis.call('llen', Keys.failed(group)),
    dropped = tonumber(redis.call('hget', Keys.failed_dropped(), group) or 0) }
  -- The jobs spliced in as their text (Job.describe_list says why).
  return string.sub(cjson.encode(reply), 1, -2) .. ',"jobs":' .. Job.describe_list(jids) .. '}'
end

-- The qless dialect lists a group's jids as they are (a client fetches the jobs with multiget),
-- up to start + limit - 1 whatever the limit.
Qless.COMMANDS['failed'] = function(args)
  if args[1] == nil then return failed_counts() end
  local group, start, limit = failed_range(args)
  return cjson.encode({ total = redis.call('llen', Keys.failed(group)),
    jobs = Arg.jids_in(redis.call('lrange', Keys.failed(group), start, start + limit - 1)) })
end

api['unfail'] = function(args)
  local cmd = 'Unfail'
  local queue = Arg.id(cmd, 'queue', args[1])
  local group = Arg.id(cmd, 'group', args[2])
  local count = Arg.optional_integer(cmd, 'count', args[3], 25, 0, Engine.MAX_COUNT)
  if count == 0 then return 0 end
  -- Oldest first: the list is newest first.
  local jids = redis.call('lrange', Keys.failed(group), -count, -1)
  for i = #jids, 1, -1 do
    local jid = jids[i]
    local fields = Job.fields(jid, 'queue', 'worker', 'failure', 'priority', 'ttl')
    if fields and fields.state == 'failed' then
      Job.unindex(jid, fields)
      local key = Keys.job(jid)
      local failure = Dialect.rules.failure_kept_until_complete and fields.failure or '{}'
      redis.call('hset', key, 'queue', queue, 'failure', failure, 'updated', Engine.now)
      -- Lost workers count again from 0, as retries do: `remaining` left out equals retries
      -- (Job.DEFAULTS).
      redis.call('hdel', key, 'lost', 'remaining')
      Job.history(jid, 'put', { q = queue })
      Queue.enqueue(queue, jid, tonumber(fields.priority) or 0)
      if fields.ttl then Queue.arm_ttl(queue, jid, tonumber(fields.ttl)) end -- a new life (ours)
      redis.call('zadd', Keys.queues(), 'NX', Engine.now, queue)
    else
      redis.call('lrem', Keys.failed(group), 0, jid)
    end
  end
  if redis.call('llen', Keys.failed(group)) == 0 then
    redis.call('srem', Keys.failures(), group)
  end
  return #jids
end
