-- doctor.repair: repairs one finding of the consistency check (commands/doctor.lua), in one call
-- that first checks the finding again, so a job that moved on meanwhile is left alone (ours).
--
--   doctor.repair kind, index, name, jid, [dry]   -> JSON {status, action}: repairs one finding
--                 after checking it again (status repaired, or gone when it no longer holds,
--                 or skipped when it needs a person); with dry 'dry' only checks (status found)
--
-- The kinds of finding (commands/doctor.lua: {kind, jid, index, name, detail}) and their repairs:
--   bad-id               an entry of an index, a run's job list, a    -> the entry is removed
--                        tag's jobs or the tracked set that is no
--                        jid (white space, a control character;
--                        written by an outside writer)
--   missing-job          an index entry without a job hash            -> the entry is removed
--   stray-entry          an entry the job's hash disagrees with       -> removed, and the job
--                        (another state, queue, worker or group)         put where its state says
--   duplicate-entry      a failed list lists a job twice              -> the older copies go
--   orphan-lock          a running job missing from its worker's jobs -> listed there again (no
--                        (index locks)                                   worker: its lock is taken
--                                                                        away, as timeout does)
--   unindexed            a job in none of the indexes its state names -> put there
--   bad-state            no state, no queue, a failure without group  -> set aside, failed in
--                                                                        group doctor-bad-state
--   dangling-dependency  jid waits for name, which does not exist     -> edge dropped (released
--                                                                        if it was the last one)
--   half-edge            jid waits for name, name does not list it    -> name lists it again (or
--                                                                        the edge goes, if name
--                                                                        completed)
--   dangling-dependent   jid lists dependent name, which does not     -> dropped from the list
--                        exist or does not wait for jid
--   stuck-depends        a job in depends waiting for nothing         -> waits again for its open
--                                                                        needs, else released
--   orphan-key           a job's history/dependency keys without the  -> deleted
--                        job (index job), a registration of a worker
--                        not in `workers` (index worker-info, name)
--   failure-group        a group with failed jobs missing from        -> added / removed
--                        `failures`, or listed there without any
--   run-counts           a run's kept counts differ from its jobs     -> counted again from them
--                        (index run, name: the run id)                   (RunCounts.rebuild)
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include doctor
-- @include run_counts

function Doctor.remove_entry(index, name, jid)
  if index == 'run-jobs' then
    redis.call('lrem', Keys.run_jobs(name), 0, jid)
  elseif index == 'fifo' then
    redis.call('lrem', Keys.fifo(name), 0, jid)
  elseif index == 'failed' then
    redis.call('lrem', Keys.failed(name), 0, jid)
    if redis.call('llen', Keys.failed(name)) == 0 then redis.call('srem', Keys.failures(), name) end
  else
    redis.call('zrem', Doctor.key(index, name), jid)
  end
end

function Doctor.fix_entry(t, dry)
  if not Doctor.listed(t.index, t.name, t.jid) then return 'gone' end
  local fields = Doctor.read(t.jid)
  if fields then
    local trouble, unknown = Doctor.judge(fields)
    if unknown then return 'skipped', 'the job is in state ' .. fields.state .. ', unknown to the check' end
    if not trouble and Doctor.expected(t.index, t.name, fields) then return 'gone' end
  end
  if dry then return 'found' end
  Doctor.remove_entry(t.index, t.name, t.jid)
  local action = 'removed from ' .. t.index .. (t.name ~= '' and (' ' .. t.name) or '')
  local more = fields and Doctor.ensure(t.jid)
  if more then action = action .. '; ' .. more end
  return 'repaired', action
end

function Doctor.fix_bad_id(t, dry)
  if Arg.is_jid(t.jid) or not Doctor.listed(t.index, t.name, t.jid) then return 'gone' end
  if dry then return 'found' end
  Doctor.remove_entry(t.index, t.name, t.jid)
  return 'repaired', 'removed from ' .. t.index .. (t.name ~= '' and (' ' .. t.name) or '')
end

