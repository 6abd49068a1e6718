-- schedules: what the schedule commands share: checking names, scores and skip records,
-- recording skipped ticks, and describing a schedule (commands/schedule.lua, schedule_fire.lua).
--
-- A schedule is the hash `schedule:<name>`:
--   name, flow, hash (of the flow file's content), file, definition (JSON text, kept verbatim:
--   cron, timezone, start, end, jitter, catchup, window, max_runs, overlap, params, paused),
--   source (the flow file's text), overlap, file_paused ('1' when the file says paused: true),
--   origin (the folder of flow files it belongs to, '' for none), path (its file in that folder),
--   registered, updated; paused ('1'), paused_at, pause_note (set by schedule.pause);
--   last_run, last_tick, last_fired_at, fired (ticks whose run a fire made: each once), skipped,
--   triggered; buffered (a tick waiting for the previous run, overlap buffer_one); ended (when
--   it has no fire time left).
-- Its next fire time is its score in `schedules`; a buffered tick also sits in
-- `schedules-buffered`. Skipped ticks are JSON records {first, last, count, reason, at}, newest
-- first, in `schedule-skips:<name>`: a skip with the same reason as the newest record is merged
-- into it (count added), and at most Schedules.SKIPS_KEPT records are kept.
-- Times are stored as '%.17g' text, so a score read back compares exactly.
-- @include args
-- @include runs
local Schedules = {}

Schedules.SKIPS_KEPT = 100
Schedules.MAX_SKIPS = 1000        -- skip records one call may add
Schedules.MAX_REASON_BYTES = 1024
Schedules.MAX_DEFINITION_BYTES = Arg.MAX_PAYLOAD_BYTES
Schedules.MAX_SOURCE_BYTES = 4194304 -- a flow file's text
Schedules.OVERLAP = { skip = true, buffer_one = true, allow = true, cancel_running = true }
Schedules.CATCHUP = { none = true, latest = true, all = true }

-- Exact text of a time (a score or a tick), for hash fields and replies.
function Schedules.time(value)
  return string.format('%.17g', value)
end

-- A schedule's name is its flow's name: an id.
function Schedules.name(cmd, value)
  return Arg.name(cmd, 'name', value)
end

-- Whether the score Redis holds (text or nil) is `expected` (a number, or nil for none).
function Schedules.same_score(held, expected)
  if held == nil or held == false then return expected == nil end
  return expected ~= nil and tonumber(held) == expected
end

-- A JSON array of skip records {first, last, count (integer or null), reason}.
function Schedules.parse_skips(cmd, text)
  -- No skip (nearly every tick): what the checks below make of '[]', without decoding it.
  if text == '[]' then return {} end
  local _, list = Arg.json(cmd, 'skips', text, 'array')
  if #list > Schedules.MAX_SKIPS then
    Err.raise('TOOLARGE', cmd .. '(): Arg "skips" has ' .. #list .. ' records, more than the limit of ' ..
      Schedules.MAX_SKIPS)
  end
  local out = {}
  for i, skip in ipairs(list) do
    local where = 'skips[' .. i .. ']'
    if type(skip) ~= 'table' then Arg.fail(cmd, where .. ' is not an object') end
    local first = Arg.number(cmd, where .. '.first', skip.first, 0)
    local last = Arg.number(cmd, where .. '.last', skip.last, first)
    local count = nil
    if skip.count ~= nil and skip.count ~= cjson.null then
      count = Arg.integer(cmd, where .. '.count', skip.count, 1, Engine.MAX_OFFSET)
    end
    if type(skip.reason) ~= 'string' then Arg.fail(cmd, where .. '.reason is not a string') end
    Arg.text(cmd, where .. '.reason', skip.reason, Schedules.MAX_REASON_BYTES)
    out[i] = { first = first, last = last, count = count, reason = skip.reason }
  end
  return out
end

-- Record checked skips (from parse_skips) of schedule `name`; returns how many ticks they hold
-- (an uncounted group counts as one).
function Schedules.record_skips(name, skips)
  local key = Keys.schedule_skips(name)
  local total = 0
  for _, skip in ipairs(skips) do
    local count = skip.count or 1
    total = total + count
    local head = redis.call('lindex', key, 0)
    local merged = false
    if head then
      local newest = cjson.decode(head)
      if newest.reason == skip.reason and tonumber(newest.last) <= skip.first then
        newest.last = skip.last
        if newest.count ~= nil and newest.count ~= cjson.null and skip.count ~= nil then
          newest.count = newest.count + skip.count
        else
          newest.count = cjson.null
        end
        newest.at = Engine.now
        redis.call('lset', key, 0, cjson.encode(newest))
        merged = true
      end
    end
    if not merged then
      redis.call('lpush', key, cjson.encode({ first = skip.first, last = skip.last,
        count = skip.count or cjson.null, reason = skip.reason, at = Engine.now }))
    end
    -- Skipped ticks by reason, for the metrics (one read for every schedule, not its records).
    redis.call('hincrby', Keys.schedule(name), 'skips:' .. skip.reason, count)
    Events.log({ event = 'schedule_skipped', schedule = name, first = skip.first, last = skip.last,
      count = skip.count or cjson.null, reason = skip.reason })
  end
  if #skips > 0 then
    redis.call('ltrim', key, 0, Schedules.SKIPS_KEPT - 1)
    redis.call('hincrby', Keys.schedule(name), 'skipped', total)
  end
  return total
end

-- Move a schedule's score to `next`, or take it out of `schedules` when it has no fire time
-- left (`next` nil): then it is marked ended. `ended`: the schedule's `ended` field as the
-- caller read it in this call (false: read, and not there, so nothing to delete: a tick's fire
-- spares a write; nil: not read).
function Schedules.move(name, next, ended)
  if next == nil then
    redis.call('zrem', Keys.schedules(), name)
    redis.call('hset', Keys.schedule(name), 'ended', Schedules.time(Engine.now))
  else
    redis.call('zadd', Keys.schedules(), next, name)
    if ended ~= false then redis.call('hdel', Keys.schedule(name), 'ended') end
  end
end

-- The schedule as a table of its stored fields (text) plus `next` (score text or nil) and
-- `paused` / `file_paused` as booleans; nil when there is no such schedule.
function Schedules.read(name, with_source)
  local raw = redis.call('hgetall', Keys.schedule(name))
  if #raw == 0 then return nil end
  local out = {}
  for i = 1, #raw, 2 do out[raw[i]] = raw[i + 1] end
  if not with_source then out.source = nil end
  out.paused = out.paused == '1'
  out.file_paused = out.file_paused == '1'
  out.next = redis.call('zscore', Keys.schedules(), name) or nil
  out.last_run_status = Runs.status(out.last_run)
  return out
end

-- The newest `count` skip records of a schedule, decoded.
function Schedules.skips(name, count)
  local out = {}
  if count <= 0 then return out end
  for _, record in ipairs(redis.call('lrange', Keys.schedule_skips(name), 0, count - 1)) do
    table.insert(out, cjson.decode(record))
  end
  return out
end

-- The last run's state matters only where the overlap policy looks at it.
function Schedules.last_run_active(overlap, last_run)
  if overlap == 'allow' or not last_run or last_run == '' then return false end
  return Runs.active(last_run)
end
