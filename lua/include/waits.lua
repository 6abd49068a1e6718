-- waits: jobs no worker runs, completed by a signal (a flow's `wait:` steps, ours).
--
-- A job put with a `wait` spec (flow.submit's job option: {signal, timeout, on_timeout,
-- outputs}) is indexed like any job while it waits for dependencies; when nothing holds it back
-- any more it does not go to its queue's work queue but to state `awaiting`, listed in
-- `P awaiting` scored by when its wait times out (+inf: never). No pop looks there, so no worker
-- can take it. `wait.signal` completes it with the signal's data as its result, `wait.sweep`
-- times it out (commands/wait.lua). Its hash keeps `wait` (the spec, JSON), and while it awaits
-- `wait_since` (when it became ready) and `wait_at` (its deadline, '' for none).
--
--   Waits.parse(cmd, spec, p) -> the spec as canonical JSON text (INVALID when malformed)
--   Waits.arm(jid, queue, text) -> the job becomes awaiting from now
--   Waits.spec(text)            -> the decoded spec ({} when unreadable)
-- @include args
-- @include keys
-- @include engine
-- @include errors
-- @include events
-- @include job
-- @include notify
local Waits = {}

Waits.STATE = 'awaiting'
Waits.TIMEOUT_GROUP = 'wait-timeout'
Waits.ON_TIMEOUT = { fail = true, skip = true }
Waits.MAX_OUTPUTS = 100
local FIELDS = { signal = true, timeout = true, on_timeout = true, outputs = true }

local function fail(cmd, message)
  Err.raise('INVALID', cmd .. '(): Arg "wait": ' .. message)
end

-- A wait spec from a decoded job object (`p` is the put it belongs to: a wait has no delay and
-- no ttl, since no worker ever starts it).
function Waits.parse(cmd, spec, p)
  if type(spec) ~= 'table' or Arg.is_list(spec) and next(spec) ~= nil then
    fail(cmd, 'must be a JSON object {signal, timeout, on_timeout, outputs}')
  end
  for name in pairs(spec) do
    if not FIELDS[name] then fail(cmd, 'unknown field "' .. Arg.shown(name) .. '"') end
  end
  if type(spec.signal) ~= 'string' then fail(cmd, '"signal" must be a name') end
  Arg.id(cmd, 'wait.signal', spec.signal)
  local out = { signal = spec.signal, on_timeout = 'fail' }
  if spec.timeout ~= nil and spec.timeout ~= cjson.null then
    local t = spec.timeout
    if type(t) ~= 'number' or t ~= t or t <= 0 or t == math.huge then
      fail(cmd, '"timeout" must be a number of seconds more than 0: ' .. Arg.shown(t))
    end
    out.timeout = t
  end
  if spec.on_timeout ~= nil and spec.on_timeout ~= cjson.null then
    if not Waits.ON_TIMEOUT[spec.on_timeout] then
      fail(cmd, '"on_timeout" must be fail or skip: ' .. Arg.shown(spec.on_timeout))
    end
    out.on_timeout = spec.on_timeout
  end
  if spec.outputs ~= nil and spec.outputs ~= cjson.null then
    out.outputs = Arg.id_items(cmd, 'wait.outputs', spec.outputs, Arg.id, Waits.MAX_OUTPUTS)
  end
  if p.delay and p.delay > 0 then fail(cmd, 'a wait has no delay') end
  if p.ttl then fail(cmd, 'a wait has no ttl (its timeout bounds it)') end
  return cjson.encode(out)
end

function Waits.spec(text)
  local ok, spec = pcall(cjson.decode, text or '')
  if ok and type(spec) == 'table' then return spec end
  return {}
end

-- The job (out of every other index) awaits its signal from now on.
function Waits.arm(jid, queue, text)
  local spec = Waits.spec(text)
  local deadline = spec.timeout and Engine.now + spec.timeout or nil
  redis.call('hset', Keys.job(jid), 'state', Waits.STATE, 'wait_since', Engine.now,
    'wait_at', deadline and string.format('%.17g', deadline) or '', 'updated', Engine.now)
  redis.call('zadd', Keys.awaiting(), deadline or '+inf', jid)
  Job.history(jid, 'awaiting', { signal = spec.signal })
  Events.log({ jid = jid, event = 'awaiting', queue = queue, signal = spec.signal })
  Notify.job(jid, 'awaiting')
end
