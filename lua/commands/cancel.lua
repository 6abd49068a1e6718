-- cancel, timeout: remove jobs for good / take a running job's lock away now.
--
--   cancel   jid...  -> list of the jids canceled (jobs that do not exist are skipped)
--   timeout  jid...  -> nil
--
-- cancel is refused, changing nothing, while a dependent of a listed job is not listed too:
-- it would wait forever, and for a completed job (WRONGSTATE: a cancel stops what has not ended;
-- a flow run's completed job is the run's result, its failed or expired one what its retry puts
-- back; `delete` removes a job for good). The qless
-- dialect removes a completed job that is no flow run's, as qless does
-- (`cancel_removes_completed`). A canceled running job's worker is told `canceled`. A job of a flow
-- run that had not completed leaves its run canceled (Runs.drop_job: a retry of the run puts it
-- back, its attempts and step logs kept).
-- timeout expires a running job's lock now: its worker is told lock_lost and its late
-- heartbeat or complete is refused; the next pop of the queue takes it (using one retry). Like
-- an expired lock it counts in the queue's `retries` statistic; a jid listed twice counts once.
-- Errors: INVALID, HASDEPENDENTS, WRONGSTATE (timeout of a job that is not running), NOTFOUND.
-- @include args
-- @include job
-- @include events
-- @include dialect
-- @include runs

-- A job of a run in these states has ended (the word a refusal says it with): its run's
-- decider offers no cancel of it (include/run_state.lua).
local ENDED = { complete = 'completed', failed = 'failed', expired = 'expired' }

-- The run of a completed job that a flow run counts, or nil: such a job is the run's result
-- (its outputs, what a re-run starts from), never removed by a cancel.
local function finished_run_job(jid)
  local run_id = RunCounts.run_in(redis.call('hget', Keys.job(jid), 'counted'))
  if run_id and redis.call('exists', Keys.run(run_id)) == 1 then return run_id end
  return nil
end

api['cancel'] = function(args)
  local cmd = 'Cancel'
  local listed = {}
  for i, jid in ipairs(args) do
    Arg.jid(cmd, 'jid', jid)
    listed[jid] = true
  end
  local jobs = {}
  for _, jid in ipairs(args) do
    if not jobs[jid] then
      local fields = Job.load_for_delete(jid)
      if fields then
        local ended = ENDED[fields.state]
        local run_id = ended and finished_run_job(jid)
        if run_id then
          Err.raise('WRONGSTATE', cmd .. '(): job ' .. jid .. ' of run ' .. run_id .. ' has ' ..
            ended .. ': cancel stops what has not ended (' ..
            (fields.state == 'complete' and 'flows rerun runs it again' or
              'flows retry puts it back') .. ', flows delete removes it for good)')
        elseif fields.state == 'complete' and not Dialect.rules.cancel_removes_completed then
          Err.raise('WRONGSTATE', cmd .. '(): job ' .. jid .. ' has completed: cancel stops ' ..
            'what has not ended (flows delete removes it for good)')
        end
        for _, dependent in ipairs(redis.call('smembers', Keys.dependents(jid))) do
          if not listed[dependent] then
            -- qless's words say it the other way round (Qless.error).
            Err.raise('HASDEPENDENTS', cmd .. '(): ' .. dependent .. ' is a dependent of ' .. jid ..
              ' but is not mentioned to be canceled')
          end
        end
        jobs[jid] = fields
      end
    end
  end
  local canceled = {}
  for _, jid in ipairs(args) do
    local fields = jobs[jid]
    if fields then
      jobs[jid] = nil
      Events.canceled(jid, fields)
      Runs.drop_job(jid, fields, 'canceled')
      Job.delete(jid, fields)
      table.insert(canceled, jid)
    end
  end
  return canceled
end

api['timeout'] = function(args)
  local cmd = 'Timeout'
  if #args == 0 then Arg.fail(cmd, 'no jids given') end
  local jobs = {}
  for i, jid in ipairs(args) do
    Arg.jid(cmd, 'jid', jid)
    local fields = Job.fields(jid, 'queue', 'worker')
    if not fields then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
    if fields.state ~= 'running' then
      Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is not running: ' .. fields.state)
    end
    jobs[i] = fields
  end
  local done = {}
  for i, jid in ipairs(args) do
    local fields = jobs[i]
    if not done[jid] then
      done[jid] = true
      -- The worker is told now, so the next pop may take the job without another grace period;
      -- like a lock that expired, it counts as a retry of the queue when its worker is told.
      -- (qless writes the expiry as 0, and the entry without the worker.)
      local expires = Dialect.rules.lock_held_until_taken and 0 or Engine.now
      redis.call('hset', Keys.job(jid), 'expires', expires, 'grace', 1, 'updated', Engine.now)
      redis.call('zadd', Keys.locks(fields.queue), Engine.now, jid)
      redis.call('zrem', Keys.worker_jobs(fields.worker), jid)
      Job.history(jid, 'timed-out', Dialect.entry_by(fields.worker))
      Stats.bump(fields.queue, 'retries', 1)
      Events.tracked('stalled', jid)
      Events.to_worker(fields.worker, 'lock_lost', jid)
    end
  end
  return nil
end
