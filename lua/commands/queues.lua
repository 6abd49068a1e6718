-- queues, pause, unpause, length, queue.forget, jobs: queues and their contents.
--
--   queues        [queue]      -> JSON {name, waiting, stalled, running, scheduled, depends,
--                                 recurring, paused, parked, buried} (a list of them, oldest queue
--                                 first, without a name); parked: waiting for a concurrency-key
--                                 or throttle slot (ours, include/slots.lua); buried: ours
--                                 (commands/bury.lua)
--   pause         queue...     -> nil; pop on a paused queue returns nothing
--   unpause       queue...     -> nil
--   length        queue        -> running + waiting (parked ones too) + scheduled
--   queue.forget  queue...     -> nil; the queue leaves the list of known queues
--   jobs 'complete', [offset=0, count=25]                   -> list of jids, newest first
--   jobs state, queue, [offset=0, count=25]                 -> list of jids; state is one of
--        running, stalled, scheduled, depends, recurring, waiting (ours), buried (ours: longest
--        buried first), parked (ours: waiting for a slot, in pop order); an entry an outside
--        writer left that is no jid is skipped (Arg.jids_in), so a page may hold fewer
--
-- Errors: INVALID.
-- @include args
-- @include job
-- @include queue
-- @include dialect
-- @include work

local function counts(queue)
  local locks = Keys.locks(queue)
  if Dialect.rules.reads_promote_scheduled then Queue.promote(queue, redis.call('zcard', Keys.scheduled(queue))) end
  return {
    name = queue,
    waiting = Work.count(queue),
    stalled = redis.call('zcount', locks, '-inf', Engine.now),
    running = redis.call('zcount', locks, Engine.after_now(), '+inf'),
    scheduled = redis.call('zcard', Keys.scheduled(queue)),
    depends = redis.call('zcard', Keys.depends(queue)),
    recurring = redis.call('zcard', Keys.recur(queue)),
    paused = redis.call('sismember', Keys.paused(), queue) == 1,
    parked = redis.call('zcard', Keys.parked(queue)),
    buried = redis.call('zcard', Keys.buried(queue)),
  }
end

api['queues'] = function(args)
  if args[1] ~= nil then
    return cjson.encode(counts(Arg.id('Queues', 'queue', args[1])))
  end
  local out = {}
  for _, queue in ipairs(redis.call('zrange', Keys.queues(), 0, -1)) do
    table.insert(out, counts(queue))
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

local function each_queue(cmd, args, fn)
  if #args == 0 then Arg.fail(cmd, 'no queues given') end
  for i, queue in ipairs(args) do Arg.id(cmd, 'queue', queue) end
  for _, queue in ipairs(args) do fn(queue) end
  return nil
end

api['pause'] = function(args)
  return each_queue('Pause', args, function(queue) redis.call('sadd', Keys.paused(), queue) end)
end

api['unpause'] = function(args)
  return each_queue('Unpause', args, function(queue)
    redis.call('srem', Keys.paused(), queue)
    if Work.count(queue) > 0 then Events.ready(queue) end
  end)
end

api['queue.forget'] = function(args)
  return each_queue('QueueForget', args, function(queue) redis.call('zrem', Keys.queues(), queue) end)
end

api['length'] = function(args)
  local queue = Arg.id('Length', 'queue', args[1])
  return redis.call('zcard', Keys.locks(queue)) + Work.count(queue)
    + redis.call('zcard', Keys.scheduled(queue)) + redis.call('zcard', Keys.parked(queue))
end

local JOB_STATES = {
  running = function(q, o, c) return redis.call('zrangebyscore', Keys.locks(q), Engine.after_now(), '+inf', 'LIMIT', o, c) end,
  stalled = function(q, o, c) return redis.call('zrangebyscore', Keys.locks(q), '-inf', Engine.now, 'LIMIT', o, c) end,
  scheduled = function(q, o, c) return redis.call('zrange', Keys.scheduled(q), o, o + c - 1) end,
  depends = function(q, o, c) return redis.call('zrange', Keys.depends(q), o, o + c - 1) end,
  recurring = function(q, o, c) return redis.call('zrange', Keys.recur(q), o, o + c - 1) end,
  waiting = function(q, o, c) return Work.range(q, o, c) end,
  buried = function(q, o, c) return redis.call('zrange', Keys.buried(q), o, o + c - 1) end,
  parked = function(q, o, c) return redis.call('zrange', Keys.parked(q), o, o + c - 1) end,
}

api['jobs'] = function(args)
  local cmd = 'Jobs'
  local state = Arg.present(cmd, 'state', args[1])
  local jids
  if state == 'complete' then
    local offset = Arg.optional_integer(cmd, 'offset', args[2], 0, 0, Engine.MAX_OFFSET)
    local count = Arg.optional_integer(cmd, 'count', args[3], 25, 0, Engine.MAX_COUNT)
    jids = count > 0 and redis.call('zrevrange', Keys.completed(), offset, offset + count - 1) or {}
  else
    local lister = JOB_STATES[state]
    if not lister then
      Arg.fail(cmd, 'Arg "state" must be one of complete, running, stalled, scheduled, depends, ' ..
        'recurring, waiting, buried, parked: ' .. Arg.shown(state))
    end
    local queue = Arg.id(cmd, 'queue', args[2])
    local offset = Arg.optional_integer(cmd, 'offset', args[3], 0, 0, Engine.MAX_OFFSET)
    local count = Arg.optional_integer(cmd, 'count', args[4], 25, 0, Engine.MAX_COUNT)
    if state == 'scheduled' and Dialect.rules.reads_promote_scheduled then
      Queue.promote(queue, redis.call('zcard', Keys.scheduled(queue)))
    end
    jids = count > 0 and lister(queue, offset, count) or {}
  end
  return Arg.jids_in(jids)
end
