-- deadline.sweep, deadline.count: flows' and steps' deadlines (include/deadlines.lua, ours).
--
--   deadline.sweep [limit=100] -> JSON {missed, looked}: due entries looked at (at most
--                                 `limit`, the earliest first) and how many were missed now
--   deadline.count             -> how many deadlines were missed in all (the metric
--                                 flows_deadlines_missed_total)
-- Errors: INVALID.
-- @include args
-- @include deadlines

api['deadline.sweep'] = function(args)
  local cmd = 'DeadlineSweep'
  local limit = Arg.optional_integer(cmd, 'limit', args[1], 100, 1, 10000)
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local missed, looked = Deadlines.sweep(limit)
  return cjson.encode({ missed = missed, looked = looked })
end

api['deadline.count'] = function(args)
  if args[1] ~= nil then Arg.fail('DeadlineCount', 'too many arguments') end
  return tonumber(redis.call('get', Keys.deadlines_missed()) or 0)
end
