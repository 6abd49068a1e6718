-- run_counts: each flow run's jobs counted by class, for the run and for each step, kept as the
-- jobs change state, so that the one decider (include/run_state.lua) reads a run's counts
-- instead of every job of it.
--
-- `run-counts:<run id>` (hash): `<class>` -> jobs of the run in it; `<step>:<class>` -> jobs of
-- the step in it; `#<step>` -> the step's place among the run's steps (1, 2, ...: the order its
-- first job joined). A job of a run holds `counted` = '<class> <run id>': what it is counted as.
-- A class is what the job's own fields say of it (RunCounts.class): running, waiting, awaiting,
-- buried, failed, expired, success, cached, skipped, `pending` (waiting for its dependencies:
-- waiting or upstream_failed, as the decider tells from the run's other counts) and `gone` (its
-- hash was deleted: canceled with its run, or expired from the history).
--
-- Each write of a job's state marks the job (RunCounts.touch: Put.write, Job.append_history, the
-- pop, Queue.enqueue/schedule); the dispatch settles the marked jobs once the command is done
-- (RunCounts.settle): a job whose class changed moves; a run's changed counts are written in one
-- HSET (and one HDEL for those back to 0). A delete settles the job at once (RunCounts.forget).
-- A run's jobs join at its submit, a fan-out's items when the template expands (RunCounts.join);
-- the template leaves (RunCounts.leave). A run submitted before counts existed has no counts
-- key: the decider scans it instead.
-- RunCounts.recount gives the counts a scan finds (doctor's check, tests).
-- @include keys
-- @include engine
-- @include args
-- @include job_hash
local RunCounts = {}

-- jid -> true: the jobs marked in this call (reset by the dispatch); `marked`: them in order (a
-- run's steps take their places in the order their first jobs join).
RunCounts.touched = {}
RunCounts.marked = {}
-- jid -> {run id, class it was, class it is now (nil: read it back), fields}: jobs that join a
-- run in this call, and jobs a pop or a complete moved (RunCounts.moving, with their fields).
RunCounts.joining = {}

function RunCounts.class(state, skipped, child, cached)
  if not state then return 'gone' end
  if state == 'complete' then
    return skipped and 'skipped' or (cached and 'cached' or 'success')
  end
  if state == 'depends' then return child and 'running' or 'pending' end
  if state == 'scheduled' then return 'waiting' end
  return state
end

-- The step of a run's job: its jid without the run's prefix and an item's `[...]`.
function RunCounts.step_of(run_id, jid)
  if string.sub(jid, 1, #run_id + 1) == run_id .. ':' then
    return RunCounts.step_after(jid, #run_id + 2)
  end
  return RunCounts.step_after(jid, 1)
end

-- The step of `jid` read from its byte `after` on (past its run's prefix): without an item's
-- `[...]` at its end.
function RunCounts.step_after(jid, after)
  local name = string.sub(jid, after)
  if string.byte(name, -1) == 93 then -- ']'
    local bracket = string.find(name, '[', 1, true)
    if bracket then name = string.sub(name, 1, bracket - 1) end
  end
  return name
end

-- jid -> true: jobs put again over themselves in this call (a re-run, a retry of a canceled
-- job): their start, attempts and child are cleared, so their run's kept times are read again.
RunCounts.reput = {}

-- run id -> true: runs whose steps' times and attempts are read again when the call settles
-- (a job of them was deleted: its hash is gone only after RunCounts.forget).
RunCounts.stale = {}
-- jid -> true: jobs whose `runs` went down (a sub-flow step parks: commands/subflow.lua): their
-- run's steps' attempts are read again.
RunCounts.recounted = {}

-- Whether a table above holds anything: a call that touched no job of a run resets nothing.
RunCounts.used = false

-- The tables are emptied in place, not replaced: a new table per call (and its growth as the
-- first jobs are marked) costs an allocation each, and the garbage collector's time later.
do
  local function clear(set)
    for key in pairs(set) do set[key] = nil end
  end
  function RunCounts.reset()
    if not RunCounts.used then return end
    local marked = RunCounts.marked
    for i = #marked, 1, -1 do marked[i] = nil end
    clear(RunCounts.touched)
    clear(RunCounts.joining)
    clear(RunCounts.reput)
    clear(RunCounts.stale)
    clear(RunCounts.recounted)
    RunCounts.used = false
  end
end

-- Whether a jid can be a run's job: '<run id>:<step>' (see RunCounts.touch).
local function runs_job(jid)
  return string.find(jid, ':', 1, true) ~= nil
end

-- Mark a job whose start, attempts and child a put cleared (Put.write over it), or whose `runs`
-- went down (`recounted`: commands/subflow.lua): its run's steps' times are read again.
function RunCounts.again(jid, recounted)
  if not runs_job(jid) then return end
  RunCounts.used = true
  if recounted then RunCounts.recounted[jid] = true else RunCounts.reput[jid] = true end
end

-- A job of a run has its run's id and ':' in its jid (RunCounts.join keeps the counts of a run
-- with another job from the decider): any other job costs nothing here.
function RunCounts.touch(jid)
  if RunCounts.touched[jid] then
    -- Written again after its put counted it: settled from what its hash says then.
    local joining = RunCounts.joining[jid]
    if joining then joining[3] = nil end
    return
  end
  if not runs_job(jid) then return end
  RunCounts.used = true
  RunCounts.touched[jid] = true
  RunCounts.marked[#RunCounts.marked + 1] = jid
end

-- `jid` joins run `run_id` (counted as `was` until now: 'gone' for a canceled job put back).
-- `counted`: the class its put just wrote as its `counted` (Put.write's `count_in`): while
-- nothing writes the job again in this call, it settles without reading the job back (a new
-- job adds nothing to its step's times and attempts).
function RunCounts.join(jid, run_id, was, counted)
  if string.sub(jid, 1, #run_id + 1) ~= run_id .. ':' then RunCounts.unkept(run_id) end
  RunCounts.used = true
  RunCounts.joining[jid] = { run_id, was, counted }
  if RunCounts.touched[jid] then return end
  RunCounts.touched[jid] = true
  RunCounts.marked[#RunCounts.marked + 1] = jid
end

-- Whether a new run's jobs (`jids`) can be counted at once by RunCounts.start: the run has no
-- counts yet and every jid starts with '<run id>:' (else RunCounts.join counts each).
function RunCounts.fresh(run_id, jids)
  if redis.call('exists', Keys.run_counts(run_id)) == 1 then return false end
  local prefix = run_id .. ':'
  for i = 1, #jids do
    -- A plain search that finds the prefix first at 1, without a string made per jid.
    if string.find(jids[i], prefix, 1, true) ~= 1 then return false end
  end
  return true
end

-- A new run's jobs counted at once, after its submit wrote them (Runs.write; RunCounts.fresh
-- said so): `jids` in submission order, `classes[i]` what job i's put wrote as its `counted`
-- (nil: a job RunCounts.join counts, whose step is placed here all the same). Written as the
-- settle would write them, in one HSET and without a read (there are none yet): each class and
-- each step's, each step's place in the order its first job came, and `#`. A job written again
-- later in the call is settled from its `counted` as any job is (RunCounts.touch).
function RunCounts.start(run_id, jids, classes)
  -- In one pass, straight into the HSET's arguments: each step's place (`#<step>`) when its
  -- first job comes, each step field (`<step>:<class>`) when its first job of the class comes,
  -- at[field] the index of its count; then each class's total and `#`.
  local fields, n, totals, at, placed, steps = {}, 0, {}, {}, {}, 0
  -- Every jid starts with '<run id>:' (RunCounts.fresh said so): no prefix to compare.
  local after, step_after = #run_id + 2, RunCounts.step_after
  for i = 1, #jids do
    local step = step_after(jids[i], after)
    if not placed[step] then
      placed[step] = true
      steps = steps + 1
      fields[n + 1], fields[n + 2], n = '#' .. step, steps, n + 2
    end
    local class = classes[i]
    if class then
      totals[class] = (totals[class] or 0) + 1
      local field = step .. ':' .. class
      local k = at[field]
      if k then
        fields[k] = fields[k] + 1
      else
        fields[n + 1], fields[n + 2], n = field, 1, n + 2
        at[field] = n
      end
    end
  end
  for class, count in pairs(totals) do
    fields[n + 1], fields[n + 2], n = class, count, n + 2
  end
  fields[n + 1], fields[n + 2] = '#', steps
  Engine.call_many('hset', Keys.run_counts(run_id), fields)
end

-- The counted class and run of a job (`counted` as stored), or nil.
local function parse(counted)
  if not counted then return nil end
  local space = string.find(counted, ' ', 1, true)
  if not space then return nil end
  return string.sub(counted, 1, space - 1), string.sub(counted, space + 1)
end

-- The run a job is counted in, from its `counted` field as stored (nil: none).
function RunCounts.run_in(counted)
  local _, run_id = parse(counted)
  return run_id
end

-- A job a command is about to write as class `now` (a pop: running; a complete), `counted` its
-- field as the command read it: the move to settle without reading the job back (nil when it
-- must be read: a job of no run's counts, one that joined its run in this call, whose `was` is
-- the join's, or one put again over itself, whose times are read again). The command writes
-- `move.counted` (nil: unchanged) in its own write of the job, then hands the move over with
-- RunCounts.moved: a pop or a complete writes its job once, and reads it once.
function RunCounts.moving(jid, counted, now)
  local was, run_id = parse(counted)
  if not run_id or RunCounts.joining[jid] or RunCounts.reput[jid] or RunCounts.recounted[jid] then
    return nil
  end
  return { run_id, was, now, counted = now ~= was and now .. ' ' .. run_id or nil }
end

-- The job of `move` (RunCounts.moving) was written; `f`: its fields as RunCounts.FIELDS orders
-- them, as they are now (what widens its step's times and attempts). Settled from these unless
-- something writes the job again in this call (RunCounts.touch: then it is read back).
function RunCounts.moved(jid, move, f)
  if not move then return end
  move[4] = f
  RunCounts.used = true
  RunCounts.joining[jid] = move
end

local function run_deltas(deltas, run_id)
  local run = deltas[run_id]
  if not run then
    run = { fields = {}, steps = {}, order = {}, joined = {} }
    deltas[run_id] = run
  end
  return run
end

local function step_deltas(run, step)
  local wide = run.steps[step]
  if not wide then
    wide = {}
    run.steps[step] = wide
    run.order[#run.order + 1] = step
  end
  return wide
end

-- Add `n` to the counts of `class` in run `run_id` and its `step`, into `deltas`.
local function add(deltas, run_id, step, class, n)
  local run = run_deltas(deltas, run_id)
  run.fields[class] = (run.fields[class] or 0) + n
  local field = step .. ':' .. class
  run.fields[field] = (run.fields[field] or 0) + n
  step_deltas(run, step)
end

-- What a job adds to its step's times and attempts (`f`: RunCounts.FIELDS), into `into`:
-- {attempts (most starts), started (earliest start), updated (latest change), child,
-- deadline_missed (the earliest miss of a job's deadline: include/deadlines.lua)}. A job that
-- started and then skipped itself (its `if:`) counts too; a step of skipped jobs only shows
-- neither (RunState.read).
function RunCounts.widen(into, f)
  local updated = tonumber(f[9])
  if updated and (not into.updated or updated > into.updated) then into.updated = updated end
  local runs, started = tonumber(f[6]), tonumber(f[7] or f[8])
  if runs and runs > (into.attempts or 0) then into.attempts = runs end
  if started and (not into.started or started < into.started) then into.started = started end
  if f[4] and not into.child then into.child = f[4] end
  local missed = tonumber(f[10])
  if missed and (not into.deadline_missed or missed < into.deadline_missed) then
    into.deadline_missed = missed
  end
end

-- The job's fields the counts read, by position.
RunCounts.FIELDS = { 'counted', 'state', 'skipped', 'child', 'cached', 'runs', 'popped',
  'wait_since', 'updated', 'deadline_missed' }

-- Job `jid`'s RunCounts.FIELDS, its state filled in where its hash leaves it out (JobHash).
function RunCounts.fields(jid)
  local f = redis.call('hmget', Keys.job(jid), 'klass', unpack(RunCounts.FIELDS))
  local klass = table.remove(f, 1)
  f[2] = JobHash.state(f[2], klass)
  return f
end

-- Move one job between its counted class and what its hash says now, and widen its step's
-- times, into `deltas`. Returns the class it is counted as now and its run (nil: no run's).
-- `deleting`: its hash goes in this call, so its `counted` is not written.
local function settle_one(jid, deltas, deleting, read)
  local joining = RunCounts.joining[jid]
  if joining and joining[3] then
    local run_id, was, now, f = joining[1], joining[2], joining[3], joining[4]
    local step = RunCounts.step_of(run_id, jid)
    if now ~= was then
      if was then add(deltas, run_id, step, was, -1) end
      add(deltas, run_id, step, now, 1)
    end
    local run = run_deltas(deltas, run_id)
    if f then -- moved (RunCounts.moved): its step has its place already
      RunCounts.widen(step_deltas(run, step), f)
    else
      run.joined[step] = true
      step_deltas(run, step)
    end
    return now, run_id
  end
  local key = Keys.job(jid)
  local f = read or RunCounts.fields(jid)
  local was, run_id = parse(f[1])
  -- A joining job was counted as `was` in its run until now, whatever its put wrote.
  if joining then run_id, was = joining[1], joining[2] end
  if not run_id then return end
  local now = RunCounts.class(f[2], f[3], f[4], f[5])
  local step = RunCounts.step_of(run_id, jid)
  local run = run_deltas(deltas, run_id)
  if now ~= was then
    local counted = now .. ' ' .. run_id
    if f[2] and f[1] ~= counted and not deleting then redis.call('hset', key, 'counted', counted) end
    if was then add(deltas, run_id, step, was, -1) end
    add(deltas, run_id, step, now, 1)
  end
  if joining and not joining[4] then run.joined[step] = true end
  -- A job deleted adds nothing: its step's times are read again once it is gone (forget).
  local wide = step_deltas(run, step)
  if not deleting then RunCounts.widen(wide, f) end
  -- A job put again or deleted takes back what it added to its step's times and attempts: read
  -- them again (a few admin actions: a re-run, a retry of a canceled run, a cancel).
  if RunCounts.reput[jid] or (now ~= was and now == 'gone') then
    run.rewiden = run.rewiden or {}
    run.rewiden[step] = true
  elseif RunCounts.recounted[jid] then
    run.reattempt = run.reattempt or {}
    run.reattempt[step] = true
  end
  return now, run_id
end

-- A step's kept times and attempts: `<step>:@attempts`, `:@started`, `:@updated`, `:@child`,
-- `:@deadline_missed`.
RunCounts.WIDE = { 'attempts', 'started', 'updated', 'child', 'deadline_missed' }

-- The classes a run's jobs are counted in (RunCounts.class), `gone` last: a step whose every
-- job is gone has nothing left to read its times from.
RunCounts.CLASSES = { 'running', 'waiting', 'awaiting', 'pending', 'buried', 'failed', 'expired',
  'success', 'cached', 'skipped', 'gone' }

-- Each step's field names in the run's counts: its kept times and attempts (RunCounts.WIDE's
-- order, by position) and its place (`place`). A memo of a pure function (a step's names are the
-- same whatever the data), bounded, so it may outlive the call: a settle does not build a dozen
-- strings for every step it writes.
do
  local memo, count = {}, 0
  function RunCounts.step_names(step)
    local names = memo[step]
    if names then return names end
    names = { place = '#' .. step }
    for i, name in ipairs(RunCounts.WIDE) do names[i] = step .. ':@' .. name end
    if count >= 256 then memo, count = {}, 0 end
    memo[step] = names
    count = count + 1
    return names
  end
end

-- Append to `set` the writes that widen a step's kept attempts and times (`names`:
-- RunCounts.step_names) by `wide` (RunCounts.widen's), the kept values being kept[at + 1] to
-- kept[at + 5] (RunCounts.WIDE's order).
function RunCounts.widen_kept(set, names, wide, kept, at)
  if wide.attempts and wide.attempts > (tonumber(kept[at + 1]) or 0) then
    set[#set + 1] = names[1]
    set[#set + 1] = wide.attempts
  end
  local started = tonumber(kept[at + 2])
  if wide.started and (not started or wide.started < started) then
    set[#set + 1] = names[2]
    set[#set + 1] = string.format('%.17g', wide.started)
  end
  local updated = tonumber(kept[at + 3])
  if wide.updated and (not updated or wide.updated > updated) then
    set[#set + 1] = names[3]
    set[#set + 1] = string.format('%.17g', wide.updated)
  end
  if wide.child and not kept[at + 4] then
    set[#set + 1] = names[4]
    set[#set + 1] = wide.child
  end
  local missed = tonumber(kept[at + 5])
  if wide.deadline_missed and (not missed or wide.deadline_missed < missed) then
    set[#set + 1] = names[5]
    set[#set + 1] = string.format('%.17g', wide.deadline_missed)
  end
end

-- Write one run's settled `run` (deltas) to its counts at `key`: the counts moved (a count back
-- to 0 deleted), the steps that joined and have no place yet given the next ones in the order
-- they joined, and the steps' kept attempts and times widened. One read of every field this
-- changes, then one HSET and at most one HDEL (in slices): each write of a script is its own
-- entry in the append-only file and the replicas' stream.
-- The fields are read in the order the writes below visit them (pairs() of a table not changed
-- meanwhile visits it in the same order), so each value read is found by its position: no
-- table of them by name to build.
local function write_run(key, run)
  local fields = {}
  for field, n in pairs(run.fields) do
    if n ~= 0 then fields[#fields + 1] = field end
  end
  local counted = #fields
  for _, step in ipairs(run.order) do
    if run.joined[step] then fields[#fields + 1] = RunCounts.step_names(step).place end
  end
  local placing = #fields
  if placing > counted then fields[#fields + 1] = '#' end
  local widening = #fields
  for _, step in ipairs(run.order) do
    if next(run.steps[step]) ~= nil then
      local names = RunCounts.step_names(step)
      for i = 1, #RunCounts.WIDE do fields[#fields + 1] = names[i] end
    end
  end
  if #fields == 0 then return end
  local kept
  if #fields <= 1000 then
    kept = redis.call('hmget', key, unpack(fields))
  else
    kept = {}
    for first = 1, #fields, 1000 do
      local values = redis.call('hmget', key, unpack(fields, first, math.min(#fields, first + 999)))
      for i = 1, #values do kept[first + i - 1] = values[i] end
    end
  end

  local set, gone = {}, nil
  local at = 0
  for field, n in pairs(run.fields) do
    if n ~= 0 then
      at = at + 1
      local total = (tonumber(kept[at]) or 0) + n
      if total == 0 then
        gone = gone or {}
        gone[#gone + 1] = field
      else
        set[#set + 1] = field
        set[#set + 1] = total
      end
    end
  end
  if placing > counted then
    local placed = tonumber(kept[placing + 1]) or 0
    local last = placed
    for i = counted + 1, placing do
      if not kept[i] then
        last = last + 1
        set[#set + 1] = fields[i]
        set[#set + 1] = last
      end
    end
    if last ~= placed then
      set[#set + 1] = '#'
      set[#set + 1] = last
    end
  end
  at = widening
  for _, step in ipairs(run.order) do
    local wide = run.steps[step]
    if next(wide) ~= nil then
      RunCounts.widen_kept(set, RunCounts.step_names(step), wide, kept, at)
      at = at + #RunCounts.WIDE
    end
  end
  if #set > 0 then Engine.call_many('hset', key, set) end
  if gone then Engine.call_many('hdel', key, gone) end
end

local function apply(deltas)
  for run_id, run in pairs(deltas) do
    local key = Keys.run_counts(run_id)
    write_run(key, run)
    if run.rewiden then RunCounts.rewiden(run_id, run.rewiden) end
    if run.reattempt then
      local _, _, _, _, wide = RunCounts.recount(run_id)
      for step in pairs(run.reattempt) do
        if wide[step] then redis.call('hset', key, step .. ':@attempts', wide[step].attempts or 0) end
      end
    end
  end
end

local function any_count(values, n)
  for i = 1, n do
    if values[i] then return true end
  end
  return false
end

-- Read the times and attempts of a run's steps `only` ({step -> true}) again from its jobs (the
-- other steps keep theirs: a start kept is the first since the job's put, as its history says).
-- A step whose jobs are all gone (retention dropping a finished run's jobs, most often) has none
-- left: its times are cleared without the scan of the run, which for a big run's jobs dropped a
-- hundred per call would read every job of the run in each call.
function RunCounts.rewiden(run_id, only)
  local key = Keys.run_counts(run_id)
  local live, last = {}, #RunCounts.CLASSES - 1
  for step in pairs(only) do
    local fields = {}
    for i = 1, last do fields[i] = step .. ':' .. RunCounts.CLASSES[i] end
    local counts = redis.call('hmget', key, unpack(fields))
    if any_count(counts, last) then
      live[step] = true
    else
      redis.call('hdel', key, unpack(RunCounts.step_names(step)))
    end
  end
  if next(live) == nil then return end
  local _, _, steps, _, wide = RunCounts.recount(run_id)
  local some = {}
  for _, step in ipairs(steps) do
    if live[step] then some[#some + 1] = step end
  end
  RunCounts.write_wide(key, some, wide)
end

-- Write the steps' times and attempts (`wide[step]`, RunCounts.widen's) over the kept ones.
function RunCounts.write_wide(key, steps, wide)
  for _, step in ipairs(steps) do
    for _, name in ipairs(RunCounts.WIDE) do redis.call('hdel', key, step .. ':@' .. name) end
    local now = wide[step]
    if now.attempts then redis.call('hset', key, step .. ':@attempts', now.attempts) end
    if now.started then
      redis.call('hset', key, step .. ':@started', string.format('%.17g', now.started))
    end
    if now.updated then
      redis.call('hset', key, step .. ':@updated', string.format('%.17g', now.updated))
    end
    if now.child then redis.call('hset', key, step .. ':@child', now.child) end
    if now.deadline_missed then
      redis.call('hset', key, step .. ':@deadline_missed',
        string.format('%.17g', now.deadline_missed))
    end
  end
end

-- The run has a job that waits for one outside it (whether its `pending` jobs can progress is
-- then not in its counts), or a job whose jid does not start with '<run id>:' (whose changes
-- RunCounts.touch does not see): the decider scans it.
function RunCounts.outside(run_id)
  redis.call('hset', Keys.run_counts(run_id), '!outside', 1)
end

function RunCounts.unkept(run_id)
  redis.call('hset', Keys.run_counts(run_id), '!unkept', 1)
end

-- The one job a lone pop or complete moved (`move`: RunCounts.moving, with its fields from
-- RunCounts.moved) from class `was` to another: written as write_run writes its run's deltas
-- (the two classes and its step's, its step's attempts and times: one HMGET, one HSET, an HDEL
-- for a count back to 0), without building the deltas first. Returns false, writing nothing,
-- for any other move (no class change, nothing to widen): the general path settles it.
function RunCounts.settle_moved(jid, move)
  local run_id, was, now = move[1], move[2], move[3]
  if now == was then return false end
  local wide = {}
  RunCounts.widen(wide, move[4])
  if next(wide) == nil then return false end
  local step = RunCounts.step_of(run_id, jid)
  local names = RunCounts.step_names(step)
  local key = Keys.run_counts(run_id)
  local fields = { was, step .. ':' .. was, now, step .. ':' .. now }
  local kept = redis.call('hmget', key, fields[1], fields[2], fields[3], fields[4], names[1],
    names[2], names[3], names[4], names[5])
  local set, gone = {}, nil
  for i = 1, 4 do
    local total = (tonumber(kept[i]) or 0) + (i <= 2 and -1 or 1)
    if total == 0 then
      gone = gone or {}
      gone[#gone + 1] = fields[i]
    else
      set[#set + 1] = fields[i]
      set[#set + 1] = total
    end
  end
  RunCounts.widen_kept(set, names, wide, kept, 4)
  if #set > 0 then redis.call('hset', key, unpack(set)) end
  if gone then redis.call('hdel', key, unpack(gone)) end
  return true
end

-- Settle every job marked in this call (the dispatch calls it after the command).
function RunCounts.settle()
  if #RunCounts.marked == 0 and next(RunCounts.stale) == nil then return end
  local marked = RunCounts.marked
  local lone = #marked == 1 and RunCounts.touched[marked[1]] and RunCounts.joining[marked[1]]
  if not (lone and lone[2] and lone[3] and lone[4] and RunCounts.settle_moved(marked[1], lone)) then
    local deltas = {}
    for _, jid in ipairs(marked) do
      if RunCounts.touched[jid] then settle_one(jid, deltas) end
    end
    apply(deltas)
  end
  for run_id, only in pairs(RunCounts.stale) do
    if redis.call('exists', Keys.run_counts(run_id)) == 1 then RunCounts.rewiden(run_id, only) end
  end
  RunCounts.reset()
end

-- Before a job's hash is deleted: it is counted `gone` from now on. `batch`: deltas several
-- deletes gather, written once by RunCounts.apply (retention drops a hundred jobs a call, most
-- of one run); without it they are written at once. `read`: the job's RunCounts.FIELDS, when
-- the caller read them with the rest (Job.load_finished).
function RunCounts.forget(jid, batch, read)
  if not runs_job(jid) then return end
  RunCounts.used = true
  local deltas = batch or {}
  local was, run_id = settle_one(jid, deltas, true, read)
  RunCounts.touched[jid], RunCounts.joining[jid] = nil, nil
  if run_id then
    local step = RunCounts.step_of(run_id, jid)
    add(deltas, run_id, step, was, -1)
    add(deltas, run_id, step, 'gone', 1)
    RunCounts.stale[run_id] = RunCounts.stale[run_id] or {}
    RunCounts.stale[run_id][step] = true
  end
  if not batch then apply(deltas) end
end

-- Write the deltas RunCounts.forget gathered in a batch.
function RunCounts.apply(deltas)
  apply(deltas)
end

-- A job that leaves its run (a fan-out template, replaced by its items): no longer counted.
function RunCounts.leave(jid)
  if not runs_job(jid) then return end
  local deltas = {}
  settle_one(jid, deltas)
  RunCounts.touched[jid], RunCounts.joining[jid] = nil, nil
  local was, run_id = parse(redis.call('hget', Keys.job(jid), 'counted'))
  if run_id then
    add(deltas, run_id, RunCounts.step_of(run_id, jid), was, -1)
    redis.call('hdel', Keys.job(jid), 'counted')
  end
  apply(deltas)
end

-- The counts a scan of the run's jobs finds: {field -> n} as RunCounts keeps them (without the
-- steps' places), {jid -> class} of the jobs whose `counted` disagrees, the steps in order, and
-- whether a job waits for one outside the run.
function RunCounts.recount(run_id)
  local counts, wrong, steps, seen, ours, waiting = {}, {}, {}, {}, {}, {}
  local key, start, page = Keys.run_jobs(run_id), 0, 1000
  repeat
    local jids = redis.call('lrange', key, start, start + page - 1)
    -- (an entry that is no jid is no job of the run: the doctor removes it)
    for _, jid in ipairs(Arg.jids_in(jids)) do
      local f = RunCounts.fields(jid)
      local class = RunCounts.class(f[2], f[3], f[4], f[5])
      local step = RunCounts.step_of(run_id, jid)
      if not seen[step] then seen[step] = {}; table.insert(steps, step) end
      RunCounts.widen(seen[step], f)
      counts[class] = (counts[class] or 0) + 1
      counts[step .. ':' .. class] = (counts[step .. ':' .. class] or 0) + 1
      if f[2] and f[1] ~= class .. ' ' .. run_id then wrong[jid] = class end
      ours[jid] = true
      if f[2] == 'depends' then table.insert(waiting, jid) end
    end
    start = start + page
  until #jids < page
  local outside = false
  for _, jid in ipairs(waiting) do
    for _, dependency in ipairs(redis.call('smembers', Keys.dependencies(jid))) do
      if not ours[dependency] then outside = true end
    end
  end
  return counts, wrong, steps, outside, seen
end

-- Write the counts a scan finds over the stored ones (a run without counts gets them); returns
-- the fields that differed, sorted, and how many jobs' `counted` was wrong.
function RunCounts.rebuild(run_id)
  local counts, wrong, steps, outside, wide = RunCounts.recount(run_id)
  local key = Keys.run_counts(run_id)
  if outside then RunCounts.outside(run_id) end
  local stored = redis.call('hgetall', key)
  local differed, seen = {}, {}
  for i = 1, #stored, 2 do
    local field = stored[i]
    local first = string.sub(field, 1, 1)
    if first ~= '#' and first ~= '!' and not string.find(field, ':@', 1, true) then
      seen[field] = true
      if tonumber(stored[i + 1]) ~= counts[field] then
        table.insert(differed, field)
        redis.call('hdel', key, field)
      end
    end
  end
  for field, n in pairs(counts) do
    if not seen[field] or redis.call('hexists', key, field) == 0 then
      if seen[field] == nil then table.insert(differed, field) end
      redis.call('hset', key, field, n)
    end
  end
  for _, step in ipairs(steps) do
    if redis.call('hexists', key, '#' .. step) == 0 then
      redis.call('hset', key, '#' .. step, redis.call('hincrby', key, '#', 1))
    end
  end
  RunCounts.write_wide(key, steps, wide)
  local fixed = 0
  for jid, class in pairs(wrong) do
    redis.call('hset', Keys.job(jid), 'counted', class .. ' ' .. run_id)
    fixed = fixed + 1
  end
  table.sort(differed)
  return differed, fixed
end

-- The counts kept for a run as RunCounts.recount gives them (no places, flags, times or
-- attempts), or nil when it has none.
function RunCounts.kept(run_id)
  local raw = redis.call('hgetall', Keys.run_counts(run_id))
  if #raw == 0 then return nil end
  local out = {}
  for i = 1, #raw, 2 do
    local first = string.sub(raw[i], 1, 1)
    if first ~= '#' and first ~= '!' and not string.find(raw[i], ':@', 1, true) then
      out[raw[i]] = tonumber(raw[i + 1])
    end
  end
  return out
end

-- Whether a run's kept counts differ from a scan's (a run whose counts are not kept, or that
-- has none, does not drift: the decider scans it).
-- Whether the run's counts are kept (a run submitted before counts were kept has none, and a
-- run whose jobs wait on jobs outside it is marked `!unkept`: neither can drift).
function RunCounts.counting(run_id)
  local key = Keys.run_counts(run_id)
  return redis.call('exists', key) == 1 and redis.call('hexists', key, '!unkept') == 0
end

-- Whether kept counts differ from scanned ones (RunCounts.recount's first value).
function RunCounts.differ(kept, scanned)
  kept = kept or {}
  for field, n in pairs(scanned) do
    if kept[field] ~= n then return true end
  end
  for field, n in pairs(kept) do
    if scanned[field] ~= n then return true end
  end
  return false
end

function RunCounts.drifted(run_id)
  if not RunCounts.counting(run_id) then return false end
  return RunCounts.differ(RunCounts.kept(run_id), (RunCounts.recount(run_id)))
end
