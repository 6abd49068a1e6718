-- doctor.names, doctor.index, doctor.jobs: the consistency check's findings, one bounded page
-- per call (ours, after Redis Work Queue's light and deep cleaning; scheduler/engine/doctor.py
-- drives it, `flows doctor` runs it). Each job must be in exactly one state index, the one its
-- hash names (include/doctor.lua).
--
--   doctor.names  what, [offset=0], [count=500]  -> JSON list of names; what: queues (known
--                                                   queues), workers (in `workers`), groups (in
--                                                   `failures`)
--   doctor.index  index, name, [offset=0], [count=500] -> JSON {read, findings}: checks one page
--                 of an index against the jobs it lists. index: work, fifo, parked, scheduled,
--                 depends, locks, buried (name: a queue), worker (a worker's jobs), completed,
--                 expired, awaiting (name ''), failed (a group; the reply also has the page's
--                 `jids`), run-jobs (a run's job list: name the run id), tag (a tag's jobs:
--                 name the tag), tracked (name ''); of the last three only entries that are
--                 no jid reported
--   doctor.jobs   jid...                          -> JSON {findings, failed: [[jid, group]...],
--                                                   skipped}: checks jobs (at most 1000); the
--                                                   list membership of failed jobs is left to the
--                                                   caller, who reads the failed lists anyway
--
-- Findings are {kind, jid, index, name, detail}; the kinds, and how doctor.repair repairs each,
-- are listed in commands/doctor_repair.lua.
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include doctor

Doctor.MAX_PAGE = 1000
Doctor.NAMES = {
  queues = function(o, c) return redis.call('zrange', Keys.queues(), o, o + c - 1) end,
  workers = function(o, c) return redis.call('zrange', Keys.workers(), o, o + c - 1) end,
  groups = function(o, c)
    local all = redis.call('smembers', Keys.failures())
    table.sort(all)
    local out = {}
    for i = o + 1, math.min(#all, o + c) do table.insert(out, all[i]) end
    return out
  end,
}

function Doctor.encode(list)
  if #list == 0 then return '[]' end
  return cjson.encode(list)
end

function Doctor.page_args(cmd, args, first)
  local offset = Arg.optional_integer(cmd, 'offset', args[first], 0, 0, Engine.MAX_OFFSET)
  local count = Arg.optional_integer(cmd, 'count', args[first + 1], 500, 1, Doctor.MAX_PAGE)
  if args[first + 2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  return offset, count
end

-- The index and name of a call, checked.
function Doctor.index_args(cmd, index, name)
  local names = Doctor.INDEXES[index]
  if not names then
    Arg.fail(cmd, 'Arg "index" must be one of work, fifo, parked, scheduled, depends, locks, ' ..
      'buried, worker, completed, expired, awaiting, failed, run-jobs, tag, tracked: ' ..
      Arg.shown(index))
  end
  if names == 'none' then
    if name ~= nil and name ~= '' then Arg.fail(cmd, 'Arg "name" must be empty for index ' .. index) end
    return index, ''
  end
  return index, Arg.id(cmd, 'name', name)
end

api['doctor.names'] = function(args)
  local cmd = 'DoctorNames'
  local what = Arg.present(cmd, 'what', args[1])
  local lister = Doctor.NAMES[what]
  if not lister then Arg.fail(cmd, 'Arg "what" must be one of queues, workers, groups: ' .. Arg.shown(what)) end
  local offset, count = Doctor.page_args(cmd, args, 2)
  return Doctor.encode(lister(offset, count))
end

-- One entry of an index, checked against its job.
function Doctor.check_entry(index, name, jid)
  if not Arg.is_jid(jid) then
    return Doctor.finding('bad-id', jid, index, name,
      'an entry no command takes as a jid: ' .. string.format('%q', jid))
  end
  if Doctor.IDS_ONLY[index] then return nil end
  local fields = Doctor.read(jid)
  if not fields then
    return Doctor.finding('missing-job', jid, index, name, 'listed, but there is no such job')
  end
  local trouble, unknown = Doctor.judge(fields)
  if unknown then return nil end
  if trouble then return Doctor.finding('stray-entry', jid, index, name, trouble) end
  if not Doctor.expected(index, name, fields) then
    return Doctor.finding('stray-entry', jid, index, name, Doctor.describe(fields))
  end
  if index == 'locks' and fields.grace ~= '1' then
    local worker = fields.worker or ''
    if worker == '' then
      return Doctor.finding('orphan-lock', jid, index, name, 'the running job has no worker')
    end
    if not redis.call('zscore', Keys.worker_jobs(worker), jid) then
      return Doctor.finding('orphan-lock', jid, index, name,
        'the running job is missing from the jobs of its worker ' .. worker)
    end
  end
  return nil
end

-- What only the first page of an index checks: the index's own registration.
function Doctor.check_owner(index, name, findings)
  if index == 'failed' then
    local listed = redis.call('llen', Keys.failed(name)) > 0
    local known = redis.call('sismember', Keys.failures(), name) == 1
    if listed ~= known then
      table.insert(findings, Doctor.finding('failure-group', '', 'failures', name, listed and
        'the group has failed jobs but is missing from the failure groups' or
        'the group is listed among the failure groups but has no failed jobs'))
    end
  elseif index == 'worker' and redis.call('exists', Keys.worker_info(name)) == 1
      and not redis.call('zscore', Keys.workers(), name) then
    table.insert(findings, Doctor.finding('orphan-key', '', 'worker-info', name,
      'a registration of a worker that is not among the workers'))
  end
end

api['doctor.index'] = function(args)
  local cmd = 'DoctorIndex'
  local index, name = Doctor.index_args(cmd, Arg.present(cmd, 'index', args[1]), args[2])
  local offset, count = Doctor.page_args(cmd, args, 3)
  local key = Doctor.key(index, name)
  local jids
  if Doctor.LISTS[index] then
    jids = redis.call('lrange', key, offset, offset + count - 1)
  else
    jids = redis.call('zrange', key, offset, offset + count - 1)
  end
  local findings = {}
  if offset == 0 then Doctor.check_owner(index, name, findings) end
  for _, jid in ipairs(jids) do
    local finding = Doctor.check_entry(index, name, jid)
    if finding then table.insert(findings, finding) end
  end
  local reply = { read = #jids, findings = findings }
  -- A failed job's own check cannot afford to search its group's list: the caller compares.
  if index == 'failed' then reply.jids = jids end
  reply = string.gsub(cjson.encode(reply), '"findings":{}', '"findings":[]')
  return (string.gsub(reply, '"jids":{}', '"jids":[]'))
end

-- The dependency edges of a job, both ways.
function Doctor.check_edges(jid, fields, findings)
  for _, other in ipairs(redis.call('smembers', Keys.dependencies(jid))) do
    if redis.call('exists', Keys.job(other)) == 0 then
      table.insert(findings, Doctor.finding('dangling-dependency', jid, 'job', other,
        'waits for ' .. other .. ', which does not exist'))
    elseif redis.call('sismember', Keys.dependents(other), jid) == 0 then
      table.insert(findings, Doctor.finding('half-edge', jid, 'job', other,
        'waits for ' .. other .. ', which does not list it as a dependent'))
    end
  end
  for _, other in ipairs(redis.call('smembers', Keys.dependents(jid))) do
    if redis.call('exists', Keys.job(other)) == 0 then
      table.insert(findings, Doctor.finding('dangling-dependent', jid, 'job', other,
        'lists dependent ' .. other .. ', which does not exist'))
    elseif redis.call('sismember', Keys.dependencies(other), jid) == 0 then
      table.insert(findings, Doctor.finding('dangling-dependent', jid, 'job', other,
        'lists dependent ' .. other .. ', which does not wait for it'))
    end
  end
  if fields.state == 'depends' and redis.call('exists', Keys.dependencies(jid)) == 0 then
    table.insert(findings, Doctor.finding('stuck-depends', jid, 'job', '',
      'waits for dependencies, but has none left'))
  end
end

api['doctor.jobs'] = function(args)
  local cmd = 'DoctorJobs'
  if #args == 0 then Arg.fail(cmd, 'no jids given') end
  if #args > Doctor.MAX_PAGE then
    Err.raise('TOOLARGE', cmd .. '(): ' .. #args .. ' jids, more than the limit of ' .. Doctor.MAX_PAGE)
  end
  for _, jid in ipairs(args) do Arg.jid(cmd, 'jid', jid) end
  local findings, failed, skipped = {}, {}, 0
  for _, jid in ipairs(args) do
    local fields = Doctor.read(jid)
    if not fields then
      local left = Doctor.leftovers(jid)
      if #left > 0 then
        table.insert(findings, Doctor.finding('orphan-key', jid, 'job', '',
          'keys left by a job that does not exist: ' .. table.concat(left, ', ')))
      end
    else
      local trouble, unknown = Doctor.judge(fields)
      if unknown then
        skipped = skipped + 1
      else
        if trouble then
          table.insert(findings, Doctor.finding('bad-state', jid, 'job', '', trouble))
        elseif fields.state == 'failed' then
          table.insert(failed, { jid, Doctor.group(fields) })
        elseif not Doctor.indexed(jid, fields) then
          table.insert(findings, Doctor.finding('unindexed', jid, 'job', '',
            Doctor.describe(fields) .. ', but no index lists it'))
        end
        -- A job set aside keeps its edges: checked in the same pass, so one repair mends all.
        Doctor.check_edges(jid, fields, findings)
      end
    end
  end
  local reply = cjson.encode({ findings = findings, failed = failed, skipped = skipped })
  reply = string.gsub(reply, '"findings":{}', '"findings":[]')
  return (string.gsub(reply, '"failed":{}', '"failed":[]'))
end
