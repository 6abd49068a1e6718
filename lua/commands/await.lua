-- await, await.cancel: pop, or wait idle for the next job to be handed over (include/handoff.lua).
--
--   await         worker, seconds, count, queue...  -> JSON list of the jobs now running for
--                                                      `worker` (as pop)
--   await.cancel  worker                            -> how many handed-over jobs went back
--
-- await returns what was handed to the worker since it last asked (its inbox) and is still its
-- to start (Handoff.take_fresh: not a job whose lock ran out meanwhile), if anything;
-- else it pops up to `count` jobs from the queues in the order given (each as `pop`); else it
-- registers the worker as idle on those queues for `seconds` and returns '[]'. The worker then
-- blocks on `BLPOP P w:<worker>:inbox` for about that long and calls await again: whatever is
-- put meanwhile is popped for it and pushed there (a JSON list of jobs per push).
-- await.cancel: the worker stops waiting (it is stopping); jobs handed to it that it did not
-- take go back to their queues without using a retry. worker.deregister does the same.
-- Errors: INVALID.
-- @include args
-- @include handoff

-- The longest idle registration: a worker renews it each time its BLPOP times out.
local MAX_AWAIT_SECONDS = 3600

api['await'] = function(args)
  local cmd = 'Await'
  local worker = Arg.id(cmd, 'worker', args[1])
  local seconds = Arg.seconds(cmd, 'seconds', args[2], MAX_AWAIT_SECONDS)
  local count = Arg.integer(cmd, 'count', args[3], 1, Engine.MAX_COUNT)
  local queues = {}
  for i = 4, #args do table.insert(queues, Arg.id(cmd, 'queue', args[i])) end
  if #queues == 0 then Arg.fail(cmd, 'no queues given') end

  local handed = Handoff.take_fresh(worker)
  if handed then return handed end
  local parts = {}
  for _, queue in ipairs(queues) do
    local jobs = Handoff.pop(queue, worker, count)
    if jobs ~= '[]' then
      table.insert(parts, string.sub(jobs, 2, -2))
      count = count - #cjson.decode(jobs)
      if count <= 0 then break end
    end
  end
  if #parts > 0 then return '[' .. table.concat(parts, ',') .. ']' end
  Handoff.wait(worker, queues, Engine.now + seconds)
  return '[]'
end

api['await.cancel'] = function(args)
  return Handoff.give_back(Arg.id('AwaitCancel', 'worker', args[1]))
end
