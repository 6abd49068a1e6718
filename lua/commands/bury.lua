-- bury, kick, kick.jobs: take a job out of circulation without failing it, and bring buried jobs
-- back, a queue's oldest or the ones named (ours, from Tarantool's queue).
--
--   bury       jid, worker, [message]  -> 'buried'
--   kick       queue, [count=1]        -> number of buried jobs of `queue` made waiting again
--   kick.jobs  jid...                  -> list of the jids made waiting again, in the order given
--   run.kick   run_id, step            -> list of the step's buried jids made waiting again
--
-- bury takes a waiting or scheduled job, or a running one from the worker holding its lock (its
-- concurrency-key and throttle slots are given back), into state 'buried': indexed in
-- q:<queue>-buried by the time it was buried, never popped, kept until kicked, put again or
-- canceled; its dependents keep waiting. History 'buried' records `worker` and `message`.
-- kick makes up to `count` buried jobs of the queue waiting again, the longest buried first
-- (history 'kicked'). kick.jobs makes the named buried jobs waiting again, whatever their queue
-- (a jid listed twice is kicked once); every jid is checked before anything is written, so a
-- list with one job that is missing (NOTFOUND) or not buried (WRONGSTATE, naming its state)
-- kicks none. run.kick makes every buried job of a run's step waiting again (a foreach step's
-- items too), refused (WRONGSTATE, naming the step's status and allowed actions) unless the
-- decider (include/run_state.lua) allows the step `kick`. All kicks go through one function: each job waits again at its priority, its
-- run's counts move (a run's step is no longer buried). A buried job with a ttl still expires
-- at its deadline (include/ttl.lua).
-- All three count in the queue's statistics (bury, kick) and log `buried` / `kicked` on P log.
-- Errors: INVALID (run.kick of a step the run does not have), TOOLARGE (message over 512 KiB),
-- NOTFOUND (run.kick: no such run), WRONGSTATE (bury of a job that is not waiting, scheduled or
-- running; kick.jobs of a job that is not buried; run.kick of a step with no buried job),
-- LOCKLOST (bury of a running job by another worker, or after its lock expired).
-- @include args
-- @include job
-- @include queue
-- @include lock
-- @include events
-- @include run_state

local BURIABLE = { waiting = true, scheduled = true, running = true }

api['bury'] = function(args)
  local cmd = 'Bury'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local message
  if args[3] ~= nil and args[3] ~= '' then message = Arg.text(cmd, 'message', args[3]) end
  if args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local fields = Job.fields(jid, 'queue', 'worker', 'expires', 'grace', 'ttl_at', 'ckey', 'climit',
    'throttle')
  if not fields then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
  if not BURIABLE[fields.state] then
    Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is not waiting, scheduled or running: ' ..
      fields.state)
  end
  local queue = fields.queue
  if fields.state == 'running' then
    Lock.check_held(cmd, jid, worker, fields)
    Lock.release(jid, queue, worker, fields)
    redis.call('zadd', Keys.workers(), Engine.now, worker)
  else
    Job.unindex(jid, fields)
  end
  local key = Keys.job(jid)
  redis.call('hset', key, 'state', 'buried', 'updated', Engine.now)
  -- No worker and no expiry, their defaults (Job.DEFAULTS); a kick's next start claims again.
  redis.call('hdel', key, 'worker', 'expires', 'grace', 'cclaim')
  redis.call('zadd', Keys.buried(queue), Engine.now, jid)
  Job.history(jid, 'buried', { worker = worker, message = message })
  Stats.bump(queue, 'bury', 1)
  Events.tracked('buried', jid)
  Events.log({ jid = jid, event = 'buried', queue = queue, worker = worker, message = message })
  return 'buried'
end

-- Buried job `jid` (already out of q:<queue>-buried) waits again in `queue` at `priority`: the
-- one way both kicks bring a job back. The caller counts it in the queue's statistics.
local function kick_one(jid, queue, priority)
  redis.call('hset', Keys.job(jid), 'updated', Engine.now)
  Job.history(jid, 'kicked', { q = queue })
  Queue.enqueue(queue, jid, tonumber(priority) or 0)
  Events.log({ jid = jid, event = 'kicked', queue = queue })
end

api['kick'] = function(args)
  local cmd = 'Kick'
  local queue = Arg.id(cmd, 'queue', args[1])
  local count = Arg.optional_integer(cmd, 'count', args[2], 1, 0, Engine.MAX_COUNT)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  if count == 0 then return 0 end
  local jids = redis.call('zrange', Keys.buried(queue), 0, count - 1)
  if #jids == 0 then return 0 end
  redis.call('zremrangebyrank', Keys.buried(queue), 0, #jids - 1)
  local kicked = 0
  for _, jid in ipairs(jids) do
    local fields = Job.fields(jid, 'queue', 'priority')
    if fields and fields.state == 'buried' and fields.queue == queue then
      kick_one(jid, queue, fields.priority)
      kicked = kicked + 1
    end
  end
  if kicked > 0 then Stats.bump(queue, 'kick', kicked) end
  return kicked
end

api['kick.jobs'] = function(args)
  local cmd = 'KickJobs'
  if #args == 0 then Arg.fail(cmd, 'no jids given') end
  local jids, jobs = {}, {}
  for _, jid in ipairs(args) do
    Arg.jid(cmd, 'jid', jid)
    if not jobs[jid] then
      local fields = Job.fields(jid, 'queue', 'priority')
      if not fields then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
      if fields.state ~= 'buried' then
        Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is not buried: ' .. fields.state)
      end
      jobs[jid] = fields
      jids[#jids + 1] = jid
    end
  end
  local per_queue, queues = {}, {}
  for _, jid in ipairs(jids) do
    local queue = jobs[jid].queue
    redis.call('zrem', Keys.buried(queue), jid)
    kick_one(jid, queue, jobs[jid].priority)
    if not per_queue[queue] then queues[#queues + 1] = queue end
    per_queue[queue] = (per_queue[queue] or 0) + 1
  end
  for _, queue in ipairs(queues) do Stats.bump(queue, 'kick', per_queue[queue]) end
  return jids
end

api['run.kick'] = function(args)
  local cmd = 'RunKick'
  local run_id = Arg.id(cmd, 'run_id', args[1])
  local step = Arg.id(cmd, 'step', args[2])
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  if redis.call('exists', Keys.run(run_id)) == 0 then
    Err.raise('NOTFOUND', cmd .. '(): no run ' .. run_id)
  end
  local read = RunState.read(run_id, 0)
  local found
  for _, s in ipairs(read.steps) do
    if s.step == step then found = s end
  end
  if not found then Arg.fail(cmd, 'run ' .. run_id .. ' has no step ' .. step) end
  if not RunState.allows(found.actions, 'kick') then
    RunState.refuse(cmd, 'step ' .. step .. ' of run ' .. run_id, found.status, found.actions,
      'kick')
  end
  local kicked, per_queue, queues = {}, {}, {}
  RunState.each_jid(run_id, function(jid)
    if RunState.step_of(run_id, jid) == step then
      local fields = Job.fields(jid, 'queue', 'priority')
      if fields and fields.state == 'buried' then
        local queue = fields.queue
        redis.call('zrem', Keys.buried(queue), jid)
        kick_one(jid, queue, fields.priority)
        kicked[#kicked + 1] = jid
        if not per_queue[queue] then queues[#queues + 1] = queue end
        per_queue[queue] = (per_queue[queue] or 0) + 1
      end
    end
    return false
  end)
  for _, queue in ipairs(queues) do Stats.bump(queue, 'kick', per_queue[queue]) end
  return kicked
end
