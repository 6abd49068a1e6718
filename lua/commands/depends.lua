-- depends: add or remove dependencies of a job that is waiting for them.
--
--   depends jid, 'on', jid...        -> true
--   depends jid, 'off', jid...       -> true
--   depends jid, 'off', 'all'        -> true
--
-- Only a job in state depends accepts this. When its last dependency goes, it is released
-- (waiting, or scheduled after the delay it was put with).
-- Errors: INVALID, NOTFOUND, WRONGSTATE.
-- @include args
-- @include job
-- @include queue
-- @include dialect

api['depends'] = function(args)
  local cmd = 'Depends'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local direction = Arg.present(cmd, 'direction', args[2])
  if direction ~= 'on' and direction ~= 'off' then
    Arg.fail(cmd, 'Arg "direction" must be "on" or "off": ' .. Arg.shown(direction))
  end
  local others = {}
  local all = direction == 'off' and args[3] == 'all' and #args == 3
  if not all then
    if #args < 3 then Arg.fail(cmd, 'no dependencies given') end
    for i = 3, #args do
      local other = Arg.jid(cmd, 'jid', args[i])
      if other == jid then Arg.fail(cmd, 'Arg "jid": job ' .. jid .. ' cannot depend on itself') end
      table.insert(others, other)
    end
  end
  local state = Job.state(jid)
  if not state then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist')
  end
  if state ~= 'depends' then
    Err.raise('WRONGSTATE', cmd .. '(): Job ' .. jid .. ' is not in the depends state: ' .. state)
  end

  if direction == 'on' then
    for _, other in ipairs(others) do
      local other_state = Job.state(other)
      if other_state and other_state ~= 'complete' then
        redis.call('sadd', Keys.dependencies(jid), other)
        redis.call('sadd', Keys.dependents(other), jid)
      end
    end
    return true
  end
  if all then
    Job.drop_dependencies(jid)
  else
    for _, other in ipairs(others) do
      redis.call('srem', Keys.dependencies(jid), other)
      redis.call('srem', Keys.dependents(other), jid)
    end
  end
  if redis.call('scard', Keys.dependencies(jid)) == 0 then
    Queue.release_dependent(jid)
  end
  return true
end
