-- flow.submit, run.get, runs: a whole flow run written at once, and reading runs back (ours).
--
--   flow.submit run_id, run JSON object, jobs JSON array   -> 'submitted', or 'exists'
--   run.get     run_id                                      -> JSON {id, flow, ..., jobs: [jid]},
--                                                              or nil
--   runs        [flow], [offset=0], [count=25]              -> JSON list of run records, newest
--                                                              first (without their jobs)
--
-- flow.submit writes the run record and every job in this one call, so no reader ever sees half
-- a run, and a run id that exists already makes it a no-op ('exists'): submitting the same run
-- twice never duplicates it. Each job is {jid, queue, klass, data (JSON text), priority, tags,
-- retries, depends, delay}, checked exactly as `put` checks its arguments, all of them before the
-- first write; jobs come in dependency order (a job's depends name earlier jobs or existing ones).
-- The run object must have a string `flow`; its other fields are kept as given (strings, or
-- JSON text for tables).
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include putting

local MAX_JOBS_PER_RUN = 100000
local MAX_RUN_BYTES = 67108864 -- 64 MiB of job specs in one submission

local function spec_args(cmd, index, spec)
  if type(spec) ~= 'table' then Arg.fail(cmd, 'jobs[' .. index .. '] is not an object') end
  local function list(value) return cjson.encode(value or {}) end
  local args = { 'flows', spec.queue, spec.jid, spec.klass, spec.data, spec.delay or 0 }
  if spec.priority ~= nil then table.insert(args, 'priority'); table.insert(args, tostring(spec.priority)) end
  if spec.retries ~= nil then table.insert(args, 'retries'); table.insert(args, tostring(spec.retries)) end
  table.insert(args, 'tags'); table.insert(args, list(spec.tags))
  table.insert(args, 'depends'); table.insert(args, list(spec.depends))
  for i, value in ipairs(args) do
    if type(value) ~= 'string' then args[i] = tostring(value) end
  end
  return args
end

api['flow.submit'] = function(args)
  local cmd = 'FlowSubmit'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local _, run = Arg.json(cmd, 'run', args[2], 'object')
  if type(run.flow) ~= 'string' or run.flow == '' then Arg.fail(cmd, 'run.flow must be a non-empty string') end
  Arg.id(cmd, 'run.flow', run.flow)
  local _, specs = Arg.json(cmd, 'jobs', args[3], 'array', MAX_RUN_BYTES)
  if #specs == 0 then Arg.fail(cmd, 'a run needs at least one job') end
  if #specs > MAX_JOBS_PER_RUN then
    Err.raise('TOOLARGE', cmd .. '(): ' .. #specs .. ' jobs, more than the limit of ' .. MAX_JOBS_PER_RUN)
  end
  if redis.call('exists', Keys.run(run_id)) == 1 then return 'exists' end

  local puts, seen = {}, {}
  for i, spec in ipairs(specs) do
    local p = Put.parse(cmd .. ' jobs[' .. i .. ']', spec_args(cmd, i, spec))
    if seen[p.jid] then Arg.fail(cmd, 'job ' .. p.jid .. ' appears twice in the run') end
    if Job.exists(p.jid) then Arg.fail(cmd, 'job ' .. p.jid .. ' already exists') end
    for _, dependency in ipairs(p.depends) do
      if not seen[dependency] and not Job.exists(dependency) then
        Arg.fail(cmd, 'job ' .. p.jid .. ' depends on ' .. dependency ..
          ', which is neither earlier in the run nor an existing job')
      end
    end
    seen[p.jid] = true
    puts[i] = p
  end

  local key = Keys.run(run_id)
  redis.call('hset', key, 'id', run_id, 'submitted', Engine.now, 'jobs', #puts)
  for field, value in pairs(run) do
    if type(value) == 'table' then value = cjson.encode(value) end
    redis.call('hset', key, field, tostring(value))
  end
  for i = 1, #puts, 1000 do
    local batch = {}
    for j = i, math.min(i + 999, #puts) do table.insert(batch, puts[j].jid) end
    redis.call('rpush', Keys.run_jobs(run_id), unpack(batch))
  end
  redis.call('zadd', Keys.runs(), Engine.now, run_id)
  redis.call('zadd', Keys.flow_runs(run.flow), Engine.now, run_id)
  for _, p in ipairs(puts) do Put.write(p, nil) end
  Events.log({ event = 'run_submitted', run = run_id, flow = run.flow, jobs = #puts })
  return 'submitted'
end

local function run_record(run_id)
  local raw = redis.call('hgetall', Keys.run(run_id))
  if #raw == 0 then return nil end
  local record = {}
  for i = 1, #raw, 2 do record[raw[i]] = raw[i + 1] end
  record.submitted = tonumber(record.submitted)
  record.jobs = tonumber(record.jobs)
  return record
end

api['run.get'] = function(args)
  local run_id = Arg.id('RunGet', 'run_id', args[1])
  local record = run_record(run_id)
  if not record then return nil end
  record.jids = redis.call('lrange', Keys.run_jobs(run_id), 0, -1)
  return cjson.encode(record)
end

api['runs'] = function(args)
  local cmd = 'Runs'
  local key = Keys.runs()
  if args[1] ~= nil and args[1] ~= '' then key = Keys.flow_runs(Arg.id(cmd, 'flow', args[1])) end
  local offset = Arg.optional_integer(cmd, 'offset', args[2], 0, 0, nil)
  local count = Arg.optional_integer(cmd, 'count', args[3], 25, 0, Engine.MAX_COUNT)
  local out = {}
  if count > 0 then
    for _, run_id in ipairs(redis.call('zrevrange', key, offset, offset + count - 1)) do
      local record = run_record(run_id)
      if record then table.insert(out, record) end
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end
