-- workers, worker.deregister, worker.forget: who is working on what.
--
--   workers              -> JSON [{name, jobs, stalled}], most recently active first
--   workers worker       -> JSON {jobs: [jid...], stalled: [jid...]}
--   worker.deregister worker...  -> nil (jobs handed to an idle worker and not taken go back, as
--                                   with await.cancel; its lease, if any, is dropped; it is kept
--                                   in `workers-last` as the last worker of the queues it listed)
--   worker.forget worker  -> nil; deregisters a worker that is gone: refused (WRONGSTATE, nothing
--                            changed) while it may be working (seen within worker-silent-after, or
--                            its lease not lapsed) or holds jobs (running or stalled: they come
--                            back to a live worker first); NOTFOUND for no such worker
--
-- Workers silent for longer than max-worker-age are left out, and dropped with their
-- registrations as the list is read (include/registry.lua).
-- `jobs` counts the worker's jobs whose lock is still valid, `stalled` those whose lock expired.
-- Errors: INVALID; worker.forget also NOTFOUND, WRONGSTATE.
-- @include args
-- @include config
-- @include registry
-- @include handoff
-- @include lease

api['workers'] = function(args)
  if args[1] ~= nil then
    local worker = Arg.id('Workers', 'worker', args[1])
    local key = Keys.worker_jobs(worker)
    local reply = cjson.encode({
      jobs = redis.call('zrangebyscore', key, Engine.after_now(), '+inf'),
      stalled = redis.call('zrangebyscore', key, '-inf', Engine.now),
    })
    reply = string.gsub(reply, '"jobs":{}', '"jobs":[]')
    return (string.gsub(reply, '"stalled":{}', '"stalled":[]'))
  end
  Registry.prune()
  local out = {}
  for _, worker in ipairs(Registry.live()) do
    local key = Keys.worker_jobs(worker)
    table.insert(out, {
      name = worker,
      jobs = redis.call('zcount', key, Engine.after_now(), '+inf'),
      stalled = redis.call('zcount', key, '-inf', Engine.now),
    })
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

local function deregister(worker)
  Registry.remember(worker, Engine.now)  -- job.explain names the last worker of its queues
  redis.call('zrem', Keys.workers(), worker)
  redis.call('del', Keys.worker_info(worker))
  Handoff.give_back(worker)
  Lease.drop(worker)
end

api['worker.deregister'] = function(args)
  if #args == 0 then Arg.fail('WorkerDeregister', 'no workers given') end
  for _, worker in ipairs(args) do Arg.id('WorkerDeregister', 'worker', worker) end
  for _, worker in ipairs(args) do deregister(worker) end
  return nil
end

api['worker.forget'] = function(args)
  local cmd = 'WorkerForget'
  local worker = Arg.id(cmd, 'worker', args[1])
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local seen = tonumber(redis.call('zscore', Keys.workers(), worker))
  if not seen then Err.raise('NOTFOUND', cmd .. '(): no worker ' .. worker) end
  local ago = math.max(0, Engine.now - seen)
  local lease = tonumber(redis.call('zscore', Keys.leases(), worker))
  if ago < Config.number('worker-silent-after') or (lease and lease > Engine.now) then
    Err.raise('WRONGSTATE', string.format('%s(): worker %s was seen %ds ago: it may be working'
      .. ' (a worker is forgotten once silent for worker-silent-after, %gs)', cmd, worker,
      math.floor(ago), Config.number('worker-silent-after')))
  end
  local held = redis.call('zcard', Keys.worker_jobs(worker))
  if held > 0 then
    Err.raise('WRONGSTATE', string.format('%s(): worker %s holds %d job%s: forgotten once they are'
      .. ' back to a live worker (its lease or their locks lapse)', cmd, worker, held,
      held == 1 and '' or 's'))
  end
  deregister(worker)
  return nil
end
