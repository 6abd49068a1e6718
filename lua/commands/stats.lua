-- stats: a queue's statistics for the day containing `date`.
--
--   stats queue, date  -> JSON {retries, failed, failures,
--                               wait: {count, mean, std, histogram}, run: {...},
--                               calls: {put, take, ack, release, bury, kick, delete, touch,
--                                       expire}}   (calls: ours, Stats.calls)
--
-- Histogram buckets are described in include/stats.lua.
-- Errors: INVALID.
-- @include args
-- @include stats

local function summary(kind, day, queue)
  local fields = {}
  local raw = redis.call('hgetall', Keys.stats(kind, day, queue))
  for i = 1, #raw, 2 do fields[raw[i]] = raw[i + 1] end
  local count = tonumber(fields.total or 0)
  local std = 0
  if count > 1 then std = math.sqrt(tonumber(fields.vk or 0) / (count - 1)) end
  return { count = count, mean = tonumber(fields.mean or 0), std = std, histogram = Stats.histogram(fields) }
end

api['stats'] = function(args)
  local queue = Arg.id('Stats', 'queue', args[1])
  local day = Stats.day(Arg.number('Stats', 'date', args[2], 0))
  local counters = redis.call('hmget', Keys.stats('stats', day, queue), 'retries', 'failed', 'failures')
  return cjson.encode({
    retries = tonumber(counters[1] or 0),
    failed = tonumber(counters[2] or 0),
    failures = tonumber(counters[3] or 0),
    wait = summary('wait', day, queue),
    run = summary('run', day, queue),
    calls = Stats.calls(day, queue),
  })
end
