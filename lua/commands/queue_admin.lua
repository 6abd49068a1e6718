-- delete, queue.truncate, queue.drop, queue.stats: removing jobs and queues, and a queue's
-- statistics by state and by call (ours, from Tarantool's queue).
--
--   delete          jid...           -> list of the jids deleted (jobs that do not exist are
--                                       skipped)
--   queue.truncate  queue, [limit=1000] -> how many jobs were removed (0: none left); call again
--                                       while it removes `limit`
--   queue.drop      queue            -> 'dropped'
--   queue.stats     queue, [date=now] -> JSON {name, tasks: {ready, taken, buried, delayed,
--                                       depends, done, total}, calls: {put, take, ack, release,
--                                       bury, kick, delete, touch, expire}}
--
-- delete removes jobs for good, like cancel (a job of a flow run that had not completed leaves
-- its run canceled: Runs.drop_job), but refuses a running job (its worker would be left
-- running a job that no longer exists: cancel tells it, or wait for it). queue.truncate removes
-- every job of the queue that does not run (waiting, parked, scheduled, depends, buried), at most
-- `limit` per call, and refuses while any job of the queue runs (or is stalled). Both refuse when
-- a dependent would be left waiting forever (HASDEPENDENTS): for delete one not listed too, for
-- truncate one in another queue. Each deleted job counts in its queue's `delete` statistic and
-- logs `deleted` on P log. queue.drop forgets an empty queue: its place in `queues`, its pause,
-- its `<queue>-heartbeat` and `<queue>-max-concurrency` settings and its index keys (statistics
-- stay); it refuses a queue that still has jobs or recurring jobs (truncate first).
-- queue.stats: `tasks` are the jobs in each state now (ready: waiting and parked; taken: running
-- and stalled; delayed: scheduled; done: completed on that day); `calls` are that day's
-- (Stats.calls).
-- Errors: INVALID, NOTFOUND (queue.drop of an unknown queue), WRONGSTATE (a running job),
-- HASDEPENDENTS.
-- @include args
-- @include job
-- @include stats
-- @include events
-- @include runs
-- @include work

local function deleted(jid, fields)
  Events.tracked('canceled', jid)
  Events.log({ jid = jid, event = 'deleted', queue = fields.queue or '' })
  Runs.drop_job(jid, fields, 'deleted')
  Job.delete(jid, fields)
  if fields.queue and fields.queue ~= '' then Stats.bump(fields.queue, 'delete', 1) end
end

api['delete'] = function(args)
  local cmd = 'Delete'
  if #args == 0 then Arg.fail(cmd, 'no jids given') end
  local listed = {}
  for _, jid in ipairs(args) do listed[Arg.jid(cmd, 'jid', jid)] = true end
  local jobs = {}
  for _, jid in ipairs(args) do
    local fields = jobs[jid] or Job.load_for_delete(jid)
    if fields then
      if fields.state == 'running' then
        Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is running (worker ' .. tostring(fields.worker) ..
          '): deleting it would orphan its worker; cancel it or let it finish')
      end
      for _, dependent in ipairs(redis.call('smembers', Keys.dependents(jid))) do
        if not listed[dependent] then
          Err.raise('HASDEPENDENTS', cmd .. '(): ' .. dependent .. ' is a dependent of ' .. jid ..
            ' but is not listed to be deleted')
        end
      end
      jobs[jid] = fields
    end
  end
  local out = {}
  for _, jid in ipairs(args) do
    local fields = jobs[jid]
    if fields then
      jobs[jid] = nil
      deleted(jid, fields)
      table.insert(out, jid)
    end
  end
  return out
end

-- A queue's indexes of jobs that do not run, in the order truncate empties them (parked jobs
-- first, so their refills have nothing left to move); the last, the waiting jobs' list.
local function resting(queue)
  return { Keys.parked(queue), Keys.depends(queue), Keys.scheduled(queue), Keys.buried(queue),
    Keys.work(queue), Keys.fifo(queue) }
end

local function running(queue)
  return redis.call('zcard', Keys.locks(queue))
end

