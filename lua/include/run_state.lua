-- run_state: the one decider of what a flow run, each of its steps and each of its jobs is,
-- and which actions each allows now. Every reader of a run's status goes through here: the run
-- read (commands/run_read.lua), the run listing (runs.statuses), sub-flow parents, schedules'
-- overlap, backfills' concurrency, metrics; and every run action (run.retry, run.cancel,
-- run.rerun) checks the actions it decides before it writes anything.
--
-- The vocabulary and each word's rule are the tables of docs/pages/statuses.md; flows/runs/statuses.py
-- holds the same words for the Python surfaces (tests/lua/test_run_state.py compares them).
--
--   RunState.job_status(fields, dep_status)     -> the job's status word (fields: RunState.FIELDS)
--   RunState.status(run_id)                     -> the run's status word, 'missing' when no run;
--                                                  from its counts (include/run_counts.lua), or
--                                                  a scan of a run that has none
--   RunState.read(run_id, limit, offsets)       -> the whole run (commands/run_read.lua), or nil;
--                                                  from its counts and each step's page of
--                                                  jobs, or a scan when the counts cannot tell
--   RunState.refuse(cmd, what, status, allowed, action) raises WRONGSTATE naming both
-- @include args
-- @include job
-- @include run_counts
-- @include waits
local RunState = {}

RunState.RUN_STATUSES = { 'running', 'succeeded', 'failed', 'blocked', 'canceled', 'expired' }
-- A step says the first of these that one of its jobs says; 'cached' or 'skipped' only when all
-- of its jobs were, 'success' otherwise.
RunState.STEP_STATUSES = { 'failed', 'expired', 'running', 'awaiting', 'waiting', 'buried',
  'upstream_failed', 'canceled', 'gone', 'cached', 'skipped', 'success' }
RunState.ACTIONS = { 'retry', 'rerun', 'cancel', 'signal', 'approve', 'kick' }

-- The hash fields the decider reads of each job, by position.
RunState.FIELDS = { 'state', 'skipped', 'child', 'popped', 'updated', 'retries', 'remaining',
  'lost', 'runs', 'wait_since', 'cached', 'deadline_missed' }

-- Engine states in which a job can make progress by itself.
RunState.ACTIVE = { waiting = true, scheduled = true, running = true, awaiting = true }
RunState.SIMPLE = { failed = 'failed', expired = 'expired', running = 'running', waiting = 'waiting',
  scheduled = 'waiting', buried = 'buried', awaiting = 'awaiting' }
-- Statuses of a job that still makes progress (its run is running while one has one).
RunState.PROGRESSING = { running = true, waiting = true, awaiting = true }
-- Statuses of a job that ended (a finished run's steps re-run from these).
RunState.ENDED = { success = true, cached = true, skipped = true, failed = true, expired = true }

-- The status of one job; `dep_status(jid)` gives a dependency's status (a job of the run read
-- before it, or looked up).
function RunState.job_status(f, dep_status, jid)
  local state = f[1]
  if state == 'complete' then
    -- `cached`: the step cache completed it with an earlier run's result (commands/cache.lua)
    return f[2] and 'skipped' or (f[11] and 'cached' or 'success')
  end
  if state == 'depends' then
    if f[3] then return 'running' end -- a sub-flow step waiting for its child run
    for _, dependency in ipairs(redis.call('smembers', Keys.dependencies(jid))) do
      if not RunState.PROGRESSING[dep_status(dependency)] then return 'upstream_failed' end
    end
    return 'waiting'
  end
  return RunState.SIMPLE[state] or state
end

-- How often the job ran: its `runs` (every start since it was put counts, commands/pop.lua;
-- a resumed or re-run job counts on). A skipped job never ran its step.
function RunState.attempts(f, status)
  if status == 'skipped' then return 0 end
  return tonumber(f[9]) or 0
end

-- A time as replies carry it (JSON numbers keep 14 digits), so durations add up as shown.
function RunState.time(value)
  value = tonumber(value)
  if not value then return nil end
  return tonumber(string.format('%.14g', value))
end

