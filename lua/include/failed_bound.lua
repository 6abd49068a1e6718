-- failed_bound: the bounded failed history of each group (hworker's failed queue, "limited in
-- size based on config"; ours in this engine).
--
-- With `max-failed-per-group` = n > 0, a group keeps its n newest failed jobs: each fail drops the
-- oldest beyond them. A dropped job is deleted for good, as cancel deletes it (hash, history,
-- tags, tracking, its own dependency edges), counted in `failed-dropped` (group -> count) and
-- logged as `failed_dropped` on `P log`. A failed job that other jobs still wait for (a blocked
-- step of a flow run, which run.retry can resume) is never dropped: it stays, counted in its
-- group. One fail examines at most Job.MAX_DROP_EXAMINED of the oldest entries.
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include job

Job.MAX_DROP_EXAMINED = 100

-- The failure of a job's fields, decoded ({} when it has none).
function Job.failure_of(fields)
  if fields.failure and fields.failure ~= '' then
    local ok, decoded = pcall(cjson.decode, fields.failure)
    if ok and type(decoded) == 'table' then return decoded end
  end
  return {}
end

-- Remove a failed job of `group` for good, found near the list's tail (its oldest end).
function Job.drop_failed(group, jid, fields, failure)
  redis.call('lrem', Keys.failed(group), -1, jid)
  if fields.queue and fields.queue ~= '' then
    Stats.bump(fields.queue, 'failed', -1, tonumber(failure.when) or Engine.now)
  end
  -- Out of its group's list already: Job.delete has no index left to take it out of.
  Job.delete(jid, { state = 'dropped', tags = fields.tags })
  Events.log({ jid = jid, event = 'failed_dropped', group = group, queue = fields.queue or '' })
end

-- Drop the oldest failed jobs of `group` beyond max-failed-per-group. Returns how many.
function Job.bound_failed(group)
  local limit = Config.number('max-failed-per-group') or 0
  if limit <= 0 then return 0 end
  local key = Keys.failed(group)
  local excess = redis.call('llen', key) - limit
  if excess <= 0 then return 0 end
  local oldest = redis.call('lrange', key, -math.min(excess, Job.MAX_DROP_EXAMINED), -1)
  local dropped = 0
  for i = #oldest, 1, -1 do
    local jid = oldest[i]
    local fields = Job.load_for_delete(jid)
    local failure = fields and Job.failure_of(fields) or {}
    if not fields or fields.state ~= 'failed' or failure.group ~= group then
      redis.call('lrem', key, -1, jid) -- a stale entry (no such failed job here): not a job to count
    elseif redis.call('exists', Keys.dependents(jid)) == 0 then
      Job.drop_failed(group, jid, fields, failure)
      dropped = dropped + 1
    end
  end
  if dropped > 0 then redis.call('hincrby', Keys.failed_dropped(), group, dropped) end
  return dropped
end
