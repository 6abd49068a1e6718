-- doctor: where each job belongs and how the consistency check repairs what disagrees (the
-- checks are commands/doctor.lua; scheduler/engine/doctor.py drives them).
--
-- A job's hash is the truth: its state names the one index that lists it (include/job.lua's
-- header). An index entry is *expected* when the hash agrees with it:
--   work and fifo (include/work.lua) / parked / scheduled / depends / locks / buried of queue q:
--       state waiting (not parked) /
--       waiting and parked for a slot (include/slots.lua) / scheduled / depends / running /
--       buried, and queue q
--   worker jobs of w: state running, worker w, and no grace period (the worker was not yet told
--                     it lost the lock; a warned worker's jobs leave its list)
--   completed / expired: state complete / expired     failed list of group g: failed in group g
--   awaiting: state awaiting (a wait that awaits its signal: include/waits.lua)
-- Every entry must also be a jid (Arg.is_jid): an outside writer may leave one with white space
-- or a control character, which no command takes back (finding bad-id). Three more lists of jobs
-- are checked for that alone (Doctor.IDS_ONLY): a run's job list (index run-jobs: a run's job
-- may be gone), a tag's jobs (tag) and the tracked set (tracked: a job there may be gone,
-- `track` reports it expired).
-- The per-key and per-throttle parked sets are the slots' own (include/slots.lua): not checked.
-- A job in a state this file does not know (one added by a later feature) is never reported nor
-- repaired, and its index entries are left alone.
--
-- Repairs are conservative: nothing is deleted that still has a job; a job whose hash is unusable
-- is set aside as failed in group `doctor-bad-state` (kept, visible, requeueable); each repair is
-- checked again inside its own call, so a problem that went away meanwhile is left alone.
-- @include keys
-- @include engine
-- @include events
-- @include job
-- @include queue
-- @include failing
local Doctor = {}

Doctor.BAD_STATE_GROUP = 'doctor-bad-state'
-- The queue indexes, by name: the state of the jobs each lists.
Doctor.QUEUE_INDEXES = { work = 'waiting', fifo = 'waiting', parked = 'waiting',
  scheduled = 'scheduled', depends = 'depends', locks = 'running', buried = 'buried' }
-- Every index the doctor reads, and what names one: a queue, a worker, a group, or nothing.
Doctor.INDEXES = { work = 'queue', fifo = 'queue', parked = 'queue', scheduled = 'queue',
  depends = 'queue', locks = 'queue', buried = 'queue', worker = 'worker', completed = 'none',
  expired = 'none', awaiting = 'none', failed = 'group', ['run-jobs'] = 'run', tag = 'tag',
  tracked = 'none' }
-- The indexes whose entries are checked for being jids alone (see the header).
Doctor.IDS_ONLY = { ['run-jobs'] = true, tag = true, tracked = true }
-- The indexes that are lists (the others are sorted sets).
Doctor.LISTS = { failed = true, ['run-jobs'] = true, fifo = true }
-- The states the doctor knows.
Doctor.STATES = { waiting = true, scheduled = true, depends = true, running = true, complete = true,
  failed = true, buried = true, expired = true, awaiting = true }
-- The queue index of each state that has one (a parked waiting job: 'parked').
Doctor.STATE_INDEX = { waiting = 'work', scheduled = 'scheduled', depends = 'depends', running = 'locks',
  buried = 'buried' }
Doctor.FIELDS = { 'state', 'queue', 'worker', 'grace', 'failure', 'expires', 'priority', 'delay',
  'updated', 'created', 'trigger', 'needs', 'parked', 'wait_at' }

function Doctor.key(index, name)
  if index == 'work' then return Keys.work(name) end
  if index == 'fifo' then return Keys.fifo(name) end
  if index == 'scheduled' then return Keys.scheduled(name) end
  if index == 'depends' then return Keys.depends(name) end
  if index == 'locks' then return Keys.locks(name) end
  if index == 'parked' then return Keys.parked(name) end
  if index == 'buried' then return Keys.buried(name) end
  if index == 'worker' then return Keys.worker_jobs(name) end
  if index == 'completed' then return Keys.completed() end
  if index == 'expired' then return Keys.expired() end
  if index == 'awaiting' then return Keys.awaiting() end
  if index == 'run-jobs' then return Keys.run_jobs(name) end
  if index == 'tag' then return Keys.tag(name) end
  if index == 'tracked' then return Keys.tracked() end
  return Keys.failed(name)
end

-- The job's fields (state may be nil: a hash without one), or nil when there is no hash.
function Doctor.read(jid)
  local values = Job.hmget(jid, unpack(Doctor.FIELDS))
  local fields, any = {}, false
  for i, name in ipairs(Doctor.FIELDS) do
    if values[i] then fields[name] = values[i]; any = true end
  end
  if not any and redis.call('exists', Keys.job(jid)) == 0 then return nil end
  fields.updated = fields.updated or fields.created -- a new job's is its created
  return fields