-- When a job first started since its latest put (its first pop, or when a wait began to
-- await its signal), from its history; nil when it has not.
function RunState.first_start(jid)
  local entries = redis.call('lrange', Keys.history(jid), 0, -1)
  local first
  for i = #entries, 1, -1 do
    local ok, entry = pcall(cjson.decode, entries[i])
    if ok and type(entry) == 'table' then
      if entry.what == 'put' then break end
      if entry.what == 'popped' or entry.what == 'awaiting' then first = tonumber(entry.when) end
    end
  end
  return first
end

-- What a job's status needs of its hash, at the positions of RunState.FIELDS (state, skipped,
-- child, cached).
function RunState.brief(jid)
  local f = Job.hmget(jid, 'state', 'skipped', 'child', 'cached')
  return { f[1], f[2], f[3], [11] = f[4] }
end

-- A dependency outside the run (or not yet read): its status from its own state.
function RunState.lone_status(jid)
  local f = RunState.brief(jid)
  if not f[1] then return 'gone' end
  if f[1] == 'depends' then return f[3] and 'running' or 'waiting' end
  return RunState.job_status(f, nil, jid)
end

-- One job's status on its own (its dependencies' from their own states); `canceled`: its run
-- was canceled (a job that no longer exists was canceled with it).
function RunState.status_of_job(jid, canceled)
  local f = RunState.brief(jid)
  if not f[1] then return canceled and 'canceled' or 'gone' end
  return RunState.job_status(f, RunState.lone_status, jid)
end

-- The run's status from its statuses seen (`seen[word] = true`) and whether it was canceled.
function RunState.run_status(seen, canceled)
  if seen.running or seen.waiting or seen.awaiting then return 'running' end
  if canceled then return 'canceled' end
  if seen.failed or seen.expired then return 'failed' end
  if seen.buried or seen.upstream_failed then return 'blocked' end
  if not (seen.success or seen.cached or seen.skipped) then return 'expired' end
  return 'succeeded'
end

-- The jids of a run's job list, in order. An entry an outside writer left that is no jid is no
-- job of the run (Arg.jids_in): never read as one (its name may be another key's, a history's),
-- and the doctor removes it.
function RunState.jids(run_id)
  return Arg.jids_in(redis.call('lrange', Keys.run_jobs(run_id), 0, -1))
end

-- Each jid of a run (as RunState.jids) in pages of 1,000; `visit(jid)` returns true to stop.
function RunState.each_jid(run_id, visit)
  local key, start, page = Keys.run_jobs(run_id), 0, 1000
  repeat
    local jids = redis.call('lrange', key, start, start + page - 1)
    for _, jid in ipairs(Arg.jids_in(jids)) do
      if visit(jid) then return end
    end
    start = start + page
  until #jids < page
end

-- The run's counts per class ({class -> n}), nil when it has none (submitted before counts),
-- or a job of it waits for one outside it (then only a scan tells whether it can progress), or
-- they are not kept (RunCounts.unkept).
function RunState.counted(run_id)
  RunCounts.settle() -- a state changed earlier in this call counts already
  local key = Keys.run_counts(run_id)
  local values = redis.call('hmget', key, '#', '!outside', '!unkept', unpack(RunState.CLASSES))
  if not values[1] or values[2] or values[3] then return nil end
  local counts = {}
  for i, class in ipairs(RunState.CLASSES) do counts[class] = tonumber(values[i + 3]) end
  return counts
end

-- The classes RunCounts counts (include/run_counts.lua).
RunState.CLASSES = RunCounts.CLASSES

-- Whether a run of these counts can still progress: a job of it runs, waits or awaits.
function RunState.going(counts)
  return (counts.running or 0) + (counts.waiting or 0) + (counts.awaiting or 0) > 0
end

-- What a class counts as, as a status word: a job waiting for its dependencies is waiting while
-- its run progresses and upstream_failed once nothing of it can (each of its dependencies has
-- then ended without success, or waits for one that has); a deleted job was canceled with its
-- run, or is gone.
function RunState.word_of(class, going, canceled)
  if class == 'pending' then return going and 'waiting' or 'upstream_failed' end
  if class == 'gone' then return canceled and 'canceled' or 'gone' end
  return class
end

