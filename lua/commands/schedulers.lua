-- scheduler.ping, scheduler.forget, schedulers: the health of the scheduler services (ours).
--
--   scheduler.ping    id, info JSON object  -> 'ok'; records now as the service's last tick
--                                              and its info (up to 64 KiB and 100 levels
--                                              deep), written only when it changed
--   scheduler.forget  id                    -> 'forgotten' | 'missing' (a clean shutdown)
--   schedulers        [count=100]           -> JSON list [{id, last_tick, info}], newest first
--
-- A service pings at each tick (in the round trip of its last fire batch when it fires), so a
-- supervisor can tell a stuck or dead one by the age of its last tick (`flows scheduler
-- --health`). Services silent for longer than `max-worker-age` seconds are dropped by the next
-- ping (a bounded number per call).
-- A service that leaves the list (forgotten, or dropped so) leaves the time it was last seen on
-- its source's catalogue (`seen`, when its info names a `source` that published files:
-- commands/catalog.lua), so `flows sources` can say when a source whose services are gone was
-- last seen.
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include config
-- @include schedules

local PRUNE_PER_CALL = 100

-- The service `id` (its info still kept) was last seen at `when`: so was its source.
local function leave(id, when)
  local info = redis.call('get', Keys.scheduler(id))
  local ok, decoded = pcall(cjson.decode, info or '')
  if not ok or type(decoded) ~= 'table' or type(decoded.source) ~= 'string' then return end
  local held = redis.call('hget', Keys.catalog(), decoded.source)
  if not held then return end
  local meta = cjson.decode(held)
  if (tonumber(meta.seen) or 0) >= when then return end
  meta.seen = when
  redis.call('hset', Keys.catalog(), decoded.source, cjson.encode(meta))
end

api['scheduler.ping'] = function(args)
  local cmd = 'SchedulerPing'
  local id = Arg.id(cmd, 'id', args[1])
  local info = Arg.json(cmd, 'info', args[2], 'object', 65536, Arg.MAX_NESTING)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local stale = redis.call('zrangebyscore', Keys.schedulers(), '-inf',
    Engine.now - Config.number('max-worker-age'), 'WITHSCORES', 'LIMIT', 0, PRUNE_PER_CALL)
  for i = 1, #stale, 2 do
    leave(stale[i], tonumber(stale[i + 1]))
    redis.call('zrem', Keys.schedulers(), stale[i])
    redis.call('del', Keys.scheduler(stale[i]))
  end
  redis.call('zadd', Keys.schedulers(), Engine.now, id)
  -- A service pings every second or so, its info mostly the same: each write is an entry of the
  -- append-only file and the replicas' stream, a read is not.
  local key = Keys.scheduler(id)
  if redis.call('get', key) ~= info then redis.call('set', key, info) end
  return 'ok'
end

api['scheduler.forget'] = function(args)
  local id = Arg.id('SchedulerForget', 'id', args[1])
  if redis.call('zscore', Keys.schedulers(), id) == false then return 'missing' end
  leave(id, Engine.now)
  redis.call('zrem', Keys.schedulers(), id)
  redis.call('del', Keys.scheduler(id))
  return 'forgotten'
end

api['schedulers'] = function(args)
  local count = Arg.optional_integer('Schedulers', 'count', args[1], 100, 1, 1000)
  local out = {}
  local page = redis.call('zrevrange', Keys.schedulers(), 0, count - 1, 'WITHSCORES')
  for i = 1, #page, 2 do
    local info = redis.call('get', Keys.scheduler(page[i]))
    local ok, decoded = pcall(cjson.decode, info or '{}')
    table.insert(out, { id = page[i], last_tick = Schedules.time(tonumber(page[i + 1])),
      info = ok and decoded or {} })
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end
