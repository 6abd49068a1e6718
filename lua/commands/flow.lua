-- flow.submit, run.get, runs: a whole flow run written at once, and reading runs back (ours).
--
--   flow.submit run_id, run JSON object, jobs JSON           -> 'submitted', or 'exists'
--                                                              (jobs: an array of job objects,
--                                                              or {shared, jobs}: the fields
--                                                              every job has alike once)
--   run.get     run_id [offset count]                       -> JSON {id, flow, submitted, jobs
--                                                              (how many), ..., jids: [jid]}, or nil
--                                                              (jids: those that are jids,
--                                                              RunState.jids); with offset and
--                                                              count (at most 1000), a page of
--                                                              them, without the graph, and
--                                                              jids_next: the next page's offset
--                                                              (null at the end)
--   runs        [flow], [offset=0], [count=25]              -> JSON list of run records, newest
--                                                              first (without their jobs and
--                                                              their graph: run.read has it)
--   runs.statuses [flow], [offset=0], [count=25]            -> the same records, each with its
--                                                              `status` as Runs.status decides it
--                                                              (ours; count at most 1000)
--
-- flow.submit writes the run record and every job in this one call, so no reader ever sees half
-- a run, and a run id that exists already makes it a no-op ('exists'): submitting the same run
-- twice never duplicates it. Each job is checked exactly as `put` checks its arguments, all of
-- them before the first write; include/runs.lua (shared with schedule.fire) states the job
-- objects, the run object and the run id's rules. A run object with `max_active_runs` (the
-- flow's concurrency.max_active_runs) is refused while that many of the flow's runs are active
-- (WRONGSTATE, naming the limit and the active runs; nothing written).
-- Errors: INVALID, TOOLARGE, WRONGSTATE.
-- @include runs
-- @include run_state

api['flow.submit'] = function(args)
  return Runs.submit('FlowSubmit', args[1], args[2], args[3])
end

api['run.get'] = function(args)
  local run_id = Runs.id('RunGet', args[1])
  local paged = args[2] ~= nil
  local offset = Arg.optional_integer('RunGet', 'offset', args[2], 0, 0, Engine.MAX_OFFSET)
  local count = Arg.optional_integer('RunGet', 'count', args[3], 1000, 1, 1000)
  if args[4] ~= nil then Arg.fail('RunGet', 'too many arguments') end
  local record = RunState.record(run_id)
  if not record then return nil end
  if not paged then
    record.jids = RunState.jids(run_id)
    return cjson.encode(record)
  end
  -- A page, as a listing is: a big run's jids (and its graph) are not read whole.
  local key = Keys.run_jobs(run_id)
  local raw = redis.call('lrange', key, offset, offset + count - 1)
  local following = offset + #raw
  record.graph = nil
  record.jids = Arg.jids_in(raw)
  record.jids_next = following < redis.call('llen', key) and following or cjson.null
  return cjson.encode(record)
end

-- The newest run records (of a flow), a page; `with_status`: each with Runs.status.
local function list_runs(cmd, args, max_count, with_status)
  local key = Keys.runs()
  if args[1] ~= nil and args[1] ~= '' then key = Keys.flow_runs(Arg.id(cmd, 'flow', args[1])) end
  local offset = Arg.optional_integer(cmd, 'offset', args[2], 0, 0, Engine.MAX_OFFSET)
  local count = Arg.optional_integer(cmd, 'count', args[3], 25, 0, max_count)
  if with_status and args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local out = {}
  if count > 0 then
    for _, run_id in ipairs(redis.call('zrevrange', key, offset, offset + count - 1)) do
      local record = RunState.record(run_id)
      if record then
        -- A listing is a summary: a run's graph (megabytes for a big flow) is read with the run.
        record.graph = nil
        if with_status then record.status = Runs.status(run_id) end
        table.insert(out, record)
      end
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

api['runs'] = function(args)
  return list_runs('Runs', args, Engine.MAX_COUNT, false)
end

-- A running run costs a few reads (its first active job ends the look), a finished one a read
-- per job: the REST API's run listing and the metrics' flows_runs.
api['runs.statuses'] = function(args)
  return list_runs('RunsStatuses', args, 1000, true)
end
