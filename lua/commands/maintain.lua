-- maintain, maintain.retention: the scheduler service's housekeeping, one bounded call per batch
-- (ours). Workers do the same work lazily when they pop; these calls do it on time even when no
-- worker pops.
--
--   maintain            queue, [limit=100]  -> JSON {promoted, spawned, reclaimed, failed}
--   maintain.retention  [limit=100], [offset=0] -> JSON {jobs, runs, kept}
--
-- maintain: due recurring jobs of the queue spawn their children, due scheduled jobs become
-- waiting, and expired locks are reaped as pop.lean reaps them (Queue.invalidate_locks: a grace
-- period first, then our rule: the job's retries are left alone): a reclaimed job waits again
-- (history 'reclaimed'), one past lost-worker-retries fails in group worker-lost (`failed`
-- counts them). Each of the three handles at most `limit` jobs; a count equal to `limit` means
-- there may be more.
-- maintain.retention drops completed jobs beyond `jobs-history` / `jobs-history-count`, and the
-- records of runs submitted more than `jobs-history` seconds ago that are no longer running
-- (their jobs follow their own retention), at most `limit` of each, oldest first. Running runs
-- are kept: `kept` says how many were passed over, the `offset` of the next call.
-- Errors: INVALID.
-- @include args
-- @include config
-- @include job
-- @include queue
-- @include reclaim
-- @include runs
-- @include ttl

local function reclaim(queue, jid)
  local fields = Job.fields(jid, 'priority', 'worker')
  redis.call('zrem', Keys.locks(queue), jid)
  redis.call('hset', Keys.job(jid), 'worker', '', 'expires', 0, 'updated', Engine.now)
  Job.history(jid, 'reclaimed', { worker = fields.worker or '' })
  Queue.enqueue(queue, jid, tonumber(fields.priority) or 0)
end

api['maintain'] = function(args)
  local cmd = 'Maintain'
  local queue = Arg.id(cmd, 'queue', args[1])
  local limit = Arg.optional_integer(cmd, 'limit', args[2], 100, 1, 10000)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local spawned = Queue.spawn_recurring(queue, limit)
  local promoted = Queue.promote(queue, limit)
  local reclaimed, failed = Queue.invalidate_locks(queue, limit)
  for _, jid in ipairs(reclaimed) do reclaim(queue, jid) end
  Ttl.expire_due(queue, limit) -- jobs past their ttl deadline expire (include/ttl.lua)
  return cjson.encode({ promoted = promoted, spawned = spawned, reclaimed = #reclaimed,
    failed = failed })
end

local function drop_run(run_id)
  local flow = redis.call('hget', Keys.run(run_id), 'flow')
  redis.call('del', Keys.run(run_id), Keys.run_jobs(run_id), Keys.run_canceled(run_id),
    Keys.run_counts(run_id))
  Job.drop_kept_logs(run_id)
  redis.call('zrem', Keys.runs(), run_id)
  if flow then redis.call('zrem', Keys.flow_runs(flow), run_id) end
end

api['maintain.retention'] = function(args)
  local cmd = 'MaintainRetention'
  local limit = Arg.optional_integer(cmd, 'limit', args[1], 100, 1, 10000)
  local offset = Arg.optional_integer(cmd, 'offset', args[2], 0, 0, Engine.MAX_OFFSET)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local jobs = Job.expire_completed(limit)
  local cutoff = Engine.now - Config.number('jobs-history')
  local old = redis.call('zrangebyscore', Keys.runs(), '-inf', cutoff, 'LIMIT', offset, limit)
  local runs, kept = 0, 0
  for _, run_id in ipairs(old) do
    if Runs.status(run_id) == 'running' then
      kept = kept + 1
    else
      drop_run(run_id)
      runs = runs + 1
    end
  end
  return cjson.encode({ jobs = jobs, runs = runs, kept = kept })
end
