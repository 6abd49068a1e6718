-- deadlines: a run or a step that must be done by a time (a flow's and a step's `deadline:`).
--
-- A run submitted with `deadline` (seconds) in its record must be done that long after the time
-- it stands for (its `tick`, else when it was submitted); a job put with `deadline` (a step's)
-- that long after it started (its `popped`; for a wait step, `wait_since`). Both are entries of
-- the zset `P deadlines` (`r:<run id>`, `j:<jid>`) scored by the earliest moment they could be
-- missed; `deadline.sweep` (the scheduler service's housekeeping) looks at the due ones: one
-- still unfinished at its deadline is missed, once: field `deadline_missed` (when) on the run
-- record or the job, `P deadlines-missed` counts it, and an outbox event `deadline` is written
-- for the run's notify rules (include/notify.lua). A step not started yet is looked at again a
-- deadline after now (it cannot be late sooner); one done, or gone, leaves the zset, and comes
-- back when run.retry or run.rerun puts it back (its deadline counts from its next start),
-- unless it missed its deadline already.
--
--   Deadlines.parse(cmd, value)       -> seconds (> 0), or nil
--   Deadlines.write(run_id, run)      -> the run's entry (from Runs.write; a job's: its put)
--   Deadlines.sweep(limit)            -> how many were missed in this call
-- @include args
-- @include keys
-- @include engine
-- @include notify
-- @include run_counts
-- @include job
local Deadlines = {}

-- States in which a step has not started: its deadline cannot run yet.
Deadlines.NOT_STARTED = { waiting = true, scheduled = true, depends = true, buried = true }
Deadlines.ACTIVE = { running = true, awaiting = true }

function Deadlines.parse(cmd, value)
  if value == nil or value == cjson.null then return nil end
  if type(value) ~= 'number' or value ~= value or value <= 0 or value == math.huge then
    Arg.fail(cmd, 'Arg "deadline" must be a number of seconds more than 0: ' .. Arg.shown(value))
  end
  return value
end

function Deadlines.write(run_id, run)
  local seconds = Deadlines.parse('FlowSubmit', run.deadline)
  if seconds then
    local base = tonumber(run.tick) or Engine.now
    redis.call('zadd', Keys.deadlines(), base + seconds, 'r:' .. run_id)
  end
  -- Each job's `deadline` field and entry are written by its put (include/putting.lua), which
  -- writes them again when run.retry or run.rerun puts the job back.
end

function Deadlines.missed(key, run_id, jid)
  redis.call('hset', key, 'deadline_missed', Engine.now)
  -- A run's job: its step's kept `deadline_missed` settles from it (include/run_counts.lua).
  if jid ~= '' then RunCounts.touch(jid) end
  redis.call('incr', Keys.deadlines_missed())
  Notify.deadline(run_id, jid)
end

function Deadlines.run_entry(member, run_id)
  redis.call('zrem', Keys.deadlines(), member)
  if not Notify.status then return 0 end
  local status = Notify.status(run_id)
  if status ~= 'running' then return 0 end
  Deadlines.missed(Keys.run(run_id), run_id, '')
  return 1
end

function Deadlines.job_entry(member, jid, due_at)
  local v = Job.hmget(jid, 'state', 'popped', 'wait_since', 'deadline', 'notify_run',
    'deadline_missed', 'counted')
  local state, seconds = v[1], tonumber(v[4])
  if not state or not seconds or v[6] then
    redis.call('zrem', Keys.deadlines(), member)
    return 0
  end
  if Deadlines.NOT_STARTED[state] then
    redis.call('zadd', Keys.deadlines(), Engine.now + seconds, member)
    return 0
  end
  if not Deadlines.ACTIVE[state] then
    redis.call('zrem', Keys.deadlines(), member)
    return 0
  end
  local started = tonumber(state == 'awaiting' and v[3] or v[2]) or due_at - seconds
  if Engine.now < started + seconds then
    redis.call('zadd', Keys.deadlines(), started + seconds, member)
    return 0
  end
  redis.call('zrem', Keys.deadlines(), member)
  -- Its run: `notify_run` is there only when its rules ask for other kinds too; a job of a
  -- run is counted in it (`counted` = '<class> <run id>'), so a rule on deadline alone hears.
  local run_id = v[5] or RunCounts.run_in(v[7]) or ''
  Deadlines.missed(Keys.job(jid), run_id, jid)
  return 1
end

function Deadlines.sweep(limit)
  local due = redis.call('zrangebyscore', Keys.deadlines(), '-inf', Engine.now,
    'WITHSCORES', 'LIMIT', 0, limit)
  local count = 0
  for i = 1, #due, 2 do
    local member, score = due[i], tonumber(due[i + 1])
    local kind, id = string.sub(member, 1, 1), string.sub(member, 3)
    if kind == 'r' then
      count = count + Deadlines.run_entry(member, id)
    else
      count = count + Deadlines.job_entry(member, id, score)
    end
  end
  return count, #due / 2
end
