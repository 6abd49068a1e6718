-- runs: checking and writing a whole flow run, canceling one, and saying what a run is doing.
-- Shared by flow.submit (commands/flow.lua) and schedule.fire / schedule.trigger
-- (commands/schedule_fire.lua), which must submit a run in the same call as their own writes.
-- A new run's counts (include/run_counts.lua) are written once from what its puts wrote
-- (RunCounts.start), not settled job by job.
--
-- A run is the hash `run:<id>` (id, submitted, jobs = how many, plus the run object's fields),
-- its jids in submission order (`run:<id>-jobs`), and its id in `runs` and `runs:<flow>` scored
-- by submit time.
--
--   Runs.parse(cmd, run_id, run_text, jobs_text) -> a submission, checked but for its jobs
--   Runs.check(cmd, submission)                  -> checks every job exactly as `put` would;
--                                                   raises INVALID / TOOLARGE, writes nothing
--   Runs.write(submission)                       -> writes the run and every job
--   Runs.submit(cmd, run_id, run_text, jobs_text) -> 'submitted', or 'exists' (nothing written)
--   Runs.at_limit(submission, canceling)         -> the flow's active runs when its
--                                                   max_active_runs leaves no room, else nil
--   Runs.hold_limit(cmd, submission)             -> raises WRONGSTATE at that limit
--
-- The jobs are a JSON array of job objects, or an object {shared, jobs}: `shared` holds the fields
-- every job has alike (queue, klass, priority, retries, tags, trigger, ttl, ttr, throttle,
-- concurrency_key with concurrency_limit, notify, deadline), checked once; a job object that
-- leaves one out takes it from there (concurrency_key and concurrency_limit as a pair: a job
-- giving either takes neither).
-- Each job is {jid, queue, klass, data (JSON text), priority, tags, retries, depends, delay} and
-- optionally trigger, ttl, ttr, concurrency_key, concurrency_limit, throttle (put's options)
-- and wait (a job no worker runs, completed by a signal: include/waits.lua) or empty (true: a
-- foreach or matrix step with no items, completed when nothing holds it back: triggers.lua);
-- jobs come in dependency order (a job's depends name earlier jobs of the run or existing jobs).
-- The run object must have a string `flow`; its other fields are kept as given (strings, or
-- JSON text for tables; a value holding a number cjson would not write again exactly, past 14
-- significant digits, as the text the caller gave: JsonText.exact); a null one is not kept. A
-- run id may not end in '-jobs' (the key layout uses that suffix).
-- A job with `fanout` ({from, output}: include/fanout.lua) is a template, expanded into one job
-- per item of its producer's output when the producer completes; `from` is an earlier job of
-- the run that it depends on.
-- @include args
-- @include json_text
-- @include putting
-- @include fanout
-- @include notify
-- @include deadlines
-- @include run_state
local Runs = {}

Runs.MAX_JOBS = 100000
Runs.MAX_BYTES = 67108864 -- 64 MiB of job specs, and of run record (its graph grows with the steps)

-- States a canceled run's jobs are removed from (complete and failed jobs stay as a record).
local UNFINISHED = { waiting = true, scheduled = true, running = true, depends = true,
  buried = true, awaiting = true }

-- A run id: an id that does not end in '-jobs' (run `x`'s job list is the key `run:x-jobs`).
function Runs.id(cmd, value, name)
  name = name or 'run_id'
  Arg.name(cmd, name, value)
  if string.sub(value, -5) == '-jobs' then
    Arg.fail(cmd, 'Arg "' .. name .. '" may not end in "-jobs" (reserved by the key layout): ' .. value)
  end
  return value
end

function Runs.exists(run_id)
  return redis.call('exists', Keys.run(run_id)) == 1
end

function Runs.parse(cmd, run_id, run_text, jobs_text)
  local submission = { id = Runs.id(cmd, run_id) }
  local _, run = Arg.json(cmd, 'run', run_text, 'object', Runs.MAX_BYTES, Arg.MAX_NESTING)
  Deadlines.parse(cmd, run.deadline)
  if type(run.flow) ~= 'string' or run.flow == '' then
    Arg.fail(cmd, 'run.flow must be a non-empty string')
  end
  Arg.name(cmd, 'run.flow', run.flow)
  local specs, shared = Runs.job_list(cmd, jobs_text)
  if #specs == 0 then Arg.fail(cmd, 'a run needs at least one job') end
  if #specs > Runs.MAX_JOBS then
    Err.raise('TOOLARGE', cmd .. '(): ' .. #specs .. ' jobs, more than the limit of ' .. Runs.MAX_JOBS)
  end
  submission.run = run
  submission.run_text = run_text
  submission.specs = specs
  submission.shared = shared
  return submission
end

-- The run's own fields a job object may share besides put's (Put.parse_shared_spec).
Runs.SHARED_RUN_FIELDS = { notify = true, deadline = true }

-- The job objects of the `jobs` argument, and the object of the fields they share (or nil): a
-- JSON array of job objects, or an object {shared, jobs}, whose `shared` fields every job
-- object that leaves one out takes (sent and checked once for the whole run).
function Runs.job_list(cmd, jobs_text)
  local _, decoded = Arg.json(cmd, 'jobs', jobs_text, 'any', Runs.MAX_BYTES)
  local first = string.match(jobs_text, '^%s*(.)')
  if type(decoded) ~= 'table' or (first ~= '[' and first ~= '{') then
    Arg.fail(cmd, 'Arg "jobs" is not a JSON array or object: ' .. Arg.shown(jobs_text))
  end
  -- '{}': an empty list, as cjson writes one.
  if first == '[' or next(decoded) == nil then return decoded, nil end
  for name in pairs(decoded) do
    if name ~= 'jobs' and name ~= 'shared' then
      Arg.fail(cmd, 'Arg "jobs": unknown field "' .. Arg.shown(name) .. '" (known: jobs, shared)')
    end
  end
  local specs, shared = decoded.jobs, decoded.shared
  if not Arg.is_list(specs) then Arg.fail(cmd, 'Arg "jobs": its "jobs" is not a JSON array') end
  if shared == nil or shared == cjson.null then return specs, nil end
  if type(shared) ~= 'table' or (next(shared) ~= nil and Arg.is_list(shared)) then
    Arg.fail(cmd, 'Arg "jobs": its "shared" is not a JSON object')
  end
  return specs, shared
end

-- The fields the jobs share, checked once (Put.parse_shared_spec; the run's own: notify,
-- deadline), or nil.
function Runs.parse_shared(cmd, shared)
  if not shared then return nil end
  local named = cmd .. ' shared'
  local p = Put.parse_shared_spec(named, shared, Runs.SHARED_RUN_FIELDS)
  p.notify = Notify.parse(named, shared.notify)
  p.deadline = Deadlines.parse(named, shared.deadline)
  return p
end

function Runs.check(cmd, submission)
  local specs, puts = submission.specs, {}
  local shared = Runs.parse_shared(cmd, submission.shared)
  -- The jids parsed so far: a dependency on an earlier job of the run needs no second check.
  local parsed = {}
  -- Whether every job is new to the run and depends on earlier jobs of it alone (the common
  -- run): then, unless some jid exists already, no job needs the look-ups below.
  local all_earlier = true
  Arg.each(cmd, 'jobs', #specs, function(named, i)
    local spec = specs[i]
    if type(spec) ~= 'table' then Arg.fail(named, 'the job is not an object') end
    local p = Put.parse_spec(named, spec, 'flows', parsed, shared)
    if spec.fanout ~= nil and spec.fanout ~= cjson.null then
      if p.empty then Arg.fail(named, 'Arg "empty": a fan-out template\'s items are not known yet') end
      p.fanout = Fanout.parse_spec(named, spec.fanout, p, parsed)
    end
    if shared and spec.notify == nil then
      p.notify = shared.notify
    else
      p.notify = Notify.parse(named, spec.notify)
    end
    if shared and spec.deadline == nil then
      p.deadline = shared.deadline
    else
      p.deadline = Deadlines.parse(named, spec.deadline)
    end
    puts[i] = p
    local jid, depends = p.jid, p.depends
    if all_earlier then
      if parsed[jid] then all_earlier = false end
      for k = 1, #depends do
        if not parsed[depends[k]] then all_earlier = false end
      end
    end
    parsed[jid] = true
  end)
  submission.puts = puts
  submission.all_earlier = all_earlier
  -- A new run's jids are all new: then no job needs a look-up of its own.
  local some_exist = Put.any_exist(puts)
  if all_earlier and not some_exist then return submission end
  local seen = {}
  for _, p in ipairs(puts) do
    if seen[p.jid] then Arg.fail(cmd, 'job ' .. p.jid .. ' appears twice in the run') end
    if some_exist and Job.exists(p.jid) then Arg.fail(cmd, 'job ' .. p.jid .. ' already exists') end
    for _, dependency in ipairs(p.depends) do
      if not seen[dependency] and not Job.exists(dependency) then
        Arg.fail(cmd, 'job ' .. p.jid .. ' depends on ' .. dependency ..
          ', which is neither earlier in the run nor an existing job')
      end
    end
    seen[p.jid] = true
  end
  return submission
end

function Runs.write(submission)
  local run_id, run, puts = submission.id, submission.run, submission.puts
  local key = Keys.run(run_id)
  -- One HSET: each write of a script is its own entry in the append-only file and the replicas'
  -- stream.
  local fields = { 'id', run_id, 'submitted', Engine.now, 'jobs', #puts }
  local given -- the members' text, read only for a value that would not be written exactly
  for field, value in pairs(run) do
    if value == cjson.null then
      value = nil -- not kept, as a field left out
    else
      local text
      if not JsonText.exact(value) then
        given = given or JsonText.members(submission.run_text)
        text = given[field] -- (none for a field the engine added: written as the others)
      end
      if text then
        value = text
      elseif type(value) == 'table' then
        value = cjson.encode(value)
      end
    end
    if value ~= nil then
      fields[#fields + 1] = field
      fields[#fields + 1] = tostring(value)
    end
  end
  Engine.call_many('hset', key, fields)
  local jids = {}
  for i = 1, #puts do jids[i] = puts[i].jid end
  Engine.call_many('rpush', Keys.run_jobs(run_id), jids)
  redis.call('zadd', Keys.runs(), Engine.now, run_id)
  redis.call('zadd', Keys.flow_runs(run.flow), Engine.now, run_id)
  -- One batch: a job written earlier in the run is a pending dependency (nothing of the run ran
  -- yet), and the puts are counted once per queue. The run's event tells of its jobs.
  local batch = Put.batch(true)
  -- The run's counts written once, from what each put wrote (RunCounts.start), not settled job
  -- by job: a job whose class its put does not know (a wait's) joins as before.
  local at_once = RunCounts.fresh(run_id, jids)
  local classes = {}
  for i = 1, #puts do
    local p = puts[i]
    p.count_in = run_id
    Put.write(p, nil, batch)
    classes[i] = at_once and p.counted
    if not classes[i] then RunCounts.join(p.jid, run_id, nil, p.counted) end
  end
  if at_once then RunCounts.start(run_id, jids, classes) end
  -- batch.written: the run's jids (Put.write). None is outside when each job depends on
  -- earlier jobs of the run alone (Runs.check).
  local ours = batch.written
  for i = 1, submission.all_earlier and 0 or #puts do
    for _, dependency in ipairs(puts[i].depends) do
      if not ours[dependency] then RunCounts.outside(run_id) end
    end
  end
  Deadlines.write(run_id, run)
  Put.finish(batch)
  for i = 1, #puts do
    local p = puts[i]
    if p.fanout then Fanout.write_spec(p, run_id) end
  end
  Events.log({ event = 'run_submitted', run = run_id, flow = run.flow, jobs = #puts })
end

function Runs.submit(cmd, run_id, run_text, jobs_text)
  local submission = Runs.parse(cmd, run_id, run_text, jobs_text)
  if Runs.exists(submission.id) then return 'exists' end
  Runs.check(cmd, submission)
  Runs.hold_limit(cmd, submission)
  Runs.write(submission)
  return 'submitted'
end

-- The newest runs of a flow looked at for its active runs (as a backfill looks).
Runs.LIMIT_LOOK = 1000

-- The flow's concurrency.max_active_runs (the run object's `max_active_runs`): the ids of its
-- active runs, newest first, when they leave no room for one more; nil when there is room or
-- no limit. `canceling`: a run canceled in the same call, not counted.
function Runs.at_limit(submission, canceling)
  local limit = tonumber(submission.run.max_active_runs)
  if not limit or limit <= 0 then return nil end
  local active = {}
  for _, run_id in ipairs(redis.call('zrevrange', Keys.flow_runs(submission.run.flow), 0,
      Runs.LIMIT_LOOK - 1)) do
    if run_id ~= canceling and Runs.active(run_id) then
      table.insert(active, run_id)
      if #active >= limit then return active, limit end
    end
  end
  return nil
end

-- A run started by hand (flow.submit, schedule.trigger) is refused, WRONGSTATE, while its
-- flow's max_active_runs is reached; the message names the limit and the active runs.
function Runs.hold_limit(cmd, submission)
  local active, limit = Runs.at_limit(submission)
  if not active then return end
  local shown = {}
  for i = 1, math.min(#active, 5) do shown[i] = active[i] end
  local more = #active > 5 and (' and ' .. (#active - 5) .. ' more') or ''
  Err.raise('WRONGSTATE', cmd .. '(): flow ' .. submission.run.flow ..
    ' is at its concurrency.max_active_runs (' .. limit .. '), active: ' ..
    table.concat(shown, ', ') .. more .. '; run ' .. submission.id ..
    ' not submitted: start it again when one of them ends')
end

-- What a run is doing: the one decider's word (include/run_state.lua): running, succeeded,
-- failed, blocked, canceled, expired; 'missing' when there is no such run. Stops at the first
-- job that can progress, so checking an active run is cheap.
function Runs.status(run_id)
  return RunState.status(run_id)
end

-- Whether a job in state `depends` is a sub-flow step waiting for its child run
-- (commands/subflow.lua): it makes progress by itself, as the child does.
function Runs.waits_for_child(jid)
  return redis.call('hexists', Keys.job(jid), 'child') == 1
end

-- A sub-flow step's job, canceled with its run (`fields` as Job.load_for_delete reads them):
-- when it waits for its child run, that run is canceled too (and its own children). Returns
-- how many jobs of child runs were canceled so.
function Runs.cancel_child(jid, fields)
  if fields.state ~= 'depends' then return 0 end
  local child = redis.call('hget', Keys.job(jid), 'child')
  if child and Runs.exists(child) then
    return Runs.cancel(child, 'its parent run was canceled', true)
  end
  return 0
end

-- A canceled child run: its parent step, when it waits for it, waits no more (it reports the
-- cancel when a worker runs it again).
local function release_parent(run_id)
  local parent = redis.call('hget', Keys.run(run_id), 'parent_jid')
  if not parent then return end
  local fields = Job.fields(parent, 'child')
  if fields and fields.state == 'depends' and fields.child == run_id then
    Job.drop_dependencies(parent)
    Queue.release_dependent(parent)
  end
end
Runs.release_parent = release_parent

Notify.status = Runs.status

function Runs.active(run_id)
  return RunState.running(run_id)
end

-- What a canceled job of a run keeps for run.retry to put it back as it was first put
-- (`run-canceled:<run id>`, jid -> JSON of these fields), and `runs`: its attempts so far,
-- which the put back counts on from.
Runs.KEPT = { 'queue', 'klass', 'data', 'priority', 'retries', 'tags', 'trigger', 'needs', 'ttl',
  'ttr', 'ckey', 'climit', 'throttle', 'wait', 'fanout', 'runs', 'deadline', 'deadline_missed',
  'empty' }

function Runs.keep_canceled(run_id, jid)
  local values = Job.hmget(jid, unpack(Runs.KEPT))
  local kept = {}
  for i, name in ipairs(Runs.KEPT) do
    if values[i] then kept[name] = values[i] end
  end
  redis.call('hset', Keys.run_canceled(run_id), jid, cjson.encode(kept))
end

-- A job of a run removed on its own (cancel, delete) before it completed: its run can no longer
-- end as submitted, so it is marked canceled as Runs.cancel marks it (its other jobs go on;
-- once none can progress the run is `canceled`, and run.retry puts this job back as it was
-- first put), the job's step logs stay with the run, and a sub-flow step's child run is
-- canceled too. A completed job removed so is history gone early, as retention removes it.
-- `fields`: Job.load_for_delete's. Call it before Job.delete.
function Runs.drop_job(jid, fields, how)
  if fields.state == 'complete' then return end
  local run_id = RunCounts.run_in(redis.call('hget', Keys.job(jid), 'counted'))
  if not run_id or redis.call('exists', Keys.run(run_id)) == 0 then return end
  Runs.keep_canceled(run_id, jid)
  Runs.cancel_child(jid, fields)
  Job.keep_logs(jid, run_id)
  if redis.call('hexists', Keys.run(run_id), 'canceled') == 0 then -- the first cancel stays
    redis.call('hset', Keys.run(run_id), 'canceled', Engine.now,
      'canceled_reason', 'job ' .. jid .. ' was ' .. how)
  end
end

-- Cancel every unfinished job of a run at once (its complete and failed jobs stay), telling
-- the workers of running ones, and mark the run canceled. A run's jobs depend only on each
-- other, so no job outside it is left waiting but a sub-flow step waiting for this run (released
-- unless `by_parent`: its own run is being canceled). Child runs its steps wait for are
-- canceled with it. Returns how many jobs were canceled: the run's own and those of the child
-- runs canceled with it (theirs too, all the way down), each job once.
function Runs.cancel(run_id, reason, by_parent)
  local victims = {}
  RunState.each_jid(run_id, function(jid)
    local fields = Job.load_for_delete(jid)
    if fields and UNFINISHED[fields.state] then table.insert(victims, { jid, fields }) end
    return false
  end)
  local children = 0
  for _, victim in ipairs(victims) do
    local jid, fields = victim[1], victim[2]
    Runs.keep_canceled(run_id, jid)
    if fields.state == 'running' then Events.to_worker(fields.worker, 'canceled', jid) end
    children = children + Runs.cancel_child(jid, fields)
    Events.tracked('canceled', jid)
    Events.log({ jid = jid, event = 'canceled', worker = fields.worker or '',
      queue = fields.queue or '' })
    Job.keep_logs(jid, run_id) -- what it wrote stays readable with the run
    Job.delete(jid, fields)
  end
  redis.call('hset', Keys.run(run_id), 'canceled', Engine.now, 'canceled_reason', reason or '')
  if not by_parent then release_parent(run_id) end
  -- (each child run's own event counts its jobs)
  Events.log({ event = 'run_canceled', run = run_id, jobs = #victims, reason = reason or '' })
  return #victims + children
end