end

-- The failure group of a failed job's fields, or nil.
function Doctor.group(fields)
  if not fields.failure or fields.failure == '' then return nil end
  local ok, failure = pcall(cjson.decode, fields.failure)
  if ok and type(failure) == 'table' and type(failure.group) == 'string' and failure.group ~= '' then
    return failure.group
  end
  return nil
end

-- Why the hash cannot be indexed (nil when it can). The second result is true for a state the
-- doctor does not know: such a job is left alone.
function Doctor.judge(fields)
  local state = fields.state
  if not state or state == '' then return 'the job has no state', false end
  if not Doctor.STATES[state] then return nil, true end
  if Doctor.STATE_INDEX[state] and (not fields.queue or fields.queue == '') then
    return 'the job is ' .. state .. ' but has no queue', false
  end
  if state == 'failed' and not Doctor.group(fields) then
    return 'the job is failed but has no failure group', false
  end
  return nil, false
end

-- The queue index a usable job's state names (nil for complete, expired, failed).
function Doctor.state_index(fields)
  if fields.state == 'waiting' and fields.parked then return 'parked' end
  return Doctor.STATE_INDEX[fields.state]
end

-- Whether the index entry (index, name) agrees with the job's fields (a waiting job's index is
-- `work`, which stands for both its keys).
function Doctor.expected(index, name, fields)
  local state = fields.state
  if Doctor.QUEUE_INDEXES[index] then
    return state == Doctor.QUEUE_INDEXES[index] and fields.queue == name
      and Doctor.state_index(fields) == (index == 'fifo' and 'work' or index)
  end
  if index == 'worker' then
    return state == 'running' and fields.worker == name and fields.grace ~= '1'
  end
  if index == 'completed' then return state == 'complete' end
  if index == 'expired' then return state == 'expired' end
  if index == 'awaiting' then return state == 'awaiting' end
  return state == 'failed' and Doctor.group(fields) == name
end

-- What a job's hash says, for messages.
function Doctor.describe(fields)
  local text = 'the job is ' .. tostring(fields.state)
  if fields.state == 'waiting' and fields.parked then text = text .. ' (parked for a slot)' end
  if fields.queue and fields.queue ~= '' then text = text .. ' in queue ' .. fields.queue end
  if fields.state == 'running' then text = text .. ' by worker ' .. tostring(fields.worker) end
  if fields.state == 'failed' then text = text .. ' in group ' .. tostring(Doctor.group(fields)) end
  return text
end

function Doctor.listed(index, name, jid)
  if index == 'work' and Doctor.listed('fifo', name, jid) then return true end
  local key = Doctor.key(index, name)
  if Doctor.LISTS[index] then return redis.call('lpos', key, jid) ~= false end
  return redis.call('zscore', key, jid) ~= false
end

-- Whether a checked (usable) job is in the index its state names.
function Doctor.indexed(jid, fields)
  local state = fields.state
  local index = Doctor.state_index(fields)
  if index then return Doctor.listed(index, fields.queue, jid) end
  if state == 'complete' then return Doctor.listed('completed', '', jid) end
  if state == 'expired' then return Doctor.listed('expired', '', jid) end
  if state == 'awaiting' then return Doctor.listed('awaiting', '', jid) end
  return Doctor.listed('failed', Doctor.group(fields), jid)
end

-- Keep a job whose hash is unusable where a person can see it: out of the indexes of its queue
-- and worker, failed in Doctor.BAD_STATE_GROUP (requeue or cancel it from there).
function Doctor.set_aside(jid, fields, why)
  local queue = fields.queue or ''
  if queue ~= '' then
    for index in pairs(Doctor.QUEUE_INDEXES) do
      if Doctor.LISTS[index] then
        redis.call('lrem', Doctor.key(index, queue), 0, jid)
      else
        redis.call('zrem', Doctor.key(index, queue), jid)
      end
    end
  end
  if fields.worker and fields.worker ~= '' then redis.call('zrem', Keys.worker_jobs(fields.worker), jid) end
  redis.call('zrem', Keys.completed(), jid)
  redis.call('zrem', Keys.awaiting(), jid)
  Job.fail(jid, { state = 'unusable', queue = queue }, 'doctor', Doctor.BAD_STATE_GROUP,
    'Set aside by the consistency check: ' .. why)
  return 'set aside as failed in group ' .. Doctor.BAD_STATE_GROUP .. ' (' .. why .. ')'
end

