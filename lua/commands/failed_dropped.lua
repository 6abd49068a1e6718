-- failed.dropped: how many failed jobs each group dropped to stay within max-failed-per-group
-- (hworker's bounded failed queue; include/failed_bound.lua).
--
--   failed.dropped [group...]  -> JSON {group: dropped}: the given groups (0 for none dropped),
--                                 or every group that ever dropped a job when none are given
--
-- The counts only grow; a group keeps its count after its last failed job left it.
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include keys

api['failed.dropped'] = function(args)
  local cmd = 'FailedDropped'
  for _, group in ipairs(args) do Arg.id(cmd, 'group', group) end
  local out = {}
  if #args == 0 then
    local all = redis.call('hgetall', Keys.failed_dropped())
    for i = 1, #all, 2 do out[all[i]] = tonumber(all[i + 1]) end
  else
    for _, group in ipairs(args) do
      out[group] = tonumber(redis.call('hget', Keys.failed_dropped(), group) or 0)
    end
  end
  if next(out) == nil then return '{}' end
  return cjson.encode(out)
end
