-- run.counts, run.recount: a run's kept counts against a scan of its jobs (ours).
--
--   run.counts  run_id -> JSON {kept: {field: n}, scanned: {field: n}, drifted} (fields as
--                         include/run_counts.lua keeps them, without the steps' places; `kept`
--                         is null for a run without counts; `drifted`: kept counts that differ
--                         from the scan, what doctor repairs), or nil when there is no such run
--   run.recount run_id -> JSON {differed: [field], jobs: n}: the kept counts rewritten from a
--                         scan (a run without counts gets them), the fields that differed and
--                         how many jobs' `counted` was wrong; nil when there is no such run
--
-- The counts are what the decider reads (include/run_state.lua); they drift only if a write of
-- a job's state escaped RunCounts.touch, which this check finds and repairs.
-- Errors: INVALID.
-- @include args
-- @include run_counts

local function run_arg(cmd, args)
  local run_id = Arg.id(cmd, 'run_id', args[1])
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  if redis.call('exists', Keys.run(run_id)) == 0 then return nil end
  return run_id
end

api['run.counts'] = function(args)
  local run_id = run_arg('RunCounts', args)
  if not run_id then return nil end
  local kept, scanned = RunCounts.kept(run_id), RunCounts.recount(run_id)
  local drifted = RunCounts.counting(run_id) and RunCounts.differ(kept, scanned)
  return cjson.encode({ kept = kept or cjson.null, scanned = scanned, drifted = drifted })
end

api['run.recount'] = function(args)
  local run_id = run_arg('RunRecount', args)
  if not run_id then return nil end
  local differed, jobs = RunCounts.rebuild(run_id)
  return cjson.encode({ differed = differed, jobs = jobs })
end
