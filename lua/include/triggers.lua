-- triggers: what a job's outcome does to the jobs that depend on it (trigger rules, ours).
--
-- A job put with ('trigger', rule) is released by its dependencies' outcomes as follows:
--   all_success (default, qless): when every dependency completed. A failed dependency leaves it
--               waiting ("blocked"): retrying the failed job and completing it releases it.
--   none_failed: like all_success, but a skipped dependency counts as a success.
--   all_done:    when every dependency completed, was skipped, failed, or is blocked for good.
--   one_failed:  as soon as one dependency failed (or is blocked); skipped (never runs) when all
--               of them completed without a failure.
-- A skipped job is complete with `skipped` set and history 'skipped'; an all_success dependent of
-- a skipped job is skipped too. A blocked job counts as failed for its own dependents, so an
-- all_done job (a `finally` hook) downstream of a failure still runs. A step waiting for its child
-- run (field `child`, commands/subflow.lua) is released by the rule all_done. An empty fan-out
-- (field `empty`: Deps.complete_empty) released so completes at once instead of running.
-- @include keys
-- @include engine
-- @include events
-- @include job
-- @include queue
local Deps = {}

Deps.RULES = { all_success = true, none_failed = true, all_done = true, one_failed = true }

local function rule_of(jid)
  local fields = Job.fields(jid, 'trigger', 'child')
  if not fields then return nil, nil end
  -- A step waiting for its child run waits until each job it waits for is done
  -- (commands/subflow.lua).
  if fields.child and fields.state == 'depends' then return fields.state, 'all_done' end
  return fields.state, fields.trigger or 'all_success'
end

local function pending(jid)
  return redis.call('scard', Keys.dependencies(jid))
end

-- Mark a waiting-for-dependencies job complete without running it; `why` (the rule and what
-- met it) goes into its history entry, for `explain`.
local function skip(jid, why)
  local fields = Job.fields(jid, 'queue')
  redis.call('zrem', Keys.depends(fields.queue), jid)
  Job.drop_dependencies(jid)
  redis.call('hset', Keys.job(jid), 'state', 'complete', 'skipped', 1, 'worker', '', 'expires', 0,
    'updated', Engine.now)
  redis.call('zadd', Keys.completed(), Engine.now, jid)
  Job.history(jid, 'skipped', { why = why })
  Events.log({ jid = jid, event = 'skipped', queue = fields.queue })
end

-- An empty fan-out (a foreach or matrix step with no items, put with `empty`: the job field
-- `empty`) has nothing to run: when nothing holds it back any more it completes at once, its
-- result the empty list and its history `fanout` {items = 0}, as a fan-out whose producer
-- output no items does (include/fanout.lua). `queue`: its queue.
function Deps.complete_empty(jid, queue)
  redis.call('hset', Keys.job(jid), 'state', 'complete', 'result', '[]', 'worker', '',
    'expires', 0, 'updated', Engine.now)
  redis.call('zadd', Keys.completed(), Engine.now, jid)
  Job.history(jid, 'fanout', { items = 0 })
  Events.log({ jid = jid, event = 'completed', queue = queue })
end

-- A dependent nothing holds back any more: it waits (Queue.release_dependent), or, an empty
-- fan-out, completes, and then its own dependents are settled (queued on `work`).
local function release_dependent(jid, work)
  local fields = Job.fields(jid, 'queue', 'empty')
  if fields and fields.empty and fields.state == 'depends' then
    redis.call('zrem', Keys.depends(fields.queue), jid)
    Job.drop_dependencies(jid)
    Deps.complete_empty(jid, fields.queue)
    table.insert(work, { jid, 'complete' })
    return
  end
  Queue.release_dependent(jid)
end

local function release(jid, work)
  local fields = Job.fields(jid, 'empty')
  if fields and fields.empty then return release_dependent(jid, work) end
  Job.drop_dependencies(jid)
  Queue.release_dependent(jid)
end

-- Walk the dependents of `jid` after `outcome` ('complete', 'skipped' or 'failed'), following
-- skips and blocks transitively with a work list (no recursion: chains may be long).
function Deps.settle(jid, outcome)
  local work = { { jid, outcome } }
  local seen = {}
  while #work > 0 do
    local item = table.remove(work)
    local source, result = item[1], item[2]
    local key = Keys.dependents(source)
    for _, dependent in ipairs(redis.call('smembers', key)) do
      local state, rule = rule_of(dependent)
      if state == 'depends' and not seen[dependent] then
        if result == 'complete' or result == 'skipped' then
          redis.call('srem', Keys.dependencies(dependent), source)
          redis.call('srem', key, dependent)
          local skipped_upstream = result == 'skipped' and rule == 'all_success'
          if skipped_upstream or (rule == 'one_failed' and pending(dependent) == 0) then
            seen[dependent] = true
            skip(dependent, skipped_upstream
              and ('trigger rule all_success: ' .. source .. ' was skipped')
              or 'trigger rule one_failed: no dependency failed')
            table.insert(work, { dependent, 'skipped' })
          elseif pending(dependent) == 0 then
            seen[dependent] = true
            release_dependent(dependent, work)
          end
        elseif rule == 'one_failed' then
          seen[dependent] = true
          release(dependent, work)
        elseif rule == 'all_done' then
          redis.call('srem', Keys.dependencies(dependent), source)
          redis.call('srem', key, dependent)
          if pending(dependent) == 0 then
            seen[dependent] = true
            release_dependent(dependent, work)
          end
        else
          -- all_success / none_failed: blocked, keeping the edge so a retry can release it;
          -- for its own dependents it counts as failed.
          seen[dependent] = true
          table.insert(work, { dependent, 'failed' })
        end
      end
    end
  end
end
