-- run.retry, run.cancel: resume a failed run / stop a run (ours).
--
--   run.retry   run_id  -> number of failed jobs put back
--   run.cancel  run_id  -> number of jobs canceled
--
-- run.retry puts every failed (or expired) job of the run back into its queue with its retries
-- restored (and its put options; a wait that timed out awaits its signal again, its timeout
-- counted from the retry); the jobs they were blocking (still waiting for them) then run
-- as they complete, and nothing that completed runs again, except jobs with a trigger rule
-- (all_done, one_failed: hooks like `finally`) that already ran because of the failure: they
-- wait for their dependencies again. A fan-out step that failed because its producer's output
-- was refused (include/fanout.lua) is expanded again from that output, never run as a job; an
-- expanded step's items are jobs like the others: only the failed ones run again.
-- run.cancel cancels every job of the run that has not ended (complete, failed, expired); running
-- jobs' workers are told `canceled`; a sub-flow step waiting for its child run cancels that run
-- too, and a canceled child run releases the step waiting for it (commands/subflow.lua). Both
-- are one call: a run never shows half of either.
-- Errors: INVALID, NOTFOUND.
-- @include args
-- @include putting
-- @include triggers
-- @include runs
-- @include fanout

local function run_jids(cmd, run_id)
  if redis.call('exists', Keys.run(run_id)) == 0 then
    Err.raise('NOTFOUND', cmd .. '(): no run ' .. run_id)
  end
  return redis.call('lrange', Keys.run_jobs(run_id), 0, -1)
end

local RETRY_FIELDS = { 'queue', 'worker', 'failure', 'tags', 'priority', 'retries', 'klass', 'data',
  'trigger', 'needs', 'ttl', 'ttr', 'ckey', 'climit', 'throttle', 'wait', 'fanout' }

-- The put that sends a job back to its queue as it was first put, waiting for `depends`.
local function reput(jid, fields, depends)
  return {
    worker = 'flows', queue = fields.queue, jid = jid, klass = fields.klass, data = fields.data,
    delay = 0, priority = tonumber(fields.priority) or 0, retries = tonumber(fields.retries) or 0,
    depends = depends, ttl = tonumber(fields.ttl), ttr = tonumber(fields.ttr), ckey = fields.ckey,
    climit = tonumber(fields.climit) or 1, throttle = fields.throttle, wait = fields.wait,
    keep_logs = true, -- the attempts so far stay readable; the next one is numbered after them
  }
end

api['run.retry'] = function(args)
  local cmd = 'RunRetry'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local jids = run_jids(cmd, run_id)
  local jobs = {}
  for i, jid in ipairs(jids) do jobs[i] = Job.fields(jid, unpack(RETRY_FIELDS)) end

  local retried, reset = 0, {}
  for i, jid in ipairs(jids) do
    local fields = jobs[i]
    if fields and fields.fanout and fields.state == 'failed' then
      -- A fan-out whose items were refused is expanded again from its producer's result.
      local from = cjson.decode(fields.fanout).from
      local plan = Fanout.plan(jid, redis.call('hget', Keys.job(from), 'result') or nil, true)
      if plan then
        Fanout.apply(plan)
        retried = retried + 1
      end
    elseif fields and (fields.state == 'failed' or fields.state == 'expired') then
      Put.write(reput(jid, fields, {}), fields)
      retried = retried + 1
      reset[jid] = true
    end
  end
  if retried == 0 then return 0 end
  -- Jobs whose rule fired on the failure wait for their needs again. Jobs are in dependency
  -- order, so a re-armed job's own needs were settled (reset or not) before it is looked at.
  for i, jid in ipairs(jids) do
    local fields = jobs[i]
    if fields and fields.state == 'complete' and fields.trigger and fields.needs then
      local open = {}
      for _, need in ipairs(cjson.decode(fields.needs)) do
        local state = redis.call('hget', Keys.job(need), 'state')
        if state and state ~= 'complete' then table.insert(open, need) end
      end
      if #open > 0 then
        Put.write(reput(jid, fields, open), fields)
        reset[jid] = true
      end
    end
  end
  -- A job still waiting also waits again for what it needed and was reset (its edge to a
  -- re-armed job was removed when that job first completed).
  for _, jid in ipairs(jids) do
    local fields = Job.fields(jid, 'needs')
    if fields and fields.state == 'depends' and fields.needs then
      for _, need in ipairs(cjson.decode(fields.needs)) do
        if reset[need] then
          redis.call('sadd', Keys.dependencies(jid), need)
          redis.call('sadd', Keys.dependents(need), jid)
        end
      end
    end
  end
  return retried
end

api['run.cancel'] = function(args)
  local cmd = 'RunCancel'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local jids = run_jids(cmd, run_id)
  local canceled = 0
  for _, jid in ipairs(jids) do
    local fields = Job.load_for_delete(jid)
    if fields and fields.state ~= 'complete' and fields.state ~= 'failed' and fields.state ~= 'expired' then
      if fields.state == 'running' then Events.to_worker(fields.worker, 'canceled', jid) end
      Runs.cancel_child(jid, fields)
      Events.log({ jid = jid, event = 'canceled', worker = fields.worker or '', queue = fields.queue or '' })
      Job.keep_logs(jid, run_id) -- what it wrote stays readable with the run
      Job.delete(jid, fields)
      canceled = canceled + 1
    end
  end
  redis.call('hset', Keys.run(run_id), 'canceled', Engine.now)
  Runs.release_parent(run_id)
  return canceled
end