api['queue.truncate'] = function(args)
  local cmd = 'QueueTruncate'
  local queue = Arg.id(cmd, 'queue', args[1])
  local limit = Arg.optional_integer(cmd, 'limit', args[2], 1000, 1, Engine.MAX_COUNT)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local busy = running(queue)
  if busy > 0 then
    Err.raise('WRONGSTATE', cmd .. '(): queue ' .. queue .. ' has ' .. busy .. ' running job(s): ' ..
      'truncating would orphan their workers; wait for them or cancel them first')
  end
  local victims, stale = {}, {}
  local indexes = resting(queue)
  local list = indexes[#indexes]
  for _, index in ipairs(indexes) do
    if #victims >= limit then break end
    local read = index == list and 'lrange' or 'zrange'
    for _, jid in ipairs(redis.call(read, index, 0, limit - #victims - 1)) do
      local fields = Job.load_for_delete(jid)
      if fields and fields.queue == queue and fields.state ~= 'running' then
        for _, dependent in ipairs(redis.call('smembers', Keys.dependents(jid))) do
          local other = redis.call('hget', Keys.job(dependent), 'queue')
          if other and other ~= queue then
            Err.raise('HASDEPENDENTS', cmd .. '(): ' .. dependent .. ' (queue ' .. other ..
              ') depends on ' .. jid .. ' of queue ' .. queue)
          end
        end
        table.insert(victims, { jid, fields })
      else
        table.insert(stale, { index, jid }) -- an index entry without its job: dropped too
      end
    end
  end
  for _, entry in ipairs(stale) do
    if entry[1] == list then
      redis.call('lrem', list, 0, entry[2])
    else
      redis.call('zrem', entry[1], entry[2])
    end
  end
  for _, victim in ipairs(victims) do
    -- A refill earlier in this loop may have moved a parked victim back to the work queue.
    local fields = Job.load_for_delete(victim[1])
    if fields then deleted(victim[1], fields) end
  end
  if #victims > 0 then Events.log({ event = 'queue_truncated', queue = queue, jobs = #victims }) end
  return #victims
end

api['queue.drop'] = function(args)
  local cmd = 'QueueDrop'
  local queue = Arg.id(cmd, 'queue', args[1])
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  if not redis.call('zscore', Keys.queues(), queue) then
    Err.raise('NOTFOUND', cmd .. '(): no queue ' .. queue)
  end
  local left = {}
  for _, entry in ipairs({ { 'running', Keys.locks(queue) }, { 'waiting', false },
    { 'parked', Keys.parked(queue) }, { 'scheduled', Keys.scheduled(queue) },
    { 'depends', Keys.depends(queue) }, { 'buried', Keys.buried(queue) },
    { 'recurring', Keys.recur(queue) } }) do
    local n = entry[2] and redis.call('zcard', entry[2]) or Work.count(queue)
    if n > 0 then table.insert(left, n .. ' ' .. entry[1]) end
  end
  if #left > 0 then
    Err.raise('WRONGSTATE', cmd .. '(): queue ' .. queue .. ' is not empty (' ..
      table.concat(left, ', ') .. '): truncate it first (running jobs must end or be canceled, ' ..
      'recurring jobs unrecurred)')
  end
  redis.call('del', Keys.work(queue), Keys.fifo(queue), Keys.locks(queue), Keys.scheduled(queue),
    Keys.depends(queue), Keys.recur(queue), Keys.buried(queue), Keys.parked(queue), Keys.ttl(queue),
    Keys.key_running(queue), Keys.idle(queue))
  redis.call('zrem', Keys.queues(), queue)
  redis.call('srem', Keys.paused(), queue)
  redis.call('hdel', Keys.config(), queue .. '-heartbeat', queue .. '-max-concurrency')
  Events.log({ event = 'queue_dropped', queue = queue })
  return 'dropped'
end

api['queue.stats'] = function(args)
  local cmd = 'QueueStats'
  local queue = Arg.id(cmd, 'queue', args[1])
  local day = Stats.day(Arg.optional_number(cmd, 'date', args[2], Engine.now, 0))
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local calls = Stats.calls(day, queue)
  local tasks = {
    ready = Work.count(queue) + redis.call('zcard', Keys.parked(queue)),
    taken = redis.call('zcard', Keys.locks(queue)),
    buried = redis.call('zcard', Keys.buried(queue)),
    delayed = redis.call('zcard', Keys.scheduled(queue)),
    depends = redis.call('zcard', Keys.depends(queue)),
    done = calls.ack,
  }
  tasks.total = tasks.ready + tasks.taken + tasks.buried + tasks.delayed + tasks.depends
  return cjson.encode({ name = queue, tasks = tasks, calls = calls })
end
