-- schedule.register, schedule.get, schedule.list, schedule.pause, schedule.resume,
-- schedule.unregister: cron schedules of flows, registered by the scheduler service (ours).
--
--   schedule.register   name, definition JSON, source, next, expected_hash, expected_next
--                        -> 'registered' | 'updated' | 'unchanged' | 'conflict' | 'owned'
--   schedule.get        name, [skips=20]      -> JSON schedule (fields as in include/schedules.lua,
--                                                with source, next, last_run_status and the
--                                                newest `skips` skip records), or nil
--   schedule.list       [offset=0], [count=100], [brief] -> JSON list of schedules by name,
--                                                without source; with brief '1' only
--                                                {name, hash, file, origin, path} of each
--                                                (cheap for 10,000s)
--   schedule.pause      name, [note]          -> 'paused'
--   schedule.resume     name, expected_next, next, skips JSON -> 'resumed' | 'not-paused' |
--                                                'conflict'
--   schedule.unregister name, [expected_hash] -> 'unregistered' | 'missing' | 'conflict'
--
-- The engine knows no cron: the service computes fire times (scheduler/cron/) and hands the
-- engine the next one (`next`, '' when the schedule has none left). Every write that moves a
-- score is a compare-and-set: `expected_next` is the score the caller computed from ('' for
-- none) and `expected_hash` the content hash it replaces ('' for a new schedule); when either
-- changed meanwhile the reply is 'conflict' and nothing is written. Registering the content
-- already registered from the same path is 'unchanged' (several services register the same
-- files; a file moved within its folder is registered again, so the schedule names it). Registering
-- anew keeps the operator's pause, the last run, counters and skip records.
-- `definition.origin` (optional, an id) names the folder of flow files (the service's source)
-- the schedule belongs to, `definition.path` its file within that folder: a schedule belongs to
-- one origin, and registering it from another is refused with 'owned' (unregister it first).
-- A schedule registered without an origin is taken over by the first origin that registers it.
-- The definition must be an object with `flow` (an id), `cron` (a non-empty list of strings),
-- `timezone` (a string), `overlap` (skip, buffer_one, allow, cancel_running), `catchup` (none,
-- latest, all) and optionally `paused` (boolean); the rest is the service's and kept verbatim.
-- schedule.resume moves the score past the ticks that came due while paused, recording them
-- as skipped (`skips`), and is refused with WRONGSTATE when the file itself says paused.
-- Errors: INVALID, TOOLARGE, NOTFOUND (pause, resume), WRONGSTATE (resume).
-- @include args
-- @include schedules

local MAX_CRON = 64

local function check_definition(cmd, text)
  local _, d = Arg.json(cmd, 'definition', text, 'object', Schedules.MAX_DEFINITION_BYTES)
  if type(d.flow) ~= 'string' then Arg.fail(cmd, 'definition.flow must be a string') end
  Arg.id(cmd, 'definition.flow', d.flow)
  if type(d.cron) ~= 'table' or #d.cron == 0 or #d.cron > MAX_CRON then
    Arg.fail(cmd, 'definition.cron must be a list of 1 to ' .. MAX_CRON .. ' expressions')
  end
  for i, expr in ipairs(d.cron) do
    if type(expr) ~= 'string' or expr == '' then
      Arg.fail(cmd, 'definition.cron[' .. i .. '] must be a non-empty string')
    end
  end
  if type(d.timezone) ~= 'string' or d.timezone == '' then
    Arg.fail(cmd, 'definition.timezone must be a non-empty string')
  end
  if not Schedules.OVERLAP[d.overlap] then
    Arg.fail(cmd, 'definition.overlap must be one of skip, buffer_one, allow, cancel_running: ' ..
      Arg.shown(d.overlap))
  end
  if not Schedules.CATCHUP[d.catchup] then
    Arg.fail(cmd, 'definition.catchup must be one of none, latest, all: ' .. Arg.shown(d.catchup))
  end
  if d.paused ~= nil and d.paused ~= cjson.null and type(d.paused) ~= 'boolean' then
    Arg.fail(cmd, 'definition.paused must be a boolean')
  end
  return d
end

api['schedule.register'] = function(args)
  local cmd = 'ScheduleRegister'
  local name = Schedules.name(cmd, args[1])
  local definition = check_definition(cmd, args[2])
  local source = Arg.text(cmd, 'source', args[3], Schedules.MAX_SOURCE_BYTES)
  local next = Arg.optional_number(cmd, 'next', args[4], nil, 0)
  local expected_hash = args[5] or ''
  if expected_hash ~= '' then Arg.id(cmd, 'expected_hash', expected_hash) end
  local expected_next = Arg.optional_number(cmd, 'expected_next', args[6], nil, 0)
  if args[7] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local hash = definition.hash
  if type(hash) ~= 'string' then Arg.fail(cmd, 'definition.hash must be a string') end
  Arg.id(cmd, 'definition.hash', hash)
  local origin, path = definition.origin, definition.path
  if origin == nil or origin == cjson.null then origin = '' end
  if origin ~= '' then
    if type(origin) ~= 'string' then Arg.fail(cmd, 'definition.origin must be a string') end
    Arg.id(cmd, 'definition.origin', origin)
  end
  if type(path) ~= 'string' then path = '' end

  local key = Keys.schedule(name)
  local held = redis.call('hmget', key, 'hash', 'origin', 'path')
  local current, owner = held[1], held[2] or ''
  if owner ~= '' and owner ~= origin then return 'owned' end
  if current == hash and owner == origin and (held[3] or '') == path then return 'unchanged' end
  if (current or '') ~= expected_hash then return 'conflict' end
  if not Schedules.same_score(redis.call('zscore', Keys.schedules(), name), expected_next) then
    return 'conflict'
  end

  redis.call('hset', key, 'name', name, 'flow', definition.flow, 'hash', hash,
    'file', type(definition.file) == 'string' and definition.file or '', 'definition', args[2],
    'source', source, 'overlap', definition.overlap, 'file_paused', definition.paused == true and '1' or '0',
    'origin', origin, 'path', path, 'updated', Schedules.time(Engine.now))
  if not current then
    redis.call('hset', key, 'registered', Schedules.time(Engine.now), 'fired', 0, 'skipped', 0,
      'triggered', 0)
  end
  redis.call('zadd', Keys.schedule_names(), 0, name)
  Schedules.move(name, next)
  Events.log({ event = 'schedule_registered', schedule = name, hash = hash, previous = current or '' })
  if current then return 'updated' end
  return 'registered'
end

api['schedule.get'] = function(args)
  local cmd = 'ScheduleGet'
  local name = Schedules.name(cmd, args[1])
  local count = Arg.optional_integer(cmd, 'skips', args[2], 20, 0, Schedules.SKIPS_KEPT)
  local schedule = Schedules.read(name, true)
  if not schedule then return nil end
  schedule.skips = Schedules.skips(name, count)
  if #schedule.skips == 0 then schedule.skips = nil end
  return cjson.encode(schedule)
end

api['schedule.list'] = function(args)
  local cmd = 'ScheduleList'
  local offset = Arg.optional_integer(cmd, 'offset', args[1], 0, 0, Engine.MAX_OFFSET)
  local count = Arg.optional_integer(cmd, 'count', args[2], 100, 0, 1000)
  local brief = args[3] or ''
  if brief ~= '' and brief ~= '1' then Arg.fail(cmd, 'Arg "brief" must be 1 or empty: ' .. Arg.shown(brief)) end
  if args[4] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local out = {}
  if count > 0 then
    for _, name in ipairs(redis.call('zrange', Keys.schedule_names(), offset, offset + count - 1)) do
      local schedule
      if brief == '1' then
        local f = redis.call('hmget', Keys.schedule(name), 'hash', 'file', 'origin', 'path')
        if f[1] then
          schedule = { name = name, hash = f[1], file = f[2] or '', origin = f[3] or '',
            path = f[4] or '' }
        end
      else
        schedule = Schedules.read(name, false)
      end
      if schedule then table.insert(out, schedule) end
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

local function existing(cmd, name)
  local key = Keys.schedule(name)
  local fields = redis.call('hmget', key, 'hash', 'paused', 'file_paused')
  if not fields[1] then Err.raise('NOTFOUND', cmd .. '(): no schedule ' .. name) end
  return key, fields
end

api['schedule.pause'] = function(args)
  local cmd = 'SchedulePause'
  local name = Schedules.name(cmd, args[1])
  local note = args[2] or ''
  if note ~= '' then Arg.text(cmd, 'note', note, Schedules.MAX_REASON_BYTES) end
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local key = existing(cmd, name)
  redis.call('hset', key, 'paused', '1', 'paused_at', Schedules.time(Engine.now), 'pause_note', note)
  Events.log({ event = 'schedule_paused', schedule = name, note = note })
  return 'paused'
end

api['schedule.resume'] = function(args)
  local cmd = 'ScheduleResume'
  local name = Schedules.name(cmd, args[1])
  local expected_next = Arg.optional_number(cmd, 'expected_next', args[2], nil, 0)
  local next = Arg.optional_number(cmd, 'next', args[3], nil, 0)
  local skips = Schedules.parse_skips(cmd, args[4])
  if args[5] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local key, fields = existing(cmd, name)
  if fields[3] == '1' then
    Err.raise('WRONGSTATE', cmd .. '(): schedule ' .. name ..
      ' is paused in its file (schedule.paused: true): change the file to resume it')
  end
  if fields[2] ~= '1' then return 'not-paused' end
  if not Schedules.same_score(redis.call('zscore', Keys.schedules(), name), expected_next) then
    return 'conflict'
  end
  Schedules.record_skips(name, skips)
  Schedules.move(name, next)
  redis.call('hdel', key, 'paused', 'paused_at', 'pause_note')
  Events.log({ event = 'schedule_resumed', schedule = name })
  return 'resumed'
end

api['schedule.unregister'] = function(args)
  local cmd = 'ScheduleUnregister'
  local name = Schedules.name(cmd, args[1])
  local expected_hash = args[2] or ''
  if expected_hash ~= '' then Arg.id(cmd, 'expected_hash', expected_hash) end
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local current = redis.call('hget', Keys.schedule(name), 'hash')
  if not current then return 'missing' end
  if expected_hash ~= '' and current ~= expected_hash then return 'conflict' end
  redis.call('del', Keys.schedule(name), Keys.schedule_skips(name))
  redis.call('zrem', Keys.schedules(), name)
  redis.call('zrem', Keys.schedule_names(), name)
  redis.call('zrem', Keys.schedules_buffered(), name)
  Events.log({ event = 'schedule_unregistered', schedule = name, hash = current })
  return 'unregistered'
end
