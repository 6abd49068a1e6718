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

-- Fail a checked job. `fields` holds state, queue, worker, failure.
function Job.fail(jid, fields, worker, group, message, data)
  local queue = fields.queue or ''
  Job.unindex(jid, fields)
  if fields.state == 'depends' then Job.drop_dependencies(jid) end
  local key = Keys.job(jid)
  redis.call('hset', key, 'state', 'failed', 'worker', '', 'expires', 0, 'updated', Engine.now,
    'failure', cjson.encode({ group = group, message = message, when = Engine.now, worker = worker }))
  redis.call('hdel', key, 'grace')
  if data then redis.call('hset', key, 'data', data) end
  redis.call('sadd', Keys.failures(), group)
  redis.call('lpush', Keys.failed(group), jid)
  Job.bound_failed(group)
  Job.history(jid, 'failed', { worker = worker, group = group })
  if queue ~= '' then
    Stats.bump(queue, 'failures', 1)
    Stats.bump(queue, 'failed', 1)
  end
  Events.tracked('failed', jid)
  Events.log({ jid = jid, event = 'failed', worker = worker, group = group, message = message })
  Deps.settle(jid, 'failed')
end

