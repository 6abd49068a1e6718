-- failing: a job ends failed (fail, fail.held, retries exhausted by retry or by lock expiry).
-- The job goes to its group's list with {group, message, when, worker}, which keeps at most
-- max-failed-per-group jobs (include/failed_bound.lua); its dependents are then settled by
-- their trigger rules (include/triggers.lua).
-- @include keys
-- @include engine
-- @include events
-- @include stats
-- @include job
-- @include triggers
-- @include failed_bound
-- @include notify
-- @include dialect

-- Fail a checked job. `fields` holds state, queue, worker, failure. `exhausted` is how the job's
-- retries ran out ('lock': its lock expired once too often; 'retry': the retry command), or nil.
-- The qless dialect writes what qless-core writes then: a history entry without the worker, a
-- failure naming no worker when the engine wrote the message, and for a retry only the jid on
-- the tracked `failed` channel (no log event).
function Job.fail(jid, fields, worker, group, message, data, exhausted)
  local queue = fields.queue or ''
  Job.unindex(jid, fields)
  if fields.state == 'depends' then Job.drop_dependencies(jid) end
  local key = Keys.job(jid)
  local when, named, entry = Engine.now, worker, { worker = worker, group = group }
  if Dialect.rules.failure_as_qless then
    if exhausted then entry.worker = nil end
    if exhausted == 'lock' or (exhausted == 'retry' and fields.defaulted) then
      named = ''
    else
      when = math.floor(Engine.now)
    end
  end
  redis.call('hset', key, 'state', 'failed', 'updated', Engine.now,
    'failure', cjson.encode({ group = group, message = message, when = when, worker = named }))
  -- No worker and no expiry, their defaults (Job.DEFAULTS); a claim means nothing once it
  -- failed (cache.lua).
  redis.call('hdel', key, 'worker', 'expires', 'grace', 'cclaim')
  if data then redis.call('hset', key, 'data', data) end
  redis.call('sadd', Keys.failures(), group)
  redis.call('lpush', Keys.failed(group), jid)
  Job.bound_failed(group)
  Job.history(jid, 'failed', entry)
  if queue ~= '' then
    Stats.bump(queue, 'failures', 1)
    Stats.bump(queue, 'failed', 1)
  end
  Events.failed(jid, worker, group, message, exhausted)
  Deps.settle(jid, 'failed')
  Notify.job(jid, 'failure', nil, exhausted)
end
