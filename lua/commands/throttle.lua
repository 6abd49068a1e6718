-- throttle.set, throttle.unset, throttle.get: named throttles shared by every queue (ours).
--
--   throttle.set    name, limit   -> the limit; at most `limit` (0 and up) jobs put with
--                                    ('throttle', name) run at once, over all queues
--   throttle.unset  name          -> 1 if a limit was set, else 0; the throttle's jobs run freely
--   throttle.get    [name...]     -> JSON {name: {limit (null: none), running, parked}} for the
--                                    given throttles, or for every throttle with a limit, running
--                                    jobs or parked jobs when none given
--
-- A limit that rises (or goes) lets parked jobs of the throttle back into their queues in the
-- same call (include/slots.lua); one that falls below the running jobs stops none of them: new
-- ones start once enough have ended. Both log throttle_set / throttle_unset on P log.
-- Errors: INVALID.
-- @include args
-- @include slots
-- @include events

api['throttle.set'] = function(args)
  local cmd = 'ThrottleSet'
  local name = Arg.id(cmd, 'name', args[1])
  local limit = Arg.integer(cmd, 'limit', args[2], 0, Engine.MAX_OFFSET)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  redis.call('hset', Keys.throttles(), name, limit)
  Slots.refill_throttle(name)
  Events.log({ event = 'throttle_set', throttle = name, limit = limit })
  return limit
end

api['throttle.unset'] = function(args)
  local cmd = 'ThrottleUnset'
  local name = Arg.id(cmd, 'name', args[1])
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local removed = redis.call('hdel', Keys.throttles(), name)
  Slots.refill_throttle(name)
  Events.log({ event = 'throttle_unset', throttle = name })
  return removed
end

local function parked(name)
  local total = 0
  for _, queue in ipairs(redis.call('smembers', Keys.throttle_queues(name))) do
    total = total + redis.call('zcard', Keys.throttle_parked(name, queue))
  end
  return total
end

api['throttle.get'] = function(args)
  local names = {}
  for _, name in ipairs(args) do table.insert(names, Arg.id('ThrottleGet', 'name', name)) end
  if #names == 0 then
    local seen = {}
    for _, key in ipairs({ Keys.throttles(), Keys.throttle_running() }) do
      for _, name in ipairs(redis.call('hkeys', key)) do
        if not seen[name] then seen[name] = true; table.insert(names, name) end
      end
    end
  end
  local out = {}
  for _, name in ipairs(names) do
    out[name] = {
      limit = Slots.throttle_limit(name) or cjson.null,
      running = tonumber(redis.call('hget', Keys.throttle_running(), name)) or 0,
      parked = parked(name),
    }
  end
  if next(out) == nil then return '{}' end
  return cjson.encode(out)
end
