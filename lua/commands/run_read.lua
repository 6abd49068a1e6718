-- run.read: a whole run in one reply, as the one decider sees it (ours).
--
--   run.read run_id [limit=100] [offsets JSON object {step: offset}]
--     -> JSON {record, status, counts, actions, graph, steps: [{step, status, counts, total,
--        attempts, started, finished, duration, child, deadline_missed, actions, offset, next,
--        jobs: [{jid, state, status, attempts, started, updated, child, deadline_missed,
--        actions, outputs, failure, earlier: [{attempt, record}]}]}]}, or nil when there is no
--        such run (a step's deadline_missed: the earliest miss of its jobs' `deadline:`)
--
-- Each status and action list is decided by include/run_state.lua (the tables of
-- docs/pages/statuses.md). A step lists `limit` of its jobs (0 to 1000) from its offset in
-- `offsets` (default 0); `next` is the offset of its next page (null at the end), so a reader
-- pages through a 10,000-item step instead of receiving it whole; a run's counts
-- (include/run_counts.lua) make the read cost the same for 10 jobs and 10,000. `graph` is the
-- flow's graph as the run was submitted: the run record's `graph`, its JSON text as stored (as
-- `runs` and `runs.statuses` list it; decoding and encoding it again would turn its empty lists
-- into {}), null for runs submitted without one. The same holds for a job's `outputs` (its
-- result's text, null for none) and each earlier attempt's `record` (the JSON text run.rerun
-- kept: {status, updated, result, failure}): the reader decodes them.
--
--   run.job run_id jid -> JSON {status, actions, step}: one job of the run as the same decider
--                         sees it (the job page's buttons) and its step as run.read gives it
--                         (without its jobs; null when the run has no step of that name), or
--                         nil when there is no such run
-- Errors: INVALID.
-- @include args
-- @include run_state

api['run.read'] = function(args)
  local cmd = 'RunRead'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local limit = Arg.optional_integer(cmd, 'limit', args[2], 100, 0, 1000)
  local offsets
  if args[3] ~= nil and args[3] ~= '' then
    local _, value = Arg.json(cmd, 'offsets', args[3], 'object')
    offsets = value
    for step, offset in pairs(offsets) do
      if type(offset) ~= 'number' or offset < 0 or offset ~= math.floor(offset) then
        Arg.fail(cmd, 'offsets.' .. Arg.shown(step) .. ' must be an integer >= 0')
      end
    end
  end
  if args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local run = RunState.read(run_id, limit, offsets)
  if not run then return nil end
  return cjson.encode(run)
end

api['run.job'] = function(args)
  local cmd = 'RunJob'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local jid = Arg.jid(cmd, 'jid', args[2])
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local read = RunState.read(run_id, 0)
  if not read then return nil end
  local status, actions = RunState.job_view(run_id, read, jid)
  local name, step = RunCounts.step_of(run_id, jid), cjson.null
  for _, each in ipairs(read.steps) do
    if each.step == name then step = each end
  end
  return cjson.encode({ status = status, actions = actions, step = step })
end
