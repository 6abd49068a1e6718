-- job.explain: why a job is where it is, read in one call (ours; read-only).
--
--   job.explain jid  -> JSON {jid, state, queue, reason, ...facts}, or nil when there is no job
--
-- `reason` is the one thing that decides what happens to the job next, with the facts a person
-- needs to act on it (scheduler/engine/explain.py turns each reason into a sentence):
--   complete | skipped                 done (skipped: with why, from its history)
--   cached {from}                      completed by the step cache with the result of `from`
--   failed {group, message}            failed; its dependents follow their trigger rules
--   expired                            not started before its ttl deadline
--   buried {message}                   out of circulation until it is kicked (kick.jobs, kick)
--   running {worker, expires}          a worker holds it, its lock valid until `expires`
--   stalled {worker, expires}          its worker's lock ran out: the next pop or maintain
--                                      reclaims it
--   awaiting {signal, since, deadline, on_timeout}  a wait step waiting for its signal
--   timed-out {signal, since, deadline, on_timeout}  a wait whose timeout passed: the next
--                                      wait.sweep fails or skips it (a signal until then
--                                      still completes it)
--   child-run {child}                  a sub-flow step waiting for its child run
--   upstream-failed {failed, rule}     a dependency failed, expired, is buried or gone, or waits
--                                      for one so (state `upstream_failed`): held back
--   dependencies {waiting, rule}       dependencies not done yet (each {jid, state}, at most 20;
--                                      `more`: how many beyond)
--   retry-delay {until, attempt, group} a retry waiting for its backoff delay
--   scheduled {until}                  put with a delay, due at `until`
--                                      (a scheduled job already due, `due`: since when, is
--                                      explained as a waiting one: the next pop or maintain
--                                      makes it waiting, so what holds a waiting job holds it)
--   queue-paused                       its queue is paused
--   concurrency-key {key, limit, holders}  parked: its key has no free slot (holders: the
--                                      running jobs of the key, at most 20)
--   throttle {throttle, limit, running, holders}  parked on a full throttle
--   queue-full {limit, running}        the queue's max-concurrency is reached
--   no-worker {last, last_seen}        no live worker listens on its queue (`last`: the one
--                                      heard from last that listened on it, when known: a
--                                      registered worker, or one gone since, kept in
--                                      `workers-last` by worker.deregister and the registry's
--                                      pruning)
--   queued {ahead, workers}            waiting its turn: `ahead` jobs pop before it
--   expiring {deadline}                its ttl deadline passed while it waited, was scheduled
--                                      or buried: the next pop or maintain expires it
-- Each also carries `deadline` when the job must start by then (its ttl).
-- Each reason is decided at `now`: a delay, a ttl deadline or a wait's timeout at or before
-- `now` has passed, as the calls acting on it count it (Queue.promote, Ttl.expire_due,
-- wait.sweep), and no longer explains the job.
-- Errors: INVALID, TOOLARGE.
-- @include args
-- @include job
-- @include registry
-- @include config
-- @include queue
-- @include work
-- @include ttl
-- @include waits
-- @include commands/worker_list
-- @include run_state

local Explain = { SHOWN = 20, SCANNED = 1000 }

function Explain.history_tail(jid)
  local entries = redis.call('lrange', Keys.history(jid), -5, -1)
  local out = {}
  for i = #entries, 1, -1 do
    local ok, entry = pcall(cjson.decode, entries[i])
    if ok and type(entry) == 'table' then table.insert(out, entry) end
  end
  return out
end

-- Running jobs (of `queue`, or of every queue) whose hash field `field` is `value`.
function Explain.holders(queues, field, value)
  local out, scanned = {}, 0
  for _, queue in ipairs(queues) do
    local running = redis.call('zrangebyscore', Keys.locks(queue), '-inf', '+inf', 'LIMIT', 0,
      Explain.SCANNED - scanned)
    scanned = scanned + #running
    for _, jid in ipairs(running) do
      if Job.get(jid, field) == value then
        table.insert(out, jid)
        if #out >= Explain.SHOWN then return out end
      end
    end
    if scanned >= Explain.SCANNED then break end
  end
  return out
end

