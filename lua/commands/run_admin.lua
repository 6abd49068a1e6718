-- run.retry, run.cancel, run.rerun: resume a failed run / stop a run / re-run finished steps
-- (ours). Each checks the actions include/run_state.lua allows before it writes anything.
--
--   run.retry   run_id [target]                  -> number of failed jobs put back
--   run.cancel  run_id                           -> number of jobs canceled (its child runs' too)
--   run.rerun   run_id step [downstream] [jid]   -> number of jobs put back
--
-- run.retry puts every failed (or expired) job of the run back into its queue with its retries
-- restored, and every job canceled with the run as it was first put (Runs.keep_canceled kept
-- it in `run-canceled:<run id>`) (and its put options; a wait that timed out awaits its signal again, its timeout
-- counted from the retry); the jobs they were blocking (still waiting for them) then run
-- as they complete, and nothing that completed runs again, except jobs with a trigger rule
-- (all_done, one_failed: hooks like `finally`) that already ran because of a failure it puts
-- back: they wait for their dependencies again (a hook after a failure left alone, by a retry
-- of another step, stays as it ran). A fan-out step that failed because its producer's output
-- was refused (include/fanout.lua) is expanded again from that output, never run as a job; an
-- expanded step's items are jobs like the others: only the failed ones run again. `target` (a
-- step of the run, or one of its jids) limits it to that step's or job's failed jobs. Refused
-- (WRONGSTATE, naming the state and the allowed actions) when there is nothing failed to
-- retry: a completed job never runs again by retry, a job awaiting a signal is signaled.
-- run.cancel cancels every job of the run that has not ended (complete, failed, expired); running
-- jobs' workers are told `canceled`; a sub-flow step waiting for its child run cancels that run
-- too (its jobs counted in the reply, and its children's), and a canceled child run releases
-- the step waiting for it (commands/subflow.lua).
-- Refused when no job of the run is left to cancel.
-- run.rerun re-runs a step of a finished run (every job of it ended), or one job of it (`jid`),
-- and with `downstream` (1) every job that needs it, directly or not: each is put again as it
-- was first put, its attempts counting on from the earlier ones (its `runs`), whose step
-- logs stay readable as their attempt and whose outcome stays in the job's hash as
-- `attempt:<n>` (JSON {status, result, failure, updated}); a job downstream that was canceled
-- is put back as it was first put, as run.retry puts it. Refused while the run is running, and
-- for a job that did not finish (a canceled one: retry it). A run stays canceled while a job
-- canceled with it has not been put back (by either).
-- Each is one call: a run never shows half of any. RunState.retry is run.retry's work, which a
-- backfill shares to resume a tick's canceled run (commands/backfill.lua).
-- Errors: INVALID, NOTFOUND, WRONGSTATE.
-- @include args
-- @include putting
-- @include triggers
-- @include runs
-- @include fanout
-- @include run_state

local function run_jids(cmd, run_id)
  if redis.call('exists', Keys.run(run_id)) == 0 then
    Err.raise('NOTFOUND', cmd .. '(): no run ' .. run_id)
  end
  return RunState.jids(run_id)
end

local RETRY_FIELDS = { 'queue', 'worker', 'failure', 'tags', 'priority', 'retries', 'klass', 'data',
  'trigger', 'needs', 'ttl', 'ttr', 'ckey', 'climit', 'throttle', 'wait', 'fanout', 'deadline',
  'deadline_missed', 'empty' }

-- The put that sends a job back to its queue as it was first put, waiting for `depends`.
local function reput(jid, fields, depends)
  return {
    worker = 'flows', queue = fields.queue, jid = jid, klass = fields.klass, data = fields.data,
    delay = 0, priority = tonumber(fields.priority) or 0, retries = tonumber(fields.retries) or 0,
    depends = depends, ttl = tonumber(fields.ttl), ttr = tonumber(fields.ttr), ckey = fields.ckey,
    climit = tonumber(fields.climit) or 1, throttle = fields.throttle, wait = fields.wait,
    empty = fields.empty and true or nil, -- an empty fan-out completes again when released
    -- its step's deadline counts again from its next start, unless it was missed already
    deadline = tonumber(fields.deadline), deadline_missed = fields.deadline_missed,
    keep_logs = true, -- the attempts so far stay readable; the next one is numbered after them
  }
end

-- Which jids of the run `target` names: a jid of the run, or a step's jids; nil when neither.
function RunState.targeted(run_id, jids, target)
  local out = {}
  for _, jid in ipairs(jids) do
    if jid == target or RunState.step_of(run_id, jid) == target then out[jid] = true end
  end
  if next(out) == nil then return nil end
  return out
end

-- Of a job's `needs` (JSON text, or nil), those that exist and have not completed: what it
-- waits for when it is put back.
local function unfinished(needs)
  local open = {}
  for _, need in ipairs(needs and cjson.decode(needs) or {}) do
    local state = Job.state(need)
    if state and state ~= 'complete' then table.insert(open, need) end
  end
  return open
end

-- Put a job canceled with its run back as it was first put (`spec`: Runs.keep_canceled),
-- waiting for what it needs that has not completed; a fan-out template feeds on its producer
-- again.
function RunState.restore_canceled(run_id, jid, spec)
  local open = unfinished(spec.needs)
  RunCounts.join(jid, run_id, 'gone')
  Put.write(reput(jid, spec, open), nil)
  local restored = {}
  if spec.trigger then table.insert(restored, 'trigger'); table.insert(restored, spec.trigger) end
  if spec.needs then table.insert(restored, 'needs'); table.insert(restored, spec.needs) end
  -- Its attempts count on from those before its cancel, whose step logs come back with it.
  if spec.runs then table.insert(restored, 'runs'); table.insert(restored, spec.runs) end
  if spec.deadline_missed then -- the miss happened: told once
    table.insert(restored, 'deadline_missed'); table.insert(restored, spec.deadline_missed)
  end
  Job.restore_logs(jid, run_id)
  if spec.fanout then
    table.insert(restored, 'fanout'); table.insert(restored, spec.fanout)
    local key = Keys.job(cjson.decode(spec.fanout).from)
    local feeds = Job.decode_list(redis.call('hget', key, 'feeds'))
    local listed = false
    for _, fed in ipairs(feeds) do
      if fed == jid then listed = true end
    end
    if not listed then
      table.insert(feeds, jid)
      redis.call('hset', key, 'feeds', cjson.encode(feeds))
    end
  end
  if #restored > 0 then redis.call('hset', Keys.job(jid), unpack(restored)) end
  redis.call('hdel', Keys.run_canceled(run_id), jid)
end

-- What `target` is, for a refusal: its status and allowed actions from the run's read.
function RunState.described_target(run_id, read, target)
  for _, step in ipairs(read.steps) do
    if step.step == target then return 'step ' .. target, step.status, step.actions end
  end
  return 'job ' .. target, RunState.job_view(run_id, read, target)
end

-- The run is canceled while a job canceled with it (or alone) has not been put back.
local function uncancel_when_nothing_kept(run_id)
  if redis.call('exists', Keys.run_canceled(run_id)) == 0 then
    redis.call('hdel', Keys.run(run_id), 'canceled', 'canceled_reason')
  end
end

-- Jobs canceled with their run (or alone), as they were put: jid -> JSON (Runs.keep_canceled).
local function kept_canceled(run_id)
  local kept = {}
  local raw = redis.call('hgetall', Keys.run_canceled(run_id))
  for i = 1, #raw, 2 do kept[raw[i]] = raw[i + 1] end
  return kept
end

api['run.retry'] = function(args)
  local cmd = 'RunRetry'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local target
  if args[2] ~= nil and args[2] ~= '' then target = Arg.jid(cmd, 'target', args[2]) end
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local jids = run_jids(cmd, run_id)
  local only
  if target then
    only = RunState.targeted(run_id, jids, target)
    if not only then Arg.fail(cmd, 'run ' .. run_id .. ' has no step or job ' .. target) end
  end
  local retried, stays = RunState.retry(run_id, jids, only)
  if not retried and stays then
    -- Every job it would retry would only fail again, as it failed: nothing is written.
    local more = #stays > 1 and (' (and ' .. (#stays - 1) .. ' more job(s) so)') or ''
    Err.raise('WRONGSTATE', cmd .. '(): nothing put back: job ' .. stays[1].jid ..
      ' would fail again: ' .. stays[1].why .. more)
  end
  if not retried then
    local read = RunState.read(run_id, 0)
    if target then
      local what, status, allowed = RunState.described_target(run_id, read, target)
      RunState.refuse(cmd, what, status, allowed, 'retry')
    end
    RunState.refuse(cmd, 'run ' .. run_id, read.status, read.actions, 'retry')
  end
  return retried
end

-- `only` and, for each job of it canceled with its run, what it needs that was canceled too
-- (and what that needs, on up): put back as it was first put, a job waits for its needs, and
-- one that no longer exists would hold it back no more (a step after an approval would run
-- unapproved), so it comes back with it.
local function with_canceled_needs(only, kept)
  local todo = {}
  for jid in pairs(only) do
    if kept[jid] then table.insert(todo, jid) end
  end
  while #todo > 0 do
    local needs = cjson.decode(kept[table.remove(todo)]).needs
    for _, need in ipairs(needs and cjson.decode(needs) or {}) do
      if kept[need] and not only[need] then
        only[need] = true
        table.insert(todo, need)
      end
    end
  end
  return only
end

-- run.retry of run `run_id` (its `jids`; `only`: the jids its target names, nil: all): how many
-- jobs it put back, or nil when it has nothing to put back (then nothing is written). A
-- backfill resumes a tick's canceled run with it (commands/backfill.lua).
-- A fan-out step (or item) that failed in `fanout-invalid` and whose producer's output is
-- still refused cannot be put back: it fails again, saying why now, and is not counted. When
-- every job the retry would put back is such a one, nothing is written: nil and them, each
-- {jid, why}, in run order.
function RunState.retry(run_id, jids, only)
  local jobs = {}
  local any = false
  local kept = kept_canceled(run_id)
  if only then only = with_canceled_needs(only, kept) end
  for i, jid in ipairs(jids) do
    jobs[i] = Job.fields(jid, unpack(RETRY_FIELDS))
    local state = jobs[i] and jobs[i].state
    if (not only or only[jid]) and (state == 'failed' or state == 'expired' or
        (not state and kept[jid])) then
      any = true
    end
  end
  if not any then return nil end

  -- What this retry puts back, decided before anything is written: the failed, expired and
  -- canceled jobs it retries, then (jobs come in dependency order) each completed job whose
  -- trigger rule fired on the failure and one of whose needs moves again (it is put back, runs
  -- or waits by itself, or waits for one that moves): it waits for its needs again. A need
  -- that stays failed (a retry of another step) leaves the hooks after it as they ran.
  local back, chosen, moving = {}, false, {}
  for i, jid in ipairs(jids) do
    local state = jobs[i] and jobs[i].state
    if (not only or only[jid]) and (state == 'failed' or state == 'expired' or
        (not jobs[i] and kept[jid])) then
      back[jid], chosen, moving[jid] = true, true, true
    end
  end
  for i, jid in ipairs(chosen and jids or {}) do
    local fields = jobs[i]
    local state = fields and fields.state
    if state and not moving[jid] then
      if RunState.ACTIVE[state] then
        moving[jid] = true
      elseif state == 'depends' then
        -- waiting for dependencies (or, none left, for a sub-flow's child run)
        local waits = redis.call('smembers', Keys.dependencies(jid))
        if #waits == 0 then moving[jid] = true end
        for _, need in ipairs(waits) do
          if moving[need] then moving[jid] = true end
        end
      elseif state == 'complete' and fields.trigger and fields.needs then
        for _, need in ipairs(cjson.decode(fields.needs)) do
          if moving[need] then
            back[jid], moving[jid] = 'rearmed', true
            break
          end
        end
      end
    end
  end

  -- A fan-out refused again stays failed (decided before anything is written).
  local stays, staying, others = {}, {}, false
  for i, jid in ipairs(jids) do
    local fields = jobs[i]
    if back[jid] == true and fields and fields.state == 'failed' then
      local why = fields.fanout and Fanout.template_reason(jid, fields) or
        (not fields.fanout and Fanout.refail_reason(jid, fields))
      if why then
        staying[jid] = why
        stays[#stays + 1] = { jid = jid, why = why }
      else
        others = true
      end
    elseif back[jid] == true then
      others = true
    end
  end
  if not others then return nil, stays end

  -- Written in dependency order: a job put back waits for those of its needs put back before
  -- it (a re-armed need runs again first, a hook waits for the step it follows).
  local retried, reset = 0, {}
  for i, jid in ipairs(jids) do
    local fields = jobs[i]
    if fields and back[jid] == 'rearmed' then
      Put.write(reput(jid, fields, unfinished(fields.needs)), fields)
      reset[jid] = true
    elseif staying[jid] then
      -- Its producer's output is still refused: it fails again, saying why now; not put back.
      if fields.fanout then
        Job.fail(jid, fields, 'flows', Fanout.GROUP, staying[jid])
      else
        Fanout.refail_item(jid, fields, staying[jid])
      end
    elseif fields and back[jid] and fields.fanout and fields.state == 'failed' then
      -- A fan-out whose items were refused is expanded again from its producer's result.
      local from = cjson.decode(fields.fanout).from
      local plan = Fanout.plan(jid, redis.call('hget', Keys.job(from), 'result') or nil, true)
      if plan then
        Fanout.apply(plan)
        retried = retried + 1
      end
    elseif fields and back[jid] then
      local waits = {}
      for _, need in ipairs(fields.needs and cjson.decode(fields.needs) or {}) do
        if reset[need] then table.insert(waits, need) end
      end
      Put.write(reput(jid, fields, waits), fields)
      retried = retried + 1
      reset[jid] = true
    elseif back[jid] then
      RunState.restore_canceled(run_id, jid, cjson.decode(kept[jid]))
      retried = retried + 1
      reset[jid] = true
    end
  end
  if retried == 0 then return 0 end
  -- (the kept jobs' hash goes when its last entry does; one retried alone leaves the others)
  uncancel_when_nothing_kept(run_id)
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
  run_jids(cmd, run_id)
  local read = RunState.read(run_id, 0)
  if not RunState.allows(read.actions, 'cancel') then
    RunState.refuse(cmd, 'run ' .. run_id, read.status, read.actions, 'cancel')
  end
  return Runs.cancel(run_id, '')
end

-- The outcome of a job's attempt, kept in its hash when it is re-run.
function RunState.attempt_record(jid, status)
  local result, failure, updated = unpack(redis.call('hmget', Keys.job(jid), 'result', 'failure',
    'updated'))
  -- The result and failure spliced in as the JSON text they are kept as (checked when they
  -- were written): decoded and encoded again, a result's empty lists would become {}.
  local record = '{"status":' .. JsonText.string(status)
  if tonumber(updated) then record = record .. ',"updated":' .. string.format('%.17g', updated) end
  if result then record = record .. ',"result":' .. result end
  if failure and failure ~= '{}' then record = record .. ',"failure":' .. failure end
  return record .. '}'
end

api['run.rerun'] = function(args)
  local cmd = 'RunRerun'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local step = Arg.id(cmd, 'step', args[2])
  local downstream = false
  if args[3] ~= nil and args[3] ~= '' and args[3] ~= '0' then
    if args[3] ~= '1' then Arg.fail(cmd, 'Arg "downstream" must be 0 or 1: ' .. Arg.shown(args[3])) end
    downstream = true
  end
  local item
  if args[4] ~= nil and args[4] ~= '' then item = Arg.jid(cmd, 'jid', args[4]) end
  if args[5] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local jids = run_jids(cmd, run_id)
  local targets, found = {}, false
  for _, jid in ipairs(jids) do
    if RunState.step_of(run_id, jid) == step then
      found = true
      if not item or item == jid then targets[jid] = true end
    end
  end
  if not found then Arg.fail(cmd, 'run ' .. run_id .. ' has no step ' .. step) end
  if next(targets) == nil then
    Arg.fail(cmd, 'step ' .. step .. ' of run ' .. run_id .. ' has no job ' .. item)
  end
  local read = RunState.read(run_id, 0)
  if read.status == 'running' then
    RunState.refuse(cmd, 'run ' .. run_id, read.status, read.actions, 'rerun')
  end
  -- In run order (dependency order): the targets, and with `downstream` every job needing one;
  -- one of those canceled (kept) is put back as it was first put, as a retry would.
  local kept = kept_canceled(run_id)
  local chosen, fields_of, restored = {}, {}, {}
  for _, jid in ipairs(jids) do
    local fields = Job.fields(jid, 'needs', 'skipped', unpack(RETRY_FIELDS))
    local spec = not fields and kept[jid] and cjson.decode(kept[jid]) or nil
    local needs = (fields and fields.needs) or (spec and spec.needs)
    local pick = targets[jid]
    if not pick and downstream and needs then
      for _, need in ipairs(cjson.decode(needs)) do
        if targets[need] then pick = true end
      end
    end
    if pick then
      local state = fields and fields.state
      if spec and not targets[jid] then
        restored[jid] = spec
      elseif state ~= 'complete' and state ~= 'failed' and state ~= 'expired' then
        local what, status, allowed = RunState.described_target(run_id, read, jid)
        RunState.refuse(cmd, what, status, allowed, 'rerun')
      end
      targets[jid] = true
      table.insert(chosen, jid)
      fields_of[jid] = fields
    end
  end
  for _, jid in ipairs(chosen) do
    if restored[jid] then
      RunState.restore_canceled(run_id, jid, restored[jid])
    else
      RunState.rerun_job(jid, fields_of[jid], targets)
    end
  end
  uncancel_when_nothing_kept(run_id)
  Events.log({ event = 'run_rerun', run = run_id, step = step, jobs = #chosen })
  return #chosen
end

-- Put a finished job back for run.rerun as it was first put, waiting for the `targets` it
-- needs, its attempts counting on and this one's outcome kept as `attempt:<n>`.
function RunState.rerun_job(jid, fields, targets)
  local counted = Job.hmget(jid, unpack(RunState.FIELDS))
  local status = fields.state == 'complete' and (fields.skipped and 'skipped' or 'success')
    or fields.state
  local attempts = RunState.attempts(counted, status)
  local open = {}
  for _, need in ipairs(fields.needs and cjson.decode(fields.needs) or {}) do
    if targets[need] then table.insert(open, need) end
  end
  local record = RunState.attempt_record(jid, status)
  -- A sub-flow step re-runs its child run: the put clears `child`, so the flag tells its next
  -- subflow.wait to put the child's jobs back too (commands/subflow.lua). A flag no
  -- subflow.wait took yet (the step failed before it: its `with` gave the child other params)
  -- stays for the next one.
  local child = redis.call('hget', Keys.job(jid), 'child') or
    redis.call('hget', Keys.job(jid), 'rerun_child')
  local p = reput(jid, fields, open)
  p.keep_logs = true
  Put.write(p, fields)
  redis.call('hset', Keys.job(jid), 'attempt:' .. attempts, record)
  if child then redis.call('hset', Keys.job(jid), 'rerun_child', child) end
  Job.history(jid, 'rerun', { attempt = attempts + 1 })
end

-- Re-run every job of the finished run `run_id` (a sub-flow step's child run, when that step
-- is re-run): each ended job is put back as it was first put, waiting for its needs; each job
-- canceled with it is put back as run.retry would; jobs held back by a failed need wait for it
-- as they did. Returns how many jobs were put back.
function RunState.rerun_run(run_id)
  local jids = RunState.jids(run_id)
  local kept = kept_canceled(run_id)
  local targets, count = {}, 0
  for _, jid in ipairs(jids) do targets[jid] = true end
  for _, jid in ipairs(jids) do
    local fields = Job.fields(jid, 'needs', 'skipped', unpack(RETRY_FIELDS))
    local state = fields and fields.state
    if state == 'complete' or state == 'failed' or state == 'expired' then
      RunState.rerun_job(jid, fields, targets)
      count = count + 1
    elseif not fields and kept[jid] then
      RunState.restore_canceled(run_id, jid, cjson.decode(kept[jid]))
      count = count + 1
    end
  end
  uncancel_when_nothing_kept(run_id)
  Events.log({ event = 'run_rerun', run = run_id, step = '', jobs = count })
  return count
end