function Doctor.fix_duplicate(t, dry)
  local positions = redis.call('lpos', Keys.failed(t.name), t.jid, 'COUNT', 0)
  if #positions < 2 then return 'gone' end
  if dry then return 'found' end
  redis.call('lrem', Keys.failed(t.name), 1 - #positions, t.jid)
  return 'repaired', 'removed ' .. (#positions - 1) .. ' older cop' .. (#positions == 2 and 'y' or 'ies')
end

function Doctor.fix_orphan_lock(t, dry)
  local fields = Doctor.read(t.jid)
  if not fields or fields.state ~= 'running' or fields.queue ~= t.name or fields.grace == '1'
      or not redis.call('zscore', Keys.locks(t.name), t.jid) then
    return 'gone'
  end
  local worker = fields.worker or ''
  if worker ~= '' and redis.call('zscore', Keys.worker_jobs(worker), t.jid) then return 'gone' end
  if dry then return 'found' end
  if worker ~= '' then
    redis.call('zadd', Keys.worker_jobs(worker), tonumber(fields.expires) or Engine.now, t.jid)
    return 'repaired', 'listed among the jobs of worker ' .. worker .. ' again'
  end
  -- As `timeout` does: nobody holds the lock, so the next pop or housekeeping reclaims the job.
  redis.call('hset', Keys.job(t.jid), 'expires', Engine.now, 'grace', 1, 'updated', Engine.now)
  redis.call('zadd', Keys.locks(t.name), Engine.now, t.jid)
  return 'repaired', 'its lock was taken away now: the next pop or housekeeping reclaims it'
end

function Doctor.fix_unindexed(t, dry)
  local fields = Doctor.read(t.jid)
  if not fields then return 'gone' end
  local trouble, unknown = Doctor.judge(fields)
  if unknown or trouble or Doctor.indexed(t.jid, fields) then return 'gone' end
  if dry then return 'found' end
  if fields.state == 'waiting' and fields.parked then
    return 'skipped', 'parked for a concurrency key or throttle: its slots decide where it waits'
  end
  return 'repaired', Doctor.ensure(t.jid)
end

function Doctor.fix_bad_state(t, dry)
  local fields = Doctor.read(t.jid)
  if not fields then return 'gone' end
  local trouble = Doctor.judge(fields)
  if not trouble then return 'gone' end
  if dry then return 'found' end
  return 'repaired', Doctor.set_aside(t.jid, fields, trouble)
end

-- After an edge went: the job may have nothing left to wait for.
function Doctor.after_edge(action, jid)
  local status, more = Doctor.unstick(jid)
  if more then return status, action .. '; ' .. more end
  return 'repaired', action
end

function Doctor.fix_dangling_dependency(t, dry)
  if redis.call('sismember', Keys.dependencies(t.jid), t.name) == 0
      or redis.call('exists', Keys.job(t.name)) == 1 then
    return 'gone'
  end
  if dry then return 'found' end
  redis.call('srem', Keys.dependencies(t.jid), t.name)
  redis.call('srem', Keys.dependents(t.name), t.jid)
  return Doctor.after_edge('no longer waits for ' .. t.name, t.jid)
end

function Doctor.fix_half_edge(t, dry)
  if redis.call('sismember', Keys.dependencies(t.jid), t.name) == 0
      or redis.call('sismember', Keys.dependents(t.name), t.jid) == 1 then
    return 'gone'
  end
  local state = Job.state(t.name)
  if not state then return 'gone' end -- the dependency is gone: a dangling-dependency now
  if dry then return 'found' end
  if state == 'complete' then
    redis.call('srem', Keys.dependencies(t.jid), t.name)
    return Doctor.after_edge('no longer waits for ' .. t.name .. ' (complete)', t.jid)
  end
  redis.call('sadd', Keys.dependents(t.name), t.jid)
  return 'repaired', t.name .. ' lists it as a dependent again'
end

function Doctor.fix_dangling_dependent(t, dry)
  if redis.call('sismember', Keys.dependents(t.jid), t.name) == 0 then return 'gone' end
  if redis.call('exists', Keys.job(t.name)) == 1
      and redis.call('sismember', Keys.dependencies(t.name), t.jid) == 1 then
    return 'gone'
  end
  if dry then return 'found' end
  redis.call('srem', Keys.dependents(t.jid), t.name)
  return 'repaired', 'no longer lists ' .. t.name .. ' as a dependent'
end

function Doctor.fix_stuck(t, dry)
  local fields = Doctor.read(t.jid)
  if not fields or fields.state ~= 'depends' or redis.call('exists', Keys.dependencies(t.jid)) == 1 then
    return 'gone'
  end
  if dry then return 'found' end
  return Doctor.unstick(t.jid)
end

function Doctor.fix_orphan_key(t, dry)
  if t.index == 'worker-info' then
    if redis.call('exists', Keys.worker_info(t.name)) == 0 or redis.call('zscore', Keys.workers(), t.name) then
      return 'gone'
    end
    if dry then return 'found' end
    redis.call('del', Keys.worker_info(t.name))
    return 'repaired', 'deleted the registration'
  end
  if redis.call('exists', Keys.job(t.jid)) == 1 then return 'gone' end
  local left = Doctor.leftovers(t.jid)
  if #left == 0 then return 'gone' end
  if dry then return 'found' end
  redis.call('del', Keys.history(t.jid), Keys.dependencies(t.jid), Keys.dependents(t.jid))
  return 'repaired', 'deleted ' .. table.concat(left, ', ')
end

function Doctor.fix_failure_group(t, dry)
  local listed = redis.call('llen', Keys.failed(t.name)) > 0
  local known = redis.call('sismember', Keys.failures(), t.name) == 1
  if listed == known then return 'gone' end
  if dry then return 'found' end
  if listed then
    redis.call('sadd', Keys.failures(), t.name)
    return 'repaired', 'added to the failure groups'
  end
  redis.call('srem', Keys.failures(), t.name)
  return 'repaired', 'removed from the failure groups'
end

-- A run whose kept counts drifted from its jobs: counted again.
function Doctor.fix_run_counts(t, dry)
  if redis.call('exists', Keys.run(t.name)) == 0 or not RunCounts.drifted(t.name) then
    return 'gone'
  end
  if dry then return 'found' end
  local differed = RunCounts.rebuild(t.name)
  return 'repaired', 'counted again (' .. table.concat(differed, ', ') .. ')'
end

-- kind -> {repair, the indexes its findings name, what `name` is: id, jid or none}
Doctor.ENTRY_INDEXES = { work = true, fifo = true, parked = true, scheduled = true, depends = true,
  locks = true, buried = true, worker = true, completed = true, expired = true, awaiting = true,
  failed = true }
Doctor.BAD_ID_INDEXES = { work = true, fifo = true, parked = true, scheduled = true, depends = true,
  locks = true, buried = true, worker = true, completed = true, expired = true, awaiting = true,
  failed = true, ['run-jobs'] = true, tag = true, tracked = true }
Doctor.REPAIRS = {
  ['bad-id'] = { Doctor.fix_bad_id, Doctor.BAD_ID_INDEXES },
  ['missing-job'] = { Doctor.fix_entry, Doctor.ENTRY_INDEXES },
  ['stray-entry'] = { Doctor.fix_entry, Doctor.ENTRY_INDEXES },
  ['duplicate-entry'] = { Doctor.fix_duplicate, { failed = true } },
  ['orphan-lock'] = { Doctor.fix_orphan_lock, { locks = true } },
  ['unindexed'] = { Doctor.fix_unindexed, { job = true } },
  ['bad-state'] = { Doctor.fix_bad_state, { job = true } },
  ['dangling-dependency'] = { Doctor.fix_dangling_dependency, { job = true }, 'jid' },
  ['half-edge'] = { Doctor.fix_half_edge, { job = true }, 'jid' },
  ['dangling-dependent'] = { Doctor.fix_dangling_dependent, { job = true }, 'jid' },
  ['stuck-depends'] = { Doctor.fix_stuck, { job = true } },
  ['orphan-key'] = { Doctor.fix_orphan_key, { job = true, ['worker-info'] = true } },
  ['failure-group'] = { Doctor.fix_failure_group, { failures = true } },
  ['run-counts'] = { Doctor.fix_run_counts, { run = true } },
}

-- The target of a repair, checked: {index, name, jid}.
function Doctor.repair_target(cmd, kind, index, name, jid)
  local spec = Doctor.REPAIRS[kind]
  if not spec[2][index] then Arg.fail(cmd, 'Arg "index" ' .. Arg.shown(index) .. ' does not go with kind ' .. kind) end
  local t = { index = index, name = '', jid = '' }
  if index == 'run' then
    t.name = Arg.name(cmd, 'name', name)
    if jid ~= nil and jid ~= '' then Arg.fail(cmd, 'Arg "jid" must be empty for index run') end
    return t
  end
  if index == 'job' then
    t.jid = Arg.jid(cmd, 'jid', jid)
    if spec[3] == 'jid' then t.name = Arg.jid(cmd, 'name', name)
    elseif name ~= nil and name ~= '' then Arg.fail(cmd, 'Arg "name" must be empty for kind ' .. kind) end
    return t
  end
  if Doctor.INDEXES[index] == 'none' then
    if name ~= nil and name ~= '' then Arg.fail(cmd, 'Arg "name" must be empty for index ' .. index) end
  else
    t.name = Arg.id(cmd, 'name', name)
  end
  if index == 'worker-info' or index == 'failures' then
    if jid ~= nil and jid ~= '' then Arg.fail(cmd, 'Arg "jid" must be empty for index ' .. index) end
  elseif kind == 'bad-id' then
    -- The entry as it is listed: what makes it no jid is why it is repaired.
    t.jid = Arg.text(cmd, 'jid', jid)
  else
    t.jid = Arg.jid(cmd, 'jid', jid)
  end
  return t
end

api['doctor.repair'] = function(args)
  local cmd = 'DoctorRepair'
  local kind = Arg.present(cmd, 'kind', args[1])
  if not Doctor.REPAIRS[kind] then Arg.fail(cmd, 'Arg "kind" is not a kind of finding: ' .. Arg.shown(kind)) end
  local index = Arg.present(cmd, 'index', args[2])
  local t = Doctor.repair_target(cmd, kind, index, args[3], args[4])
  local dry = args[5]
  if dry ~= nil and dry ~= '' and dry ~= 'dry' then Arg.fail(cmd, 'Arg "dry" must be dry or empty: ' .. Arg.shown(dry)) end
  if args[6] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local status, action = Doctor.REPAIRS[kind][1](t, dry == 'dry')
  return cjson.encode({ status = status, action = action or '' })
end