-- A dependency's status as the decider (include/run_state.lua) gives it in a run's read: a job
-- waiting for dependencies is `upstream_failed` when one of them cannot progress, and so on up
-- a chain. `seen` memoizes; after Explain.SCANNED jobs one waiting for dependencies counts as
-- waiting (the explanation stays a bounded read).
function Explain.dep_status(jid, seen)
  if seen[jid] then return seen[jid] end
  local f = RunState.brief(jid)
  if not f[1] then return 'gone' end
  if f[1] == 'depends' and not f[3] then
    seen.looked = (seen.looked or 0) + 1
    if seen.looked > Explain.SCANNED then return 'waiting' end
  end
  seen[jid] = 'waiting' -- (a run has no cycle; this ends one if a job was put so)
  local status = RunState.job_status(f, function(dep) return Explain.dep_status(dep, seen) end, jid)
  seen[jid] = status
  return status
end

function Explain.dependencies(jid, out)
  local deps = redis.call('smembers', Keys.dependencies(jid))
  table.sort(deps)
  local waiting, failed, seen = {}, {}, {}
  for _, dep in ipairs(deps) do
    local state = Job.state(dep) or 'gone'
    -- What the decider calls upstream_failed: a dependency that cannot progress by itself
    -- (failed, expired, buried, gone, or itself held back by one of its own).
    local status = Explain.dep_status(dep, seen)
    if not RunState.PROGRESSING[status] then
      table.insert(failed, { jid = dep, state = status == 'upstream_failed' and status or state })
    elseif #waiting < Explain.SHOWN then
      table.insert(waiting, { jid = dep, state = state })
    end
  end
  out.rule = redis.call('hget', Keys.job(jid), 'trigger') or 'all_success'
  if #failed > 0 then
    out.reason, out.failed = 'upstream-failed', failed
  else
    out.reason, out.waiting = 'dependencies', waiting
    if #deps > #waiting then out.more = #deps - #waiting end
  end
end

function Explain.waiting(jid, f, out)
  local queue = f.queue
  if redis.call('sismember', Keys.paused(), queue) == 1 then
    out.reason = 'queue-paused'
    return
  end
  if f.parked == 'k' then
    out.reason, out.key, out.limit = 'concurrency-key', f.ckey, tonumber(f.climit) or 1
    out.holders = Explain.holders({ queue }, 'ckey', f.ckey)
    return
  end
  if f.parked == 't' then
    out.reason, out.throttle = 'throttle', f.throttle
    out.limit = tonumber(redis.call('hget', Keys.throttles(), f.throttle))
    out.running = tonumber(redis.call('hget', Keys.throttle_running(), f.throttle)) or 0
    out.holders = Explain.holders(redis.call('zrange', Keys.queues(), 0, -1), 'throttle', f.throttle)
    return
  end
  local listening, last, last_seen = 0, nil, nil
  local heard_after = Engine.now - Config.number('worker-silent-after')
  for _, worker in ipairs(Registry.live()) do
    local info = Registry.info(worker, false)
    if Registry.listens(info, queue) then
      local seen = tonumber(redis.call('zscore', Keys.workers(), worker))
      if seen > heard_after then listening = listening + 1 end
      if not last_seen or seen > last_seen then last, last_seen = worker, seen end
    end
  end
  -- A worker that stopped (deregistered) or was pruned left its queues a trace.
  local left = Registry.last(queue)
  if left and (not last_seen or left.seen > last_seen) then
    last, last_seen = left.worker, left.seen
  end
  if listening == 0 then
    out.reason, out.last, out.last_seen = 'no-worker', last, last_seen
    return
  end
  local limit = tonumber(Config.get(queue .. '-max-concurrency') or 0) or 0
  local running = redis.call('zcount', Keys.locks(queue), Engine.after_now(), '+inf')
  if limit > 0 and running >= limit then
    out.reason, out.limit, out.running = 'queue-full', limit, running
    return
  end
  out.reason, out.workers = 'queued', listening
  out.ahead = Work.rank(queue, jid) or Explain.ahead_when_promoted(jid, f)
end

