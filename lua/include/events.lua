-- events: what the engine publishes (channels listed in lua/README.md), in each dialect's order
-- where they differ: a call of the qless bundle publishes what qless-core does, in its order
-- (Dialect.rules.qless_events).
-- @include keys
-- @include engine
-- @include dialect
-- @include json_text
local Events = {}

-- Queues that already got a `ready:<queue>` message in this call (reset by the dispatch).
Events.readied = {}

function Events.publish(channel, message)
  redis.call('publish', Keys.channel(channel), message)
end

-- A JSON event on `P log`.
function Events.log(event)
  Events.publish('log', cjson.encode(event))
end

-- The `put` event on `P log`, as Events.log writes it (spliced: every put sends one). `named`:
-- `jid` and `queue` are this call's arguments, checked by Arg.jid and Arg.name (JsonText.name).
function Events.log_put(jid, queue, named)
  local quote = named and JsonText.name or JsonText.string
  Events.publish('log', '{"jid":' .. quote(jid) .. ',"event":"put","queue":' .. quote(queue) .. '}')
end

-- The bare jid on `P <kind>` when the job is tracked. Returns whether it is.
function Events.tracked(kind, jid)
  if redis.call('zscore', Keys.tracked(), jid) then
    Events.publish(kind, jid)
    return true
  end
  return false
end

-- Tell a worker that it no longer holds a job (lock_lost, canceled, ...).
function Events.to_worker(worker, event, jid)
  if worker == nil or worker == '' then return end
  local message = cjson.encode({ jid = jid, event = event, worker = worker })
  Events.publish('w:' .. worker, message)
  Events.publish('log', message)
end

-- Wake workers blocked on this queue: jobs became waiting in it.
function Events.ready(queue)
  if not Events.readied[queue] then
    Events.readied[queue] = true
    -- Not a qless channel: a qless client's call does not publish it (idle workers of ours
    -- still get the job, from the hand-off that reads `readied`).
    if not Dialect.rules.qless_events then Events.publish('ready:' .. queue, queue) end
  end
end

-- A job failed (`exhausted`: how its retries ran out, as Job.fail takes it). Ours: the tracked
-- jid, then the `log` event. qless's: the `log` event first, none when `retry` ran out of
-- retries, the tracked jid first when a lock expired once too often.
function Events.failed(jid, worker, group, message, exhausted)
  local event = { jid = jid, event = 'failed', worker = worker, group = group, message = message }
  if not Dialect.rules.qless_events or exhausted == 'lock' then
    Events.tracked('failed', jid)
    Events.log(event)
  elseif not exhausted then
    Events.log(event)
    Events.tracked('failed', jid)
  else
    Events.tracked('failed', jid)
  end
end

-- A job (`fields`: its worker, queue, state) is canceled. Ours: its worker told when it was
-- running, the tracked jid, then the `log` event. qless's: one message on `log`, the same one to
-- the worker it names, then the tracked jid.
function Events.canceled(jid, fields)
  local event = { jid = jid, event = 'canceled', worker = fields.worker or '',
    queue = fields.queue or '' }
  if Dialect.rules.qless_events then
    local message = cjson.encode(event)
    Events.publish('log', message)
    if event.worker ~= '' then Events.publish('w:' .. event.worker, message) end
    Events.tracked('canceled', jid)
  else
    if fields.state == 'running' then
      Events.to_worker(fields.worker, 'canceled', jid)
    end
    Events.tracked('canceled', jid)
    Events.log(event)
  end
end