function RunState.status(run_id)
  if not run_id or run_id == '' then return 'missing' end
  local canceled = redis.call('hget', Keys.run(run_id), 'canceled')
  if not canceled and redis.call('exists', Keys.run(run_id)) == 0 then return 'missing' end
  local counts = RunState.counted(run_id)
  if counts then
    local going = RunState.going(counts)
    if going then return 'running' end
    local seen = {}
    for class, n in pairs(counts) do
      if n > 0 then seen[RunState.word_of(class, going, canceled)] = true end
    end
    return RunState.run_status(seen, canceled)
  end
  local seen, statuses, active = {}, {}, false
  local function dep_status(jid) return statuses[jid] or RunState.lone_status(jid) end
  RunState.each_jid(run_id, function(jid)
    local f = RunState.brief(jid)
    if f[1] and (RunState.ACTIVE[f[1]] or (f[1] == 'depends' and f[3])) then
      active = true
      return true
    end
    local status = f[1] and RunState.job_status(f, dep_status, jid) or (canceled and 'canceled' or 'gone')
    statuses[jid] = status
    seen[status] = true
    return false
  end)
  if active then return 'running' end
  return RunState.run_status(seen, canceled)
end

-- Whether RunState.status would say 'running', deciding no more than that: most runs asked
-- (a schedule's last run at every due tick, a flow's newest runs under max_active_runs) ended,
-- and their kept counts say so in one read of three classes, without the run's `canceled` (a
-- canceled run with a job going is running all the same) or its other classes. Only a run
-- whose counts say a job goes is looked up (a run deleted under its counts is missing), and
-- one whose counts cannot tell takes the whole decision.
function RunState.running(run_id)
  if not run_id or run_id == '' then return false end
  RunCounts.settle() -- a state changed earlier in this call counts already
  local v = redis.call('hmget', Keys.run_counts(run_id), '#', '!outside', '!unkept', 'running',
    'waiting', 'awaiting')
  if not v[1] or v[2] or v[3] then return RunState.status(run_id) == 'running' end
  if (tonumber(v[4]) or 0) + (tonumber(v[5]) or 0) + (tonumber(v[6]) or 0) == 0 then
    return false
  end
  return redis.call('exists', Keys.run(run_id)) == 1
end

RunState.step_of = RunCounts.step_of

-- What an approval's data holds (flows.runs.signals.approval: the note, '' without one, and who
-- approved): a wait whose declared outputs are among these can be approved.
local APPROVAL_FIELDS = { note = true, approved_by = true }

-- Whether awaiting job `jid` can be approved: an approval's data holds every output its wait
-- declares (wait.signal refuses data that lacks one).
function RunState.approvable(jid)
  local outputs = Waits.spec(redis.call('hget', Keys.job(jid), 'wait')).outputs
  if type(outputs) ~= 'table' then return true end
  for _, name in ipairs(outputs) do
    if not APPROVAL_FIELDS[name] then return false end
  end
  return true
end

-- Statuses of a job that has not ended (a cancel stops these).
RunState.UNFINISHED = { running = true, waiting = true, awaiting = true, buried = true,
  upstream_failed = true }

-- Whether job `jid`, which has not ended, can be canceled alone (commands/cancel.lua): no job
-- needs it (that one would wait for it forever).
function RunState.cancelable(jid)
  return jid ~= nil and redis.call('scard', Keys.dependents(jid)) == 0
end

-- The actions a job allows now, given its status, whether its run has finished, whether it
-- was kept when canceled, and (to tell whether it can be approved or canceled) its jid.
function RunState.job_actions(status, finished, kept, jid)
  local out = {}
  if status == 'failed' or status == 'expired' then
    return finished and { 'retry', 'rerun' } or { 'retry' }
  end
  if status == 'canceled' and kept then return { 'retry' } end
  if (status == 'success' or status == 'cached' or status == 'skipped') and finished then
    return { 'rerun' }
  end
  if RunState.UNFINISHED[status] and RunState.cancelable(jid) then table.insert(out, 'cancel') end
  if status == 'awaiting' then
    table.insert(out, 'signal')
    if not (jid and not RunState.approvable(jid)) then table.insert(out, 'approve') end
  end
  if status == 'buried' then table.insert(out, 'kick') end
  return out
