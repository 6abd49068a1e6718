-- runs.statuses: what the newest runs are doing, for monitoring (ours).
--
--   runs.statuses [count=100] -> JSON [{id, flow, status}], newest first, `count` 0 to 1000;
--                                status as include/runs.lua's Runs.status decides it (running,
--                                canceled, failed, expired, blocked, succeeded)
--
-- One call whatever the number of runs asked for; a running run costs a few reads (its first
-- active job ends the look), a finished one a read per job.
-- Errors: INVALID.
-- @include runs

api['runs.statuses'] = function(args)
  local cmd = 'RunsStatuses'
  local count = Arg.optional_integer(cmd, 'count', args[1], 100, 0, 1000)
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local out = {}
  if count > 0 then
    for _, run_id in ipairs(redis.call('zrevrange', Keys.runs(), 0, count - 1)) do
      local flow = redis.call('hget', Keys.run(run_id), 'flow')
      if flow then
        out[#out + 1] = { id = run_id, flow = flow, status = Runs.status(run_id) }
      end
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end
