-- cache.use, cache.list, cache.clear: the shared step cache (ours; a flow's `cache:` steps).
--
--   cache.use   jid, worker, queue, key, ttl, attempt, [upstream jid...]  -> JSON {hit, from, run}
--   cache.list  [offset=0], [count=100]                -> JSON [{key, jid, created, ttl, state,
--                                                         completed, status}]
--   cache.clear [key...]                               -> how many entries were removed (none
--                                                         named: up to 1,000 of them, oldest
--                                                         first)
--
-- `key` is the hash the worker made of the step's own work (flows/runtime/step_cache.py); the results of
-- the `upstream` jobs (its inputs) are hashed in here, so the worker reads none of them first.
-- `ttl`: seconds, 0 to Cache.MAX_TTL (10^12).
-- An entry
-- `P cache:<key>` (hash: jid, created, ttl, completed) names the job that produced, or is
-- producing, the result; `completed`, written when that job's success made the entry, is the
-- job's `updated` of that completion: the entry stands for that result only, not for whatever
-- the jid holds later (the job put again, as a re-run, a new run of the same id or qless's put
-- over a jid, and completed as a step not cached or of another key; deleted; completed again).
-- `P caches` lists the keys (score: when the entry was made). cache.use, by the worker
-- holding `jid` when the job starts, either
--   - hits: the entry's job is another job, complete (not skipped) with the completion the
--     entry recorded, less than `ttl` seconds ago: `jid` completes in this call with that job's
--     result, exactly as complete would (dependents settled, fan-outs expanded), its hash
--     `cached` = the producer's jid, a history entry 'cached' {from, worker} and a step log
--     line naming the producer; or
--   - misses: the worker runs the job, its claim kept on it (`cclaim` '<key> <ttl>') while
--     this run of it runs (a fail, retry, release, bury, reclaim or put over the job drops
--     it: its next start claims again, if its step is still cached); the
--     entry names `jid` now (its `completed` dropped) unless it stands for a result (fresh or
--     expired): a job that may fail never takes the place of a result, and an entry that
--     stands for none is replaced here. Once `jid` completes with success
--     (commands/complete.lua) its result becomes the entry unless the entry stands for a result
--     completed less than `ttl` ago: of two workers missing at once, both run and the first
--     to succeed is the entry, whichever claimed last; a job that fails leaves the entry as it
--     was. An entry cleared meanwhile is not made again.
-- So the check and the completion are one atomic call: no worker can see a half-made entry.
-- An entry that stands for nothing is not deleted where it is found (cache.list reads, a
-- chained hit): a job still holding a claim on the key would then not make it again, as after
-- a clear; the key's next miss replaces it, and it leaves Redis with its ttl.
-- cache.list says of each entry, in `status`, what cache.use would do with it now
-- (Job.cache_status, the rule cache.use decides by, with the entry's ttl): `fresh` (a hit),
-- `expired` (completed `ttl` seconds ago or more: not used), else why it is not used: its
-- job's state while it has not completed (`running`, `waiting`, ..., `failed`), `skipped`, or
-- `gone` (no such job, or its completion is not the one the entry was made from); `completed`
-- only while it stands for a result. One exception, not
-- read by the listing (it would read every entry's result): an entry whose result nests deeper
-- than a result may (kept before the nesting limits) is never a hit (Cache.fresh).
-- A hit also completes, in the same call, each dependent it releases whose own key was written
-- when its run was built (`base` in its cache spec) and whose full key hits too, and so on down
-- (at most 1,000), and the run's other jobs waiting to start: a run whose steps are all cached
-- ends in the call of its first hit.
-- An entry lives `ttl` seconds after it was made plus a day (its job may run that long); its
-- result lives as long as its job (retention drops old completed jobs, and with them the hits).
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE, LOCKLOST (cache.use, as complete).
-- @include args
-- @include job
-- @include lock
-- @include commands/complete
-- @include commands/log
-- @include fanout
-- @include triggers
-- @include events

-- One module table: a Lua function may hold at most 200 locals (lua/README.md, no globals).
local Cache = {}
-- Cached dependents one call completes at most (the rest wait for a worker, as any job).
Cache.CHAIN_LIMIT = 1000
-- The oldest keys of `P caches` a miss looks at, to take out those whose entry left Redis.
Cache.PRUNE = 10
-- Keys of `P caches` an unnamed cache.clear goes through at most while it finds no entry.
Cache.CLEAR_LOOK = 20000
-- The longest ttl, in seconds (about 31,700 years): an entry's key expires ttl + a day after it
-- was made, and Redis refuses an expiry past 2^63 milliseconds from the epoch.
Cache.MAX_TTL = 1e12

-- Take out of `P caches` the oldest of its keys (at most `count`) whose entry left Redis (its
-- ttl plus a day passed): the list would else keep every key ever made.
function Cache.prune(count)
  for _, key in ipairs(redis.call('zrange', Keys.caches(), 0, count - 1)) do
    if redis.call('exists', Keys.cache(key)) == 0 then
      redis.call('zrem', Keys.caches(), key)
    end
  end
end

function Cache.step_part(jid) return (string.match(jid, '[^:]*$')) end

-- The full key: the step's own `base` with each upstream job's state and result hashed in,
-- the upstream jobs in the order of their step names (so every caller agrees).
function Cache.full_key(base, upstream)
  if #upstream == 0 then return base end
  local sorted = {}
  for i, jid in ipairs(upstream) do sorted[i] = jid end
  table.sort(sorted, function(a, b) return Cache.step_part(a) < Cache.step_part(b) end)
  local inputs = { base }
  for _, jid in ipairs(sorted) do
    local f = Job.hmget(jid, 'state', 'skipped', 'result')
    inputs[#inputs + 1] = Cache.step_part(jid) .. '=' .. tostring(f[1]) .. ':' .. tostring(f[2]) .. ':'
      .. tostring(f[3])
  end
  return redis.sha1hex(table.concat(inputs, '\0'))
end

-- The job an entry names and the completion it stands for (its `completed`; nil while the
-- entry names a claim), in one read; nil when there is no entry.
function Cache.entry(key)
  local e = redis.call('hmget', Keys.cache(key), 'jid', 'completed')
  return e[1] or nil, e[2] or nil
end

-- The producer of `key` and its result when it is fresh for `ttl` (Job.cache_status: the
-- completion the entry was made from, still the job's, less than `ttl` ago), and is not `jid`
-- itself; else nil. A result nested deeper than a result may be (kept before the nesting
-- limits) is not taken either: copied into `jid`, it would be stored where no complete could
-- bring it.
function Cache.fresh(key, jid, ttl)
  local from, completed = Cache.entry(key)
  if not from or from == jid then return nil end
  local producer = Job.fields(from, 'result', 'updated', 'skipped')
  if Job.cache_status(producer, completed, ttl) ~= 'fresh' then return nil end
  if Arg.kept_unfit(producer.result, Arg.MAX_RESULT_NESTING) then return nil end
  return from, producer.result
end

function Cache.log_hit(jid, attempt, from)
  local run = string.match(from, '^(.*):[^:]*$') or ''
  api['log.append']({ jid, attempt, 0, 1, Engine.now, 'log', 'info',
    'cached: the result of ' .. from .. ' (run ' .. run .. ', `flows logs ' .. run
    .. '` has its lines)' })
  return run
end

-- A flow job's cache spec with its own key (`base`, written when the run was built) and its
-- upstream jobs; nil when it has none (not cached, or it reads a fan-out's items).
function Cache.sealed(jid)
  local data = redis.call('hget', Keys.job(jid), 'data')
  local ok, decoded = pcall(cjson.decode, data or '')
  if not ok or type(decoded) ~= 'table' or type(decoded._flows) ~= 'table' then return nil end
  local spec = decoded._flows.cache
  if type(spec) ~= 'table' or type(spec.base) ~= 'string' or not tonumber(spec.ttl) then
    return nil
  end
  local upstream, seen = {}, {}
  local entries = decoded._flows.upstream
  for _, entry in pairs(type(entries) == 'table' and entries or {}) do
    if type(entry) ~= 'table' or entry.fanout then return nil end
    for _, up in ipairs(type(entry.jids) == 'table' and entry.jids or {}) do
      if not seen[up] then seen[up] = true; upstream[#upstream + 1] = up end
    end
  end
  return spec, upstream
end

-- Complete, from the cache, the waiting dependents of a hit whose own work is cached too, and
-- theirs in turn: a fully cached run ends in the call of its first hits. Each such job ends as
-- a hit does (unindexed from its queue, result, `cached`, history, log line, fan-outs,
-- dependents settled, its `success` notification); one whose result cannot feed its fan-outs is
-- left to a worker.
function Cache.chain(dependents)
  local work, done = dependents, 0
  while #work > 0 and done < Cache.CHAIN_LIMIT do
    local jid = table.remove(work)
    local f = Job.fields(jid, 'queue', 'worker', 'feeds', 'notify', 'notify_run')
    local spec, upstream
    if f and f.state == 'waiting' then spec, upstream = Cache.sealed(jid) end
    local from, result
    if spec then from, result = Cache.fresh(Cache.full_key(spec.base, upstream), jid, tonumber(spec.ttl)) end
    local fanouts, usable = nil, from ~= nil
    if usable and f.feeds then
      usable, fanouts = pcall(Fanout.plans, f.feeds, result, jid)
    end
    if usable then
      local next_ones = redis.call('smembers', Keys.dependents(jid))
      Job.unindex(jid, f)
      redis.call('zrem', Keys.ttl(f.queue), jid)
      local written = { 'state', 'complete', 'worker', '', 'expires', 0, 'updated', Engine.now,
        'cached', from }
      if result then table.insert(written, 'result'); table.insert(written, result) end
      redis.call('hset', Keys.job(jid), unpack(written))
      redis.call('zadd', Keys.completed(), Engine.now, jid)
      Job.history(jid, 'cached', { from = from })
      Cache.log_hit(jid, 1, from)
      Events.log({ jid = jid, event = 'completed', queue = f.queue })
      Events.tracked('completed', jid)
      for _, plan in ipairs(fanouts or {}) do Fanout.apply(plan) end
      if #next_ones > 0 then
        Deps.settle(jid, 'complete')
        redis.call('del', Keys.dependents(jid))
        for _, next_one in ipairs(next_ones) do work[#work + 1] = next_one end
      end
      Notify.job(jid, 'success', { notify = f.notify or false, notify_run = f.notify_run or false })
      done = done + 1
    end
  end
end

api['cache.use'] = function(args)
  local cmd = 'CacheUse'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local queue = Arg.id(cmd, 'queue', args[3])
  local key = Arg.id(cmd, 'key', args[4])
  local ttl = Arg.number(cmd, 'ttl', args[5], 0)
  if ttl > Cache.MAX_TTL then
    Arg.fail(cmd, 'Arg "ttl" must be at most ' .. Cache.MAX_TTL .. ' seconds: ' .. Arg.shown(args[5]))
  end
  local attempt = Arg.integer(cmd, 'attempt', args[6], 1, 100000)
  if #args > 6 + 1000 then Arg.fail(cmd, 'at most 1000 upstream jobs') end
  local upstream = {}
  for i = 7, #args do upstream[#upstream + 1] = Arg.jid(cmd, 'upstream', args[i]) end
  key = Cache.full_key(key, upstream)
  Lock.check_owner(cmd, jid, worker, queue)
  local from, result = Cache.fresh(key, jid, ttl)
  if from then
    -- What this hit may let the cache complete too: the jobs it releases and, for a flow
    -- run, its other jobs waiting to start (the run's first steps beside this one).
    local dependents = redis.call('smembers', Keys.dependents(jid))
    local run_id = string.match(jid, '^(.*):[^:]*$')
    if run_id then
      -- (an entry that is no jid is no job of the run: RunState.jids)
      local jids = Arg.jids_in(redis.call('lrange', Keys.run_jobs(run_id), 0, Cache.CHAIN_LIMIT))
      for _, other in ipairs(jids) do
        if other ~= jid then dependents[#dependents + 1] = other end
      end
    end
    local complete = { jid, worker, queue, '' }
    if result then table.insert(complete, 'result'); table.insert(complete, result) end
    api['complete'](complete)
    redis.call('hset', Keys.job(jid), 'cached', from)
    Job.history(jid, 'cached', { from = from, worker = worker })
    local run = Cache.log_hit(jid, attempt, from)
    Cache.chain(dependents)
    return cjson.encode({ hit = true, from = from, run = run })
  end
  -- A miss: the job runs, and its claim is kept on it (complete.lua: its success makes it the
  -- entry unless another claim's completed first). It names the entry now unless the entry
  -- stands for a result (an expired one, or fresh for a longer ttl than this job's): a job
  -- that may fail never takes the place of a result; one that stands for none is replaced.
  local holder, completed = Cache.entry(key)
  local kept = false
  if holder and holder ~= jid then
    local status = Job.cache_status(Job.fields(holder, 'updated', 'skipped'), completed, ttl)
    kept = status == 'fresh' or status == 'expired'
  end
  if not kept then
    Cache.prune(Cache.PRUNE)
    Job.cache_entry(jid, key, ttl)
  end
  redis.call('hset', Keys.job(jid), 'cclaim', key .. ' ' .. ttl)
  return cjson.encode({ hit = false })
end

api['cache.list'] = function(args)
  local cmd = 'CacheList'
  local offset = Arg.optional_integer(cmd, 'offset', args[1], 0, 0, Engine.MAX_OFFSET)
  local count = Arg.optional_integer(cmd, 'count', args[2], 100, 1, 1000)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local keys = redis.call('zrevrange', Keys.caches(), offset, offset + count - 1)
  local out = {}
  for _, key in ipairs(keys) do
    local e = redis.call('hmget', Keys.cache(key), 'jid', 'created', 'ttl', 'completed')
    if e[1] then
      local producer = Job.fields(e[1], 'updated', 'skipped')
      local ttl = tonumber(e[3]) or 0
      local status = Job.cache_status(producer, e[4] or nil, ttl)
      local stands = status == 'fresh' or status == 'expired'
      table.insert(out, { key = key, jid = e[1], created = tonumber(e[2]), ttl = ttl,
        state = producer and producer.state or 'gone',
        completed = stands and tonumber(e[4]) or nil, status = status })
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

api['cache.clear'] = function(args)
  local cmd = 'CacheClear'
  local keys = {}
  for i, value in ipairs(args) do keys[i] = Arg.id(cmd, 'key', value) end
  local removed, looked = 0, 0
  repeat
    -- None named: the oldest 1,000 keys, and the next ones while those named no entry still in
    -- Redis (their ttl plus a day passed), so a call that removes none found no entry left.
    local page = keys
    if #keys == 0 then page = redis.call('zrange', Keys.caches(), 0, 999) end
    for _, key in ipairs(page) do
      removed = removed + redis.call('del', Keys.cache(key))
      redis.call('zrem', Keys.caches(), key)
    end
    looked = looked + #page
  until #keys > 0 or #page == 0 or removed > 0 or looked >= Cache.CLEAR_LOOK
  return removed
end
