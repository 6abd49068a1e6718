-- queue.counts: how much work each queue holds, cheap enough to poll for autoscaling (ours, after
-- Redis Work Queue's queue length and number of leased items).
--
--   queue.counts queue...  -> JSON [{name, backlog, leased, waiting, due, running, stalled,
--                             scheduled, depends, paused}], in the order given (1 to 100 queues)
--
-- waiting: ready to pop; due: scheduled jobs whose time has come (the next pop or housekeeping
-- makes them waiting); backlog = waiting + due, what workers could start now. running / stalled:
-- held with a valid / an expired lock; leased = running + stalled (a stalled job comes back to
-- the queue when it is reclaimed). scheduled counts every scheduled job, due ones included;
-- depends: jobs waiting for dependencies. Each field is one ZCARD or ZCOUNT: O(log n) per queue,
-- whatever the queue's size.
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include work

api['queue.counts'] = function(args)
  local cmd, MAX_QUEUES = 'QueueCounts', 100
  if #args == 0 then Arg.fail(cmd, 'no queues given') end
  if #args > MAX_QUEUES then
    Err.raise('TOOLARGE', cmd .. '(): ' .. #args .. ' queues, more than the limit of ' .. MAX_QUEUES)
  end
  for _, queue in ipairs(args) do Arg.id(cmd, 'queue', queue) end
  local out = {}
  for _, queue in ipairs(args) do
    local locks = Keys.locks(queue)
    local waiting = Work.count(queue)
    local due = redis.call('zcount', Keys.scheduled(queue), '-inf', Engine.now)
    local running = redis.call('zcount', locks, Engine.after_now(), '+inf')
    local stalled = redis.call('zcount', locks, '-inf', Engine.now)
    table.insert(out, {
      name = queue,
      backlog = waiting + due,
      leased = running + stalled,
      waiting = waiting,
      due = due,
      running = running,
      stalled = stalled,
      scheduled = redis.call('zcard', Keys.scheduled(queue)),
      depends = redis.call('zcard', Keys.depends(queue)),
      paused = redis.call('sismember', Keys.paused(), queue) == 1,
    })
  end
  return cjson.encode(out)
end
