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

api['stats'] = function(args)
  local queue = Arg.id('Stats', 'queue', args[1])
  local day = Stats.day(Arg.number('Stats', 'date', args[2], 0))
  local counters = redis.call('hmget', Keys.stats('stats', day, queue), 'retries', 'failed', 'failures')
  return cjson.encode({
    retries = tonumber(counters[1] or 0),
    failed = tonumber(counters[2] or 0),
    failures = tonumber(counters[3] or 0),
    wait = Stats.summary('wait', day, queue),
    run = Stats.summary('run', day, queue),
    calls = Stats.calls(day, queue),
  })
end
