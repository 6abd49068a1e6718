-- events: what the engine publishes (channels listed in lua/README.md).
-- @include keys
-- @include engine
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

-- The `put` event on `P log`, as Events.log writes it (spliced: every put sends one).
function Events.log_put(jid, queue)
  Events.publish('log', '{"jid":' .. JsonText.string(jid) .. ',"event":"put","queue":' ..
    JsonText.string(queue) .. '}')
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
    if not Engine.qless then Events.publish('ready:' .. queue, queue) end
  end
end
