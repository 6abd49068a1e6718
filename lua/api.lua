-- api: the engine's entry point. Includes every command and dispatches a call to one.
--
-- Called as  EVALSHA <sha> <numkeys> [<prefix>] <command> <now> <args...>
--       or   FCALL <function> <numkeys> [<prefix>] <command> <now> <args...>
-- numkeys 0: keys live under 'ql:' (the qless layout); numkeys 1: under KEYS[1].
-- `now` is epoch seconds; the empty string means the server's clock.
-- After the command, the jobs it made waiting go to idle workers (include/handoff.lua).
-- Errors: UNKNOWNCOMMAND, INVALID (now, prefix), and whatever the command raises.
--
-- Two dialects, one engine (the table in docs/pages/engine.md): `Engine.dispatch(keys, args)`
-- (the qless bundle) speaks qless-core's dialect; `Engine.dispatch(keys, args, true)` (the
-- Functions library, and the script our own client loads for EVALSHA) is native. The qless
-- dialect is a translation at the edges (replies: include/qless.lua, its Qless.COMMANDS called
-- here instead of the command; events: include/events.lua) plus the rules of include/dialect.lua
-- that shared paths read by name where qless's behaviour differs.
-- Engine.dispatch_read is the read-only entry (FCALL_RO): the commands of include/reads.lua only.
-- @include engine
-- @include errors
-- @include args
-- @include dialect
-- @include events
-- @include qless
-- @include reads

local api = {}

-- @include commands/get
-- @include commands/config
-- @include commands/queues
-- @include commands/put
-- @include commands/pop
-- @include commands/complete
-- @include commands/fail
-- @include commands/retry
-- @include commands/heartbeat
-- @include commands/depends
-- @include commands/cancel
-- @include commands/priority
-- @include commands/tag
-- @include commands/track
-- @include commands/stats
-- @include commands/workers
-- @include commands/recur
-- @include commands/release
-- @include commands/touch
-- @include commands/bury
-- @include commands/throttle
-- @include commands/queue_admin
-- @include commands/worker_info
-- @include commands/flow
-- @include commands/run_admin
-- @include commands/run_read
-- @include commands/run_counts
-- @include commands/schedule
-- @include commands/schedule_fire
-- @include commands/schedulers
-- @include commands/maintain
-- @include commands/queue_counts
-- @include commands/worker_list
-- @include commands/failed_dropped
-- @include commands/doctor
-- @include commands/doctor_repair
-- @include commands/await
-- @include commands/log
-- @include commands/lease
-- @include commands/wait
-- @include commands/backfill
-- @include commands/subflow
-- @include commands/deadline
-- @include commands/explain
-- @include commands/cache
-- @include commands/catalog

-- 'config.get' -> 'ConfigGet': the name a command's errors start with.
local function display(command)
  return (string.gsub('.' .. command, '%.(%l)', string.upper))
end

local function clock(command, value)
  if value == nil or value == '' then
    local time = redis.call('time')
    return tonumber(time[1]) + tonumber(time[2]) / 1000000
  end
  -- The common case checked here; only a bad value pays for the display name (a gsub) that
  -- Arg.number's error starts with, by letting it raise that error.
  local n = tonumber(value)
  if n and n >= 0 and n - n == 0 then return n end -- (n - n is NaN for an infinity or NaN)
  return Arg.number(display(command), 'now', value, 0)
end

-- A per-call set emptied for the next call: in place when it holds one entry (a lone put readies
-- one queue and finds nobody idle on it), which spares a new table and its collection; a new
-- table otherwise. Returns the set to use.
function Engine.emptied(set)
  local first = next(set)
  if first == nil then return set end
  if next(set, first) == nil then
    set[first] = nil
    return set
  end
  return {}
end

local function run(keys, args, native)
  local command = args[1]
  -- The qless dialect's own reading of a command, where qless answers from other data.
  local handler = not native and Qless.COMMANDS[command] or api[command]
  if not handler then
    Err.raise('UNKNOWNCOMMAND', 'Engine(): unknown command ' .. string.format('%q', tostring(command)))
  end
  if #keys > 1 then Arg.fail('Engine', 'at most one key (the prefix) may be given, got ' .. #keys) end
  if #keys == 1 then
    if keys[1] == '' or #keys[1] > Arg.MAX_ID_BYTES then
      Arg.fail('Engine', 'the key prefix must be 1 to ' .. Arg.MAX_ID_BYTES .. ' bytes')
    end
    Engine.prefix = keys[1]
  else
    Engine.prefix = 'ql:'
  end
  Engine.now = clock(command, args[2])
  Dialect.rules = native and Dialect.OURS or Dialect.QLESS
  -- Per-call state, emptied only when the last call left something in it (most calls leave
  -- nothing, or one queue: no table to allocate, and none for the garbage collector to sweep).
  Events.readied = Engine.emptied(Events.readied)
  Handoff.nobody = Engine.emptied(Handoff.nobody)
  RunCounts.reset()
  if next(Notify.ended) ~= nil then Notify.reset() end
  -- unpack() into a constructor sizes the table once; a long argument list (flow.submit, tag
  -- lists) is copied instead, as unpack of it would overflow Lua's C stack.
  local rest
  if #args <= 1002 then
    rest = { unpack(args, 3) }
  else
    rest = {}
    for i = 3, #args do rest[i - 2] = args[i] end
  end
  local result = handler(rest)
  Handoff.deliver()
  RunCounts.settle() -- after the hand-offs, which start jobs too
  Notify.settle() -- a run's end, read from the settled counts
  if not native then return Qless.reply(command, result, rest) end
  return result
end

function Engine.dispatch(keys, args, native)
  Engine.bind_globals()
  local ok, result = pcall(run, keys, args, native)
  if ok then return result end
  local reply = Err.reply(result, display(tostring(args[1])))
  if not native then return Qless.error(reply) end
  return reply
end

function Engine.dispatch_read(keys, args)
  if not Reads[args[1]] then
    return redis.error_reply('INVALID Engine(): ' .. string.format('%q', tostring(args[1]))
      .. ' is not a read-only command; call it through the read-write entry')
  end
  return Engine.dispatch(keys, args, true) -- ours: the native dialect
end
