-- notify: the outbox of notifications, written in the call that changes the state they tell of.
--
-- A flow run whose file declares `notify:` rules is submitted with its rules in the run record
-- (field `notify`, JSON: read only by the deliverer) and, on each job a rule can concern, two
-- fields: `notify` (the kinds this job emits, space separated: `failure`, `success`,
-- `awaiting`, and `run` for the run's own end) and `notify_run` (its run id). A job without
-- `notify` costs nothing but the field's read. The entries go to the stream `P notify:outbox`
-- with fields {kind, run, jid, at} (and `exhausted`: `retry` or `lock` when a failure used up
-- the job's retries); the stream entry's id is the event's id, stable across deliveries.
--
--   Notify.job(jid, kind, fields, exhausted) -> the job's event, when it asks for this kind
--       (`skipped` and `expired`, include/ttl.lua, are never told, but may end the run);
--       `fields` may hold `notify` and `notify_run` already read (else they are read here)
--   Notify.run(run_id, jid)                  -> `run_success` / `run_failure` once the job's run
--       ended so (once per ending: the run record's `notified` says which was last told),
--       looked at once per run and call by Notify.settle, after the call's counts settled
--   Notify.parse(cmd, spec)                  -> the checked `notify` text of a job spec
-- Runs.status, which Notify.run needs, is set as Notify.status by include/runs.lua (included
-- later; runs.lua includes this file through failing.lua).
-- @include keys
-- @include engine
-- @include args
-- @include job
local Notify = {}

Notify.KINDS = { failure = true, success = true, awaiting = true, run = true }
Notify.status = nil

function Notify.read(jid, fields)
  if fields and fields.notify ~= nil then return fields.notify, fields.notify_run end
  local v = redis.call('hmget', Keys.job(jid), 'notify', 'notify_run')
  return v[1] or false, v[2] or false
end

function Notify.wants(flags, kind)
  return string.find(' ' .. flags .. ' ', ' ' .. kind .. ' ', 1, true) ~= nil
end

function Notify.add(kind, run_id, jid, exhausted)
  local entry = { 'kind', kind, 'run', run_id, 'jid', jid, 'at', string.format('%.17g', Engine.now) }
  if exhausted then
    table.insert(entry, 'exhausted')
    table.insert(entry, exhausted)
  end
  redis.call('xadd', Keys.outbox(), '*', unpack(entry))
end

function Notify.job(jid, kind, fields, exhausted)
  local flags, run_id = Notify.read(jid, fields)
  if not flags or not run_id then return end
  if Notify.wants(flags, kind) then Notify.add(kind, run_id, jid, exhausted) end
  if kind ~= 'awaiting' and Notify.wants(flags, 'run') then
    Notify.run(run_id, jid)
  end
end

-- Whether a job of the run is waiting, scheduled, running or awaiting: every end of a run's job
-- asks, so the decider (Runs.status) is left for when none is. The run's counts say it in one
-- read once the call's changes are settled; a run whose counts are not kept (submitted before
-- they were, or with jobs they do not see) gets a quick look instead, newest jobs first (a
-- fan-out's last items, a chain's next steps are the ones still going), at up to 1,000 jobs.
Notify.GOING = { waiting = true, scheduled = true, running = true, awaiting = true }
function Notify.still_going(run_id)
  local counts = Keys.run_counts(run_id)
  if redis.call('exists', counts) == 1 then
    -- `scheduled` is counted as waiting (RunCounts.class).
    local n = redis.call('hmget', counts, 'running', 'waiting', 'awaiting', '!unkept')
    if not n[4] then
      return (tonumber(n[1]) or 0) + (tonumber(n[2]) or 0) + (tonumber(n[3]) or 0) > 0
    end
  end
  local key, stop, page = Keys.run_jobs(run_id), -1, 10
  while stop > -1000 do
    local jids = redis.call('lrange', key, stop - page + 1, stop)
    for i = #jids, 1, -1 do
      -- (an entry that is no jid is no job of the run: RunState.jids)
      if Arg.is_jid(jids[i]) and Notify.GOING[Job.state(jids[i])] then
        return true
      end
    end
    if #jids < page then return false end
    stop, page = stop - page, 100
  end
  return false
end

-- The runs whose end may have come in this call, in the order first asked (`ended`: run id ->
-- the last job whose end asked); reset by the dispatch.
Notify.ending, Notify.ended = {}, {}
function Notify.reset()
  Notify.ending, Notify.ended = {}, {}
end

-- A job of `run_id` ended: its run's end is looked at when the call is done (Notify.settle),
-- once however many of its jobs ended in the call, and with the call's counts settled.
function Notify.run(run_id, jid)
  if not Notify.status then return end
  if not Notify.ended[run_id] then Notify.ending[#Notify.ending + 1] = run_id end
  Notify.ended[run_id] = jid
end

-- The run's end, told once: a retried run that then succeeds is told again.
local function tell_end(run_id, jid)
  if Notify.still_going(run_id) then return end
  local status = Notify.status(run_id)
  if status ~= 'succeeded' and status ~= 'failed' then return end
  local key = Keys.run(run_id)
  if redis.call('hget', key, 'notified') == status then return end
  redis.call('hset', key, 'notified', status)
  Notify.add(status == 'succeeded' and 'run_success' or 'run_failure', run_id, jid)
end

-- The dispatch calls it after RunCounts.settle: each run a job's end asked about in this call.
function Notify.settle()
  if #Notify.ending == 0 then return end
  local ending, ended = Notify.ending, Notify.ended
  Notify.reset()
  for _, run_id in ipairs(ending) do tell_end(run_id, ended[run_id]) end
end

-- A missed deadline of the run (`jid` '') or of one of its jobs: told when the run has rules.
function Notify.deadline(run_id, jid)
  if run_id == '' or redis.call('hexists', Keys.run(run_id), 'notify') == 0 then return end
  Notify.add('deadline', run_id, jid)
end

function Notify.parse(cmd, value)
  if value == nil or value == cjson.null then return nil end
  if type(value) ~= 'string' or #value > 64 then
    Arg.fail(cmd, 'Arg "notify" must be a text of at most 64 characters')
  end
  for kind in string.gmatch(value, '%S+') do
    if not Notify.KINDS[kind] then Arg.fail(cmd, 'Arg "notify": unknown kind "' .. kind .. '"') end
  end
  return value
end