-- How many jobs pop before a due scheduled job once it is promoted: it joins the end of its
-- priority (Queue.promote), after the waiting jobs of that priority or a lower one, and after
-- the due jobs promoted before it (in the order of the scheduled set) that are not behind it.
function Explain.ahead_when_promoted(jid, f)
  local priority = tonumber(f.priority) or 0
  local ahead = Work.ahead_of_new(f.queue, priority)
  local rank = math.min(redis.call('zrank', Keys.scheduled(f.queue), jid) or 0, Explain.SCANNED)
  if rank == 0 then return ahead end
  for _, other in ipairs(redis.call('zrange', Keys.scheduled(f.queue), 0, rank - 1)) do
    if (tonumber(Job.get(other, 'priority')) or 0) <= priority then
      ahead = ahead + 1
    end
  end
  return ahead
end

api['job.explain'] = function(args)
  local cmd = 'JobExplain'
  local jid = Arg.jid(cmd, 'jid', args[1])
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local f = Job.fields(jid, 'queue', 'worker', 'expires', 'failure', 'child', 'wait',
    'wait_since', 'wait_at', 'ckey', 'climit', 'throttle', 'parked', 'ttl_at', 'skipped',
    'retries', 'remaining', 'cached', 'priority')
  if not f then return nil end
  local out = { jid = jid, state = f.state, queue = f.queue or '' }
  if f.ttl_at and f.ttl_at ~= '' then out.deadline = tonumber(f.ttl_at) end
  local state = f.state
  if out.deadline and Ttl.EXPIRABLE[state] and out.deadline <= Engine.now then
    -- Past its deadline, whatever held it: the next look at its queue's ttl index expires it.
    out.reason = 'expiring'
  elseif state == 'complete' then
    out.reason = f.skipped and 'skipped' or (f.cached and 'cached' or 'complete')
    out.from = f.cached
    if f.skipped then
      for _, entry in ipairs(Explain.history_tail(jid)) do
        if entry.what == 'skipped' then out.why = entry.why or ''; break end
      end
    end
  elseif state == 'failed' then
    local ok, failure = pcall(cjson.decode, f.failure or '{}')
    failure = ok and type(failure) == 'table' and failure or {}
    out.reason, out.group, out.message = 'failed', failure.group or '', failure.message or ''
  elseif state == 'expired' or state == 'buried' then
    out.reason = state
    if state == 'buried' then
      for _, entry in ipairs(Explain.history_tail(jid)) do
        if entry.what == 'buried' then out.message = entry.message or ''; break end
      end
    end
  elseif state == 'running' or state == 'stalled' then
    out.worker, out.expires = f.worker or '', tonumber(f.expires) or 0
    out.reason = out.expires > Engine.now and 'running' or 'stalled'
  elseif state == 'awaiting' then
    local spec = Waits.spec(f.wait)
    out.reason, out.signal = 'awaiting', spec.signal or ''
    out.since = tonumber(f.wait_since)
    out.deadline = tonumber(f.wait_at)
    out.on_timeout = spec.on_timeout or 'fail'
    if out.deadline and out.deadline <= Engine.now then
      -- wait.sweep takes the awaiting jobs due at or before now.
      out.reason = 'timed-out'
    end
  elseif state == 'depends' and f.child then
    out.reason, out.child = 'child-run', f.child
  elseif state == 'depends' then
    Explain.dependencies(jid, out)
  elseif state == 'scheduled' then
    local due = tonumber(redis.call('zscore', Keys.scheduled(f.queue), jid))
    local retries, remaining = tonumber(f.retries) or 0, tonumber(f.remaining) or 0
    if due and due <= Engine.now then
      -- Due (Queue.promote takes the jobs scheduled at or before now): no longer its delay.
      out.due = due
      Explain.waiting(jid, f, out)
    elseif remaining < retries then
      out['until'], out.reason, out.attempt = due, 'retry-delay', retries - remaining + 1
      -- Ours records the retry in the history; the qless dialect keeps it as the failure.
      local ok, failure = pcall(cjson.decode, f.failure or '{}')
      out.group = ok and type(failure) == 'table' and failure.group or ''
      for _, entry in ipairs(Explain.history_tail(jid)) do
        if entry.what == 'retried' then out.group = entry.group or out.group; break end
      end
    else
      out['until'], out.reason = due, 'scheduled'
    end
  elseif state == 'waiting' then
    Explain.waiting(jid, f, out)
  else
    out.reason = state
  end
  return cjson.encode(out)
end
