-- stats: per queue and day, wait time (put -> pop) and run time (pop -> complete) as count,
-- mean, a streaming variance term and a histogram; and the counters failures, failed, retries,
-- and (ours, Tarantool's statistics by call) put, release, bury, kick, delete, touch, expired.
--
-- Histogram buckets: s0..s59 (seconds, first minute), m1..m59 (minutes, first hour),
-- h1..h23 (hours, first day), d1..d6 (days, the last one counting everything longer).
-- @include keys
-- @include engine
local Stats = {}

function Stats.day(when)
  when = math.floor(when)
  return when - (when % 86400)
end

-- Today's day (Stats.day of now) as text, for the keys of the bins every put, pop and complete
-- write: a number in a key name is formatted by sprintf each time, which costs as much as a
-- redis.call. A memo of a pure function (a day gives the same text whatever the data), so it may
-- outlive the call, unlike per-call state.
local today = { day = nil, text = nil }
function Stats.today()
  local day = Stats.day(Engine.now)
  if today.day ~= day then
    today.day, today.text = day, tostring(day)
  end
  return today.text
end

-- Histogram bucket names by unit, built once: s0..s59, m1..m59, h1..h23, d1..d6.
local BUCKETS = { s = {}, m = {}, h = {}, d = {} }
for i = 0, 59 do BUCKETS.s[i] = 's' .. i end
for i = 1, 59 do BUCKETS.m[i] = 'm' .. i end
for i = 1, 23 do BUCKETS.h[i] = 'h' .. i end
for i = 1, 6 do BUCKETS.d[i] = 'd' .. i end

local function bucket(seconds)
  if seconds < 60 then return BUCKETS.s[math.floor(seconds)] end
  if seconds < 3600 then return BUCKETS.m[math.floor(seconds / 60)] end
  if seconds < 86400 then return BUCKETS.h[math.floor(seconds / 3600)] end
  return BUCKETS.d[math.min(6, math.floor(seconds / 86400))]
end

-- Add samples (seconds, a list) to `kind` ('wait' or 'run') of a queue on today's bin, in one
-- read and one write for them all (the histogram buckets with the rest, not an HINCRBY each).
-- Welford's update, one sample after the other: numerically stable, no second pass, and the
-- figures of a batch are exactly those of its samples added one by one.
function Stats.add(queue, kind, samples)
  if #samples == 0 then return end
  if #samples == 1 then return Stats.sample(queue, kind, samples[1]) end
  local key = Keys.stats(kind, Stats.today(), queue)
  local names, position, slots = { 'total', 'mean', 'vk' }, {}, {}
  for i, seconds in ipairs(samples) do
    local slot = bucket(math.max(0, seconds))
    slots[i] = slot
    if not position[slot] then
      names[#names + 1] = slot
      position[slot] = #names
    end
  end
  local current = redis.call('hmget', key, unpack(names))
  local count = tonumber(current[1] or 0)
  local mean = tonumber(current[2] or 0)
  local vk = tonumber(current[3] or 0)
  local written = { 'total', 0, 'mean', 0, 'vk', 0 }
  for i = 4, #names do
    written[2 * i - 1], written[2 * i] = names[i], tonumber(current[i] or 0)
  end
  for i, seconds in ipairs(samples) do
    seconds = math.max(0, seconds)
    count = count + 1
    local delta = seconds - mean
    mean = mean + delta / count
    vk = vk + delta * (seconds - mean)
    local at = 2 * position[slots[i]]
    written[at] = written[at] + 1
  end
  written[2], written[4], written[6] = count, mean, vk
  redis.call('hset', key, unpack(written))
end

-- One sample: what Stats.add writes for a list of one (the same read and the same HSET, its
-- fields in the same order), without the tables that sort many samples into their buckets. A
-- lone pop or complete adds one.
function Stats.sample(queue, kind, seconds)
  local key = Keys.stats(kind, Stats.today(), queue)
  seconds = math.max(0, seconds)
  local slot = bucket(seconds)
  local current = redis.call('hmget', key, 'total', 'mean', 'vk', slot)
  local count = tonumber(current[1] or 0) + 1
  local mean = tonumber(current[2] or 0)
  local vk = tonumber(current[3] or 0)
  local delta = seconds - mean
  mean = mean + delta / count
  vk = vk + delta * (seconds - mean)
  redis.call('hset', key, 'total', count, 'mean', mean, 'vk', vk, slot, tonumber(current[4] or 0) + 1)
end

-- A job put and handed straight to an idle worker (include/handoff.lua): one put and one wait of
-- 0 seconds, counted together in the `handed` field of the day's wait statistics, one write
-- instead of three; Stats.summary and Stats.calls add them in where they are read.
function Stats.handed(queue)
  redis.call('hincrby', Keys.stats('wait', Stats.today(), queue), 'handed', 1)
end

-- `kind`'s figures of `queue` for `day`: {count, mean, std, histogram}. The waits of jobs handed
-- straight over (Stats.handed) join the others as samples of 0 seconds: Welford's update for a
-- batch of them (the mean shrinks by count/total, the variance term grows by mean² ·
-- count · handed / total).
function Stats.summary(kind, day, queue)
  local fields = {}
  local raw = redis.call('hgetall', Keys.stats(kind, day, queue))
  for i = 1, #raw, 2 do fields[raw[i]] = raw[i + 1] end
  local count = tonumber(fields.total or 0)
  local mean = tonumber(fields.mean or 0)
  local vk = tonumber(fields.vk or 0)
  local handed = tonumber(fields.handed or 0)
  if handed > 0 then
    local total = count + handed
    vk = vk + mean * mean * count * handed / total
    mean = mean * count / total
    count = total
    fields.s0 = tonumber(fields.s0 or 0) + handed
  end
  local std = 0
  if count > 1 then std = math.sqrt(vk / (count - 1)) end
  return { count = count, mean = mean, std = std, histogram = Stats.histogram(fields) }
end

function Stats.bump(queue, field, by, when)
  local day = when and Stats.day(when) or Stats.today()
  redis.call('hincrby', Keys.stats('stats', day, queue), field, by or 1)
end

-- The histogram as a list in bucket order.
function Stats.histogram(fields)
  local out = {}
  for i = 0, 59 do table.insert(out, tonumber(fields['s' .. i] or 0)) end
  for i = 1, 59 do table.insert(out, tonumber(fields['m' .. i] or 0)) end
  for i = 1, 23 do table.insert(out, tonumber(fields['h' .. i] or 0)) end
  for i = 1, 6 do table.insert(out, tonumber(fields['d' .. i] or 0)) end
  return out
end

-- Calls of the day `day` on `queue` (Tarantool's statistics by call): take and ack are the wait
-- and run samples (one per job popped / completed), the others counters.
function Stats.calls(day, queue)
  local c = redis.call('hmget', Keys.stats('stats', day, queue), 'put', 'release', 'bury', 'kick',
    'delete', 'touch', 'expired')
  local waits = redis.call('hmget', Keys.stats('wait', day, queue), 'total', 'handed')
  local handed = tonumber(waits[2]) or 0
  return {
    put = (tonumber(c[1]) or 0) + handed,
    take = (tonumber(waits[1]) or 0) + handed,
    ack = tonumber(redis.call('hget', Keys.stats('run', day, queue), 'total')) or 0,
    release = tonumber(c[2]) or 0,
    bury = tonumber(c[3]) or 0,
    kick = tonumber(c[4]) or 0,
    delete = tonumber(c[5]) or 0,
    touch = tonumber(c[6]) or 0,
    expire = tonumber(c[7]) or 0,
  }
end
