-- worker.register, worker.info: who a worker is (Blueque's listener registry: host, pid, queues).
--
--   worker.register worker, info JSON object  -> nil; the worker counts as active now (info at
--                                                most 100 levels deep)
--   worker.info [worker...]                   -> JSON {worker: info} for the given workers, or
--                                                for every live worker when none given
--
-- The info object is opaque to the engine; the Python worker stores host, pid, queues, started.
-- worker.deregister (workers.lua) forgets it too, and so does max-worker-age: a worker silent for
-- longer is left out and dropped with its registration (include/registry.lua).
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include keys
-- @include registry

api['worker.register'] = function(args)
  local cmd = 'WorkerRegister'
  local worker = Arg.id(cmd, 'worker', args[1])
  local info = Arg.json(cmd, 'info', args[2], 'object', nil, Arg.MAX_NESTING)
  redis.call('set', Keys.worker_info(worker), info)
  redis.call('zadd', Keys.workers(), Engine.now, worker)
  return nil
end

api['worker.info'] = function(args)
  local workers = args
  for _, worker in ipairs(workers) do Arg.id('WorkerInfo', 'worker', worker) end
  if #workers == 0 then
    Registry.prune()
    workers = Registry.live()
  end
  local out = {}
  for _, worker in ipairs(workers) do
    local info = redis.call('get', Keys.worker_info(worker))
    if info then out[worker] = cjson.decode(info) end
  end
  if next(out) == nil then return '{}' end
  return cjson.encode(out)
end
