-- wait.signal, wait.sweep, wait.get: jobs that await a signal (a flow's `wait:` steps, ours;
-- include/waits.lua says how a job comes to await one).
--
--   wait.signal jid, data JSON object, [by]  -> 'complete'
--   wait.sweep  [limit=100]                  -> JSON {failed, skipped}
--   wait.get    jid                          -> JSON {jid, state, queue, signal, timeout,
--                                               on_timeout, outputs, since, deadline}, or nil
--
-- wait.signal completes an awaiting job with `data` as its result (its outputs; at most
-- Arg.MAX_RESULT_NESTING levels deep, as complete's result), history
-- 'signaled' (signal, by), and settles its dependents in the same call, as a worker's complete
-- would. When the wait declares `outputs`, each of them must be a key of `data` (a refusal names
-- every one it lacks). Refused, changing nothing, for a job that is not awaiting: NOTFOUND (no
-- such job), WRONGSTATE (not a wait, or a wait whose needs are not done yet, or one already
-- done), the message naming the job and its state.
-- wait.sweep times out up to `limit` awaiting jobs whose deadline is at or before now, oldest
-- deadline first: on_timeout fail fails the job in group `wait-timeout` (its dependents then
-- follow their trigger rules, and run.retry makes it await again), skip completes it as skipped
-- (its all_success dependents are skipped too). A count equal to `limit` means there may be more.
-- wait.get reads a wait job's spec and, while it awaits, since when and until when.
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE.
-- @include args
-- @include job
-- @include queue
-- @include triggers
-- @include failing
-- @include waits
-- @include fanout
-- @include notify

-- The job ends complete with `result` (JSON text, or nil), `skipped` when it timed out so, its
-- history entry `what` with `extra`, and its dependents settled.
local function finish(jid, queue, result, what, extra)
  -- A wait whose signal feeds fan-outs (include/fanout.lua) expands them in this call, as a
  -- worker's complete does; decided before the first write.
  local fanouts
  local feeds = redis.call('hget', Keys.job(jid), 'feeds')
  if feeds and what ~= 'skipped' then fanouts = Fanout.plans(feeds, result, jid) end
  local written = { 'state', 'complete', 'worker', '', 'expires', 0, 'updated', Engine.now }
  if result then table.insert(written, 'result'); table.insert(written, result) end
  if what == 'skipped' then table.insert(written, 'skipped'); table.insert(written, 1) end
  redis.call('zrem', Keys.awaiting(), jid)
  redis.call('hset', Keys.job(jid), unpack(written))
  redis.call('zadd', Keys.completed(), Engine.now, jid)
  Job.history(jid, what, extra)
  Events.log({ jid = jid, event = what, queue = queue or '' })
  Events.tracked('completed', jid)
  if fanouts then
    for _, plan in ipairs(fanouts) do Fanout.apply(plan) end
  end
  if redis.call('exists', Keys.dependents(jid)) == 1 then
    Deps.settle(jid, what == 'skipped' and 'skipped' or 'complete')
    redis.call('del', Keys.dependents(jid))
  end
  Notify.job(jid, what == 'skipped' and 'skipped' or 'success')
end

-- Why a job that is not awaiting cannot take a signal.
local function refusal(cmd, jid, fields)
  local state = fields.state
  local why
  if not fields.wait then
    why = 'is not a wait (it is ' .. tostring(state) .. ')'
  elseif state == 'depends' then
    why = 'is not ready: its needs are not done yet (state depends)'
  elseif state == 'complete' then
    why = 'is already done (state complete)'
  else
    why = 'is ' .. tostring(state) .. ', not awaiting a signal'
  end
  Err.raise('WRONGSTATE', cmd .. '(): job ' .. jid .. ' ' .. why)
end

api['wait.signal'] = function(args)
  local cmd = 'WaitSignal'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local data, decoded = Arg.json(cmd, 'data', args[2], 'object', nil, Arg.MAX_RESULT_NESTING)
  local by = ''
  if args[3] ~= nil and args[3] ~= '' then by = Arg.text(cmd, 'by', args[3], 256) end
  if args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local fields = Job.fields(jid, 'queue', 'wait')
  if not fields then Err.raise('NOTFOUND', cmd .. '(): no job ' .. jid) end
  if fields.state ~= Waits.STATE or not fields.wait then refusal(cmd, jid, fields) end
  local spec = Waits.spec(fields.wait)
  local lacking = {}
  for _, name in ipairs(spec.outputs or {}) do
    if decoded[name] == nil then table.insert(lacking, '"' .. name .. '"') end
  end
  if #lacking > 0 then
    Arg.fail(cmd, 'Arg "data" lacks ' .. table.concat(lacking, ', ') .. ': the wait of job ' ..
      jid .. ' declares the outputs ' .. table.concat(spec.outputs, ', '))
  end
  finish(jid, fields.queue, data, 'signaled', { signal = spec.signal, by = by })
  return 'complete'
end

api['wait.sweep'] = function(args)
  local cmd = 'WaitSweep'
  local limit = Arg.optional_integer(cmd, 'limit', args[1], 100, 1, 10000)
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local due = redis.call('zrangebyscore', Keys.awaiting(), '-inf', Engine.now, 'LIMIT', 0, limit)
  local failed, skipped = 0, 0
  for _, jid in ipairs(due) do
    local fields = Job.fields(jid, 'queue', 'wait', 'worker', 'failure')
    if not fields or fields.state ~= Waits.STATE then
      redis.call('zrem', Keys.awaiting(), jid) -- not awaiting any more: a stale entry
    else
      local spec = Waits.spec(fields.wait)
      local message = 'no signal "' .. tostring(spec.signal) .. '" came within ' ..
        tostring(spec.timeout) .. ' seconds of the wait becoming ready'
      if spec.on_timeout == 'skip' then
        finish(jid, fields.queue, nil, 'skipped', { why = message })
        skipped = skipped + 1
      else
        Job.fail(jid, fields, 'flows', Waits.TIMEOUT_GROUP, message)
        failed = failed + 1
      end
    end
  end
  return cjson.encode({ failed = failed, skipped = skipped })
end

api['wait.get'] = function(args)
  local cmd = 'WaitGet'
  local jid = Arg.jid(cmd, 'jid', args[1])
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local fields = Job.fields(jid, 'queue', 'wait', 'wait_since', 'wait_at')
  if not fields or not fields.wait then return nil end
  local spec = Waits.spec(fields.wait)
  local out = { jid = jid, state = fields.state, queue = fields.queue, signal = spec.signal,
    timeout = spec.timeout, on_timeout = spec.on_timeout, outputs = spec.outputs }
  if fields.state == Waits.STATE then
    out.since = tonumber(fields.wait_since)
    out.deadline = tonumber(fields.wait_at)
  end
  return cjson.encode(out)
end
