-- subflow.wait: a flow step that runs a child flow hands itself to the engine (ours).
--
--   subflow.wait jid, worker, queue, child_run_id, [run JSON, jobs JSON]
--       -> 'waiting': the step's job now waits for the child run (its worker lets it go); or,
--          when no job of the child run can still run, the child's status (Runs.status:
--          'succeeded', 'failed', 'canceled', 'expired' or 'blocked'): the worker then
--          completes the step with the child's outputs, or fails it.
--
-- Called by the worker holding the step's job; its lock is checked as complete checks it.
-- When the run child_run_id does not exist it is submitted in this same call from `run` and
-- `jobs`, exactly as flow.submit would (include/runs.lua), its record naming this job as
-- `parent_jid`; without them the call is refused. A run that exists must name this job as its
-- parent. The first call after the job was put (its run was submitted, or run.retry put it
-- back) also puts the child's failed and expired jobs back, as run.retry of the child would: a
-- retry of the parent retries the child; after run.rerun of the step (field `rerun_child`) it
-- re-runs every job of the child instead (RunState.rerun_run), unless the child is running
-- again by itself. Later calls (the job was released, or its worker died and another took it)
-- only report.
--
-- Waiting: the job leaves its worker (as complete does) and waits in state `depends` (field
-- `child` = the child run's id; no delay when released) for every job of the child that can
-- still run: waiting, scheduled, running, buried, or waiting for dependencies not held back by
-- a failure. Its trigger rule is then all_done, whatever the step's own (include/triggers.lua):
-- once each of them is done - complete, skipped, failed, expired, or held back for good - the
-- job is released, in the call that settled the last of them, and a worker runs it again to
-- report. Runs.status counts it as active (its run is running while its child runs); canceling
-- its run cancels the child run (Runs.cancel_child), and canceling the child run releases it.
-- The field `child` stays on the job until a put over it (run.retry) clears it. Waiting takes
-- one off the job's `runs`: its run after the child ended is the same attempt, and logs as it.
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE, LOCKLOST.
-- @include args
-- @include job
-- @include lock
-- @include runs
-- @include events

local function check_parent(cmd, child, jid)
  local parent = redis.call('hget', Keys.run(child), 'parent_jid')
  if parent ~= jid then
    Arg.fail(cmd, 'run ' .. child .. ' exists and is not the child run of job ' .. jid ..
      ' (its parent: ' .. tostring(parent or 'none') .. ')')
  end
end

-- The child's jobs the step waits for (see the header), in the run's order: jobs come in
-- dependency order, so a job's dependencies were looked at before it.
local function open_jobs(child)
  local open, held = {}, {}
  for _, jid in ipairs(RunState.jids(child)) do
    local state = Job.state(jid)
    if state == 'failed' or state == 'expired' then
      held[jid] = true
    elseif state == 'depends' then
      local blocked = false
      for _, dependency in ipairs(redis.call('smembers', Keys.dependencies(jid))) do
        if held[dependency] then blocked = true; break end
      end
      if blocked then held[jid] = true else open[#open + 1] = jid end
    elseif state and state ~= 'complete' then
      open[#open + 1] = jid
    end
  end
  return open
end

-- The job `jid` (running, held by `worker`) waits for the child's `open` jobs.
local function wait_for(jid, queue, worker, fields, child, open)
  Lock.release(jid, queue, worker, fields)
  local key = Keys.job(jid)
  redis.call('hset', key, 'state', 'depends', 'worker', '', 'expires', 0, 'delay', 0,
    'child', child, 'updated', Engine.now)
  if fields.grace then redis.call('hdel', key, 'grace') end
  -- Its run after the child ended only reports: the same attempt, not a new one (`runs`).
  redis.call('hincrby', key, 'runs', -1)
  RunCounts.again(jid, true) -- its step's attempts are read again (include/run_counts.lua)
  Engine.call_many('sadd', Keys.dependencies(jid), open)
  for _, dependency in ipairs(open) do
    redis.call('sadd', Keys.dependents(dependency), jid)
  end
  redis.call('zadd', Keys.depends(queue), Engine.now, jid)
  Job.history(jid, 'waiting', { worker = worker, child = child })
  Events.log({ jid = jid, event = 'subflow_waiting', queue = queue, child = child,
    jobs = #open })
  redis.call('zadd', Keys.workers(), Engine.now, worker)
end

api['subflow.wait'] = function(args)
  local cmd = 'SubflowWait'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local queue = Arg.name(cmd, 'queue', args[3])
  local child = Runs.id(cmd, args[4], 'child_run_id')
  if #args ~= 4 and #args ~= 6 then
    Arg.fail(cmd, 'give jid, worker, queue, child_run_id and, to submit it, run and jobs')
  end
  local fields = Lock.check_fields(cmd, jid, worker, queue, Job.fields(jid, 'queue', 'worker',
    'expires', 'grace', 'ttl_at', 'ckey', 'climit', 'throttle', 'child', 'rerun_child'))
  local submission
  if Runs.exists(child) then
    check_parent(cmd, child, jid)
  elseif #args == 6 then
    submission = Runs.check(cmd, Runs.parse(cmd, child, args[5], args[6]))
    submission.run.parent_jid = jid
  else
    Err.raise('NOTFOUND', cmd .. '(): no run ' .. child .. ' (give its run and jobs to submit it)')
  end

  if submission then
    Runs.write(submission)
    -- The parent run counts its child runs (the run list shows them under it).
    local parent_run = submission.run.parent_run
    if type(parent_run) == 'string' and Runs.exists(parent_run) then
      redis.call('hincrby', Keys.run(parent_run), 'children', 1)
    end
  elseif fields.rerun_child == child and RunState.read(child, 0).status ~= 'running' then
    RunState.rerun_run(child) -- the step was re-run: so is its child, every job of it
  elseif fields.child ~= child and RunState.allows(RunState.read(child, 0).actions, 'retry') then
    api['run.retry']({ child }) -- the parent was put again: so is what failed in its child
  end
  if fields.rerun_child then redis.call('hdel', Keys.job(jid), 'rerun_child') end
  local open = open_jobs(child)
  if #open == 0 then
    redis.call('hset', Keys.job(jid), 'child', child)
    RunCounts.touch(jid) -- its step's kept `child` (include/run_counts.lua)
    return Runs.status(child)
  end
  wait_for(jid, queue, worker, fields, child, open)
  return 'waiting'
end