-- When a scheduled job found in no index runs: when its delay (counted from its last update)
-- ends, or now if that has passed; the exact time is not kept on the job.
function Doctor.scheduled_time(fields)
  local delay = tonumber(fields.delay) or 0
  local since = tonumber(fields.updated) or Engine.now
  return math.max(Engine.now, since + delay)
end

-- Put a job into the index its state names when it is not there. Returns what it did, or nil
-- (nothing to do, or a parked job: its slots own where it waits).
function Doctor.ensure(jid)
  local fields = Doctor.read(jid)
  if not fields then return nil end
  local trouble, unknown = Doctor.judge(fields)
  if unknown then return nil end
  if trouble then return Doctor.set_aside(jid, fields, trouble) end
  if Doctor.indexed(jid, fields) then return nil end
  local state, queue = fields.state, fields.queue
  if state == 'waiting' and fields.parked then
    return nil
  elseif state == 'waiting' then
    Queue.enqueue(queue, jid, tonumber(fields.priority) or 0)
    return 'queued again as waiting in ' .. queue
  elseif state == 'scheduled' then
    local when = Doctor.scheduled_time(fields)
    redis.call('zadd', Keys.scheduled(queue), when, jid)
    return 'scheduled again in ' .. queue .. ' for ' .. string.format('%.17g', when)
  elseif state == 'depends' then
    redis.call('zadd', Keys.depends(queue), tonumber(fields.created) or Engine.now, jid)
    return 'listed again as waiting for dependencies in ' .. queue
  elseif state == 'running' then
    local expires = tonumber(fields.expires) or Engine.now
    redis.call('zadd', Keys.locks(queue), expires, jid)
    local worker = fields.worker or ''
    if worker ~= '' and fields.grace ~= '1' then
      redis.call('zadd', Keys.worker_jobs(worker), expires, jid)
    end
    return 'locked again in ' .. queue .. ' until ' .. string.format('%.17g', expires)
  elseif state == 'buried' then
    redis.call('zadd', Keys.buried(queue), tonumber(fields.updated) or Engine.now, jid)
    return 'listed again as buried in ' .. queue
  elseif state == 'complete' or state == 'expired' then
    local index = state == 'complete' and 'completed' or 'expired'
    redis.call('zadd', Doctor.key(index, ''), tonumber(fields.updated) or Engine.now, jid)
    return 'listed again as ' .. state
  elseif state == 'awaiting' then
    -- Its deadline as armed (include/waits.lua); none kept: it waits without one.
    local deadline = tonumber(fields.wait_at)
    redis.call('zadd', Keys.awaiting(), deadline or '+inf', jid)
    return 'listed again as awaiting a signal'
  end
  local group = Doctor.group(fields)
  redis.call('lpush', Keys.failed(group), jid)
  redis.call('sadd', Keys.failures(), group)
  return 'listed again as failed in group ' .. group
end

-- A job in depends with nothing left to wait for. With `needs` (a flow step) it waits again for
-- those that exist and have not completed; with none open it is released, as qless releases a
-- job whose dependencies do not exist, unless its trigger rule decides what ended needs mean.
-- Returns status ('repaired' / 'skipped'), what it did; nil when the job is not stuck.
function Doctor.unstick(jid)
  local fields = Doctor.read(jid)
  if not fields or fields.state ~= 'depends' or redis.call('scard', Keys.dependencies(jid)) > 0 then
    return nil
  end
  local open = {}
  local ok, needs = pcall(cjson.decode, fields.needs or '[]')
  if ok and type(needs) == 'table' then
    for _, need in ipairs(needs) do
      local state = type(need) == 'string' and need ~= jid and Job.state(need)
      if state and state ~= 'complete' then
        redis.call('sadd', Keys.dependencies(jid), need)
        redis.call('sadd', Keys.dependents(need), jid)
        table.insert(open, need)
      end
    end
  end
  if #open > 0 then return 'repaired', 'waits again for ' .. table.concat(open, ', ') end
  if fields.trigger and fields.trigger ~= '' and fields.trigger ~= 'all_success' then
    return 'skipped', 'left waiting: its trigger rule (' .. fields.trigger ..
      ') decides what its ended dependencies mean; requeue or cancel it'
  end
  Queue.release_dependent(jid)
  return 'repaired', 'released: nothing left to wait for'
end

-- Keys a job leaves behind when its hash is gone.
function Doctor.leftovers(jid)
  local left = {}
  for suffix, key in pairs({ history = Keys.history(jid), dependencies = Keys.dependencies(jid),
      dependents = Keys.dependents(jid) }) do
    if redis.call('exists', key) == 1 then table.insert(left, suffix) end
  end
  table.sort(left)
  return left
end

-- A finding: what is wrong, about which job, seen in which index.
function Doctor.finding(kind, jid, index, name, detail)
  return { kind = kind, jid = jid or '', index = index, name = name or '', detail = detail }
end
