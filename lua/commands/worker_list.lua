-- worker.list: the listener registry (Blueque): live workers with what they registered, all of
-- them or those listening on one queue (ours).
--
--   worker.list [queue]  -> JSON [{name, last_seen, silent, jobs, stalled, info}], most recently
--                           active first; with a queue, only workers whose registration lists
--                           it in `queues` (workers that never registered are left out then)
--
-- `info` is the worker's registration (worker.register: host, pid, queues, ...; {} when none),
-- `jobs` / `stalled` count the jobs it holds with a valid / an expired lock, `last_seen` is its
-- last activity, `silent` whether that is longer ago than `worker-silent-after` (default 60 s;
-- our worker renews its registration at a third of it, so a silent worker is most likely dead).
-- Workers silent for longer than max-worker-age are left out and dropped with their
-- registrations (include/registry.lua).
-- Errors: INVALID.
-- @include args
-- @include registry

-- Whether a registration lists `queue` among its queues.
function Registry.listens(info, queue)
  if type(info) ~= 'table' or type(info.queues) ~= 'table' then return false end
  for _, name in ipairs(info.queues) do
    if name == queue then return true end
  end
  return false
end

api['worker.list'] = function(args)
  local cmd = 'WorkerList'
  local queue
  if args[1] ~= nil and args[1] ~= '' then queue = Arg.id(cmd, 'queue', args[1]) end
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  Registry.prune()
  local out = {}
  local heard_after = Engine.now - Config.number('worker-silent-after')
  for _, worker in ipairs(Registry.live()) do
    local info = Registry.info(worker, false)
    if not queue or Registry.listens(info, queue) then
      local key = Keys.worker_jobs(worker)
      local last_seen = tonumber(redis.call('zscore', Keys.workers(), worker))
      table.insert(out, {
        name = worker,
        last_seen = last_seen,
        silent = last_seen <= heard_after,
        jobs = redis.call('zcount', key, Engine.after_now(), '+inf'),
        stalled = redis.call('zcount', key, '-inf', Engine.now),
        info = info or {},
      })
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end