end

-- One job of a run as the decider sees it: its status and the actions it allows now (`read`:
-- the run's RunState.read, which says whether the run has finished and was canceled).
function RunState.job_view(run_id, read, jid)
  local status = RunState.status_of_job(jid, read.record.canceled)
  local kept = status == 'canceled' and redis.call('hexists', Keys.run_canceled(run_id), jid) == 1
  return status, RunState.job_actions(status, read.status ~= 'running', kept, jid)
end

-- The actions a step allows: those of its jobs, once (signal and approve only for a step of one
-- job: its signal names the step); rerun only when every job of it ended. A step with no items
-- (RunState.itemless) is decided so too, from its one job, before its read leaves that out.
function RunState.step_actions(run_id, step, finished)
  local allowed, out = {}, {}
  local rerun = finished and step.total > 0
  for word, n in pairs(step.counts) do
    if not RunState.ENDED[word] and n > 0 then rerun = false end
  end
  if (step.counts.failed or 0) + (step.counts.expired or 0) > 0 then allowed.retry = true end
  if (step.counts.canceled or 0) > 0 and step.kept then allowed.retry = true end
  if rerun then allowed.rerun = true end
  if step.total == 1 and step.status == 'awaiting' then
    local job = step.jobs[1]
    allowed.signal = true
    allowed.approve = RunState.approvable(job and job.jid or (run_id .. ':' .. step.step))
  end
  if (step.counts.buried or 0) > 0 then allowed.kick = true end
  for _, action in ipairs(RunState.ACTIONS) do
    if allowed[action] then table.insert(out, action) end
  end
  return out
end

function RunState.run_actions(status, counts, kept)
  local out = {}
  if (counts.failed or 0) + (counts.expired or 0) > 0 or ((counts.canceled or 0) > 0 and kept) then
    table.insert(out, 'retry')
  end
  if status ~= 'running' then table.insert(out, 'rerun') end
  local unfinished = 0
  for _, word in ipairs({ 'running', 'waiting', 'awaiting', 'buried', 'upstream_failed' }) do
    unfinished = unfinished + (counts[word] or 0)
  end
  if unfinished > 0 then table.insert(out, 'cancel') end
  return out
end

function RunState.step_status(counts, total)
  for i = 1, #RunState.STEP_STATUSES - 3 do
    local word = RunState.STEP_STATUSES[i]
    if (counts[word] or 0) > 0 then return word end
  end
  if total > 0 and (counts.cached or 0) == total then return 'cached' end
  if total > 0 and (counts.skipped or 0) == total then return 'skipped' end
  return 'success'
end

function RunState.earliest(a, b)
  if not a then return b end
  if not b then return a end
  return math.min(a, b)
end

function RunState.latest(a, b)
  if not a then return b end
  if not b then return a end
  return math.max(a, b)
end

-- A run's record as stored (every field text), `submitted` and `jobs` as numbers.
function RunState.record(run_id)
  local raw = redis.call('hgetall', Keys.run(run_id))
  if #raw == 0 then return nil end
  local record = {}
  for i = 1, #raw, 2 do record[raw[i]] = raw[i + 1] end
  record.submitted = tonumber(record.submitted)
  record.jobs = tonumber(record.jobs)
  return record
end

-- A JSON value stored as text, RunState.decoded (nil when it is not valid JSON).
function RunState.decoded(text)
  if not text or text == '' then return nil end
  local ok, value = pcall(cjson.decode, text)
  if ok then return value end
  return nil
end

-- Each step of the run from a scan of its jobs (one HMGET each): {step, counts, total, attempts,
-- started, updated, open, child, offset, jobs (the page)} in the run's order, the statuses seen
-- and the run's counts per status.
function RunState.scanned_steps(run_id, canceled, limit, offsets)
  local steps, order, statuses, seen = {}, {}, {}, {}
  local counts = {}
  local function dep_status(jid) return statuses[jid] or RunState.lone_status(jid) end
  RunState.each_jid(run_id, function(jid)
    local f = Job.hmget(jid, unpack(RunState.FIELDS))
    local status
    if f[1] then status = RunState.job_status(f, dep_status, jid)
    else status = canceled and 'canceled' or 'gone' end
    statuses[jid] = status
    seen[status] = true
    counts[status] = (counts[status] or 0) + 1
    local name = RunState.step_of(run_id, jid)
    local step = steps[name]
    if not step then
      step = { step = name, counts = {}, total = 0, attempts = 0, jobs = {}, offset = 0 }
      step.offset = (offsets and tonumber(offsets[name])) or 0
      steps[name] = step
      table.insert(order, step)
    end
    step.total = step.total + 1
    step.counts[status] = (step.counts[status] or 0) + 1
    local attempts = f[1] and RunState.attempts(f, status) or 0
    -- A job that started and then skipped itself (its `if:`) counts in its step's attempts and
    -- start, as the counts keep them (RunCounts.widen).
    step.attempts = math.max(step.attempts, tonumber(f[9]) or 0)
    local started = tonumber(f[4] or f[10])
    local listed = step.total > step.offset and #step.jobs < limit
    -- A job listed starts at its first start (a retry's pop is later): its history tells.
    if listed and started then started = RunState.first_start(jid) or started end
    step.started = RunState.earliest(step.started, started)
    if status == 'skipped' then started = nil end
    if not RunState.ENDED[status] then step.open = true end
    local updated = tonumber(f[5])
    step.updated = RunState.latest(step.updated, updated)
    if f[3] and not step.child then step.child = f[3] end
    step.deadline_missed = RunState.earliest(step.deadline_missed, tonumber(f[12]))
    if listed then table.insert(step.jobs, RunState.listed(jid, f, status, attempts, started)) end
    return false
  end)
  return order, seen, counts
end

-- One job of a step's page.
function RunState.listed(jid, f, status, attempts, started)
  return { jid = jid, state = f[1] or cjson.null, status = status, attempts = attempts,
    started = RunState.time(started) or cjson.null,
    updated = RunState.time(tonumber(f[5])) or cjson.null, child = f[3] or cjson.null,
    deadline_missed = RunState.time(tonumber(f[12])) or cjson.null }
end

-- The same from the run's counts (include/run_counts.lua) and a read of the jobs in each
-- step's page only; nil when the counts cannot tell: a run without them, one whose job waits
-- for a job outside it, or one that can still progress with jobs waiting for dependencies and
-- others failed (which of those waiting are upstream_failed only their dependencies tell). A
-- step's jobs are one stretch of the run's job list (a fan-out's items replace its template in
-- place), so its page is one LRANGE; a job there of another step also means: scan.
function RunState.counted_steps(run_id, canceled, limit, offsets)
  RunCounts.settle()
  local raw = redis.call('hgetall', Keys.run_counts(run_id))
  local fields = {}
  for i = 1, #raw, 2 do fields[raw[i]] = raw[i + 1] end
  if not fields['#'] or fields['!outside'] or fields['!unkept'] then return nil end
  local classes = {}
  for _, class in ipairs(RunState.CLASSES) do classes[class] = tonumber(fields[class]) or 0 end
  local going = RunState.going(classes)
  if going and classes.pending > 0 and
      classes.failed + classes.expired + classes.buried + classes.gone > 0 then
    return nil
  end
  local places = {}
  for field, value in pairs(fields) do
    if #field > 1 and string.sub(field, 1, 1) == '#' then
      table.insert(places, { string.sub(field, 2), tonumber(value) })
    end
  end
  table.sort(places, function(a, b) return a[2] < b[2] end)
  local order, seen, counts, position = {}, {}, {}, 0
  local key = Keys.run_jobs(run_id)
  for _, place in ipairs(places) do
    local name = place[1]
    local step = { step = name, counts = {}, total = 0, jobs = {},
      offset = (offsets and tonumber(offsets[name])) or 0,
      attempts = tonumber(fields[name .. ':@attempts']) or 0,
      started = tonumber(fields[name .. ':@started']),
      updated = tonumber(fields[name .. ':@updated']), child = fields[name .. ':@child'],
      deadline_missed = tonumber(fields[name .. ':@deadline_missed']) }
    for _, class in ipairs(RunState.CLASSES) do
      local n = tonumber(fields[name .. ':' .. class])
      if n and n > 0 then
        local word = RunState.word_of(class, going, canceled)
        step.counts[word] = (step.counts[word] or 0) + n
        counts[word] = (counts[word] or 0) + n
        seen[word] = true
        step.total = step.total + n
        if not RunState.ENDED[word] then step.open = true end
      end
    end
    if step.total > 0 then
      local first, last = position + step.offset, position + math.min(step.total, step.offset + limit) - 1
      if first <= last then
        for _, jid in ipairs(redis.call('lrange', key, first, last)) do
          if RunState.step_of(run_id, jid) ~= name then return nil end
          local f = Job.hmget(jid, unpack(RunState.FIELDS))
          local status = RunState.word_of(RunCounts.class(f[1], f[2], f[3], f[11]), going, canceled)
          local attempts = f[1] and RunState.attempts(f, status) or 0
          local started = status ~= 'skipped' and tonumber(f[4] or f[10]) or nil
          if started then started = RunState.first_start(jid) or started end
          table.insert(step.jobs, RunState.listed(jid, f, status, attempts, started))
        end
      end
      position = position + step.total
      table.insert(order, step)
    end
  end
  if position ~= redis.call('llen', key) then return nil end
  return order, seen, counts
end

-- The statuses a step with no items can have: its one job never runs (RunState.itemless).
RunState.ITEMLESS = { waiting = true, upstream_failed = true, success = true, skipped = true,
  canceled = true }

-- Whether `step` is a foreach or matrix step with no items: its one job, `<run>:<step>`, is an
-- empty fan-out (field `empty`, include/triggers.lua: a foreach over an empty list, or a
-- template whose producer output none), whatever its status (`word`): waiting for its other
-- needs, upstream_failed, completed with the empty list (success), skipped, or canceled with
-- its run (then `run-canceled` keeps what it was put with). Its read says the same before and
-- after it completes: 0 items (RunState.no_items). Only a step of one job that never ran, in a
-- status such a job can have, is looked at: one read, none for the others.
function RunState.itemless(run_id, step, word)
  if step.total ~= 1 or (step.attempts or 0) ~= 0 or not RunState.ITEMLESS[word] then
    return false
  end
  local jid = run_id .. ':' .. step.step
  if word ~= 'canceled' then return redis.call('hexists', Keys.job(jid), 'empty') == 1 end
  local kept = RunState.decoded(redis.call('hget', Keys.run_canceled(run_id), jid))
  return type(kept) == 'table' and kept.empty ~= nil
end

-- A step with no items reads as the step of no jobs it is: total 0, no counts, no job listed,
-- its status (and actions) its one job's. Its job is untouched (it completes with the empty list
-- once nothing holds it back and releases its dependents by their trigger rules); only this read
-- leaves it out, of the run's counts too (`counts`), not of what decides the run's status and
-- actions.
function RunState.no_items(step, word, counts)
  step.total, step.counts, step.jobs, step.offset = 0, {}, {}, 0
  counts[word] = counts[word] - 1
  if counts[word] == 0 then counts[word] = nil end
end

-- The whole run: its record (without the graph), its graph (the record's JSON text), status,
-- counts and actions, and each step's status, counts, attempts, times, actions and a page of
-- its jobs (`limit` jobs from the step's `offsets[step]`, or 0): from the run's counts and
-- the jobs of each page (RunState.counted_steps), else from every job's state
-- (RunState.scanned_steps); a job's outputs and failure only for the jobs in a page.
function RunState.read(run_id, limit, offsets)
  local record = RunState.record(run_id)
  if not record then return nil end
  local canceled = record.canceled
  -- Jobs canceled with the run that a retry can put back (Runs.keep_canceled).
  local kept = canceled and redis.call('exists', Keys.run_canceled(run_id)) == 1
  local graph = record.graph
  record.graph = nil
  local order, seen, counts = RunState.counted_steps(run_id, canceled, limit, offsets)
  if not order then order, seen, counts = RunState.scanned_steps(run_id, canceled, limit, offsets) end
  local status = RunState.run_status(seen, canceled)
  local finished = status ~= 'running'
  -- Decided from every job of the run, a step's with no items too (RunState.no_items).
  local run_actions = RunState.run_actions(status, counts, kept)
  local out_steps = {}
  for i, step in ipairs(order) do
    local word = RunState.step_status(step.counts, step.total)
    step.status = word
    local itemless = RunState.itemless(run_id, step, word)
    if itemless then step.jobs = {} end
    -- A step of skipped jobs never ran, even if its jobs started to decide so.
    if word == 'skipped' then step.attempts, step.started = 0, nil end
    step.started, step.updated = RunState.time(step.started), RunState.time(step.updated)
    local finished_at = (not step.open and step.started) and step.updated or nil
    step.kept = kept
    for _, job in ipairs(step.jobs) do
      local restorable = job.status == 'canceled' and kept and
        redis.call('hexists', Keys.run_canceled(run_id), job.jid) == 1
      job.actions = RunState.job_actions(job.status, finished, restorable, job.jid)
      if job.state ~= cjson.null then
        local result, failure, runs = unpack(redis.call('hmget', Keys.job(job.jid), 'result',
          'failure', 'runs'))
        -- The result's JSON text as stored, decoded by the reader: decoded here, cjson would
        -- write its empty lists back as {} (as for the graph).
        job.outputs = result or cjson.null
        failure = RunState.decoded(failure)
        job.failure = (type(failure) == 'table' and next(failure)) and failure or cjson.null
        job.earlier = RunState.earlier(job.jid, tonumber(runs) or 0)
      end
    end
    -- A canceled sub-flow step's job is gone with its `child`: its child run still names it.
    if not step.child and word == 'canceled' then
      local id = run_id .. '.' .. step.step
      local parent = redis.call('hmget', Keys.run(id), 'parent_run', 'parent_step')
      if parent[1] == run_id and parent[2] == step.step then step.child = id end
    end
    local actions = RunState.step_actions(run_id, step, finished)
    if itemless then RunState.no_items(step, word, counts) end
    out_steps[i] = {
      step = step.step, status = word, counts = step.counts, total = step.total,
      attempts = step.attempts, started = step.started or cjson.null,
      finished = finished_at or cjson.null,
      duration = (finished_at and step.started) and math.max(0, finished_at - step.started) or cjson.null,
      child = step.child or cjson.null, actions = actions, jobs = step.jobs,
      deadline_missed = RunState.time(step.deadline_missed) or cjson.null,
      offset = step.offset,
      next = (step.offset + #step.jobs < step.total) and (step.offset + #step.jobs) or cjson.null,
    }
  end
  return {
    record = record, status = status, counts = counts, actions = run_actions,
    -- The graph's text as stored, never decoded here: cjson would write its empty lists
    -- (a step's needs) back as {}. The reader decodes it as it decodes the listing's records.
    steps = out_steps, graph = graph or cjson.null,
  }
end

-- A re-run job's earlier attempts' outcomes (run.rerun keeps each as `attempt:<n>`), oldest
-- first, each {attempt, record}: the record's JSON text as kept ({status, result, failure,
-- updated}), decoded by the reader for the reason the outputs are; at most the last 20.
function RunState.earlier(jid, base)
  local out = {}
  for attempt = math.max(1, base - 19), base do
    local kept = redis.call('hget', Keys.job(jid), 'attempt:' .. attempt)
    if kept then table.insert(out, { attempt = attempt, record = kept }) end
  end
  return out
end

-- Refuse an action the state does not allow: WRONGSTATE naming the state and what is allowed.
function RunState.refuse(cmd, what, status, allowed, action)
  local list = #allowed > 0 and table.concat(allowed, ', ') or 'none'
  Err.raise('WRONGSTATE', cmd .. '(): ' .. what .. ' has status ' .. status .. ': ' .. action ..
    ' is not allowed (allowed: ' .. list .. ')')
end

-- Whether `action` is in the list `allowed`.
function RunState.allows(allowed, action)
  for _, a in ipairs(allowed) do
    if a == action then return true end
  end
  return false
end
