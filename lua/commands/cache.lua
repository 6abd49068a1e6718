-- cache.use, cache.list, cache.clear: the shared step cache (ours; a flow's `cache:` steps).
--
--   cache.use   jid, worker, queue, key, ttl, attempt, [upstream jid...]  -> JSON {hit, from, run}
--   cache.list  [offset=0], [count=100]                -> JSON [{key, jid, created, ttl, state}]
--   cache.clear [key...]                               -> how many entries were removed
--
-- `key` is the hash the worker made of the step's own work (flows/step_cache.py); the results of
-- the `upstream` jobs (its inputs) are hashed in here, so the worker reads none of them first.
-- An entry
-- `P cache:<key>` (hash: jid, created, ttl) names the job that produced, or is producing, the
-- result; `P caches` lists the keys (score: when the entry was made). cache.use, by the worker
-- holding `jid` when the job starts, either
--   - hits: the entry's job is another job, complete (not skipped) and completed less than `ttl`
--     seconds ago: `jid` completes in this call with that job's result, exactly as complete
--     would (dependents settled, fan-outs expanded), its hash `cached` = the producer's jid, a
--     history entry 'cached' {from, worker} and a step log line naming the producer; or
--   - misses: the entry now names `jid` (the worker runs the job; a later job of the same work
--     uses its result once it completes). Two workers missing at once both run; the later
--     claim is kept.
-- So the check and the completion are one atomic call: no worker can see a half-made entry.
-- An entry lives `ttl` seconds after it was made plus a day (its job may run that long); its
-- result lives as long as its job (retention drops old completed jobs, and with them the hits).
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE, LOCKLOST (cache.use, as complete).
-- @include args
-- @include job
-- @include lock
-- @include commands/complete
-- @include commands/log

local CACHE_KEEP_EXTRA = 86400

local function cache_key(key) return Engine.prefix .. 'cache:' .. key end
local function caches_key() return Engine.prefix .. 'caches' end

api['cache.use'] = function(args)
  local cmd = 'CacheUse'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local queue = Arg.id(cmd, 'queue', args[3])
  local key = Arg.id(cmd, 'key', args[4])
  local ttl = Arg.number(cmd, 'ttl', args[5], 0)
  local attempt = Arg.integer(cmd, 'attempt', args[6], 1, 100000)
  if #args > 6 + 1000 then Arg.fail(cmd, 'at most 1000 upstream jobs') end
  local inputs = { key }
  for i = 7, #args do
    local upstream = Arg.jid(cmd, 'upstream', args[i])
    local f = redis.call('hmget', Keys.job(upstream), 'state', 'skipped', 'result')
    inputs[#inputs + 1] = upstream:match('[^:]*$') .. '=' .. tostring(f[1]) .. ':'
      .. tostring(f[2]) .. ':' .. tostring(f[3])
  end
  if #inputs > 1 then key = redis.sha1hex(table.concat(inputs, '\0')) end
  Lock.check_owner(cmd, jid, worker, queue)
  local entry = redis.call('hmget', cache_key(key), 'jid')
  local from = entry[1]
  if from and from ~= jid then
    local producer = Job.fields(from, 'result', 'updated', 'skipped')
    if producer and producer.state == 'complete' and not producer.skipped
      and (tonumber(producer.updated) or 0) + ttl > Engine.now then
      local run = string.match(from, '^(.*):[^:]*$') or ''
      local complete = { jid, worker, queue, '' }
      if producer.result then
        table.insert(complete, 'result'); table.insert(complete, producer.result)
      end
      api['complete'](complete)
      redis.call('hset', Keys.job(jid), 'cached', from)
      Job.history(jid, 'cached', { from = from, worker = worker })
      api['log.append']({ jid, attempt, 0, 1, Engine.now, 'log', 'info',
        'cached: the result of ' .. from .. ' (run ' .. run .. ', `flows logs ' .. run
        .. '` has its lines)' })
      return cjson.encode({ hit = true, from = from, run = run })
    end
  end
  redis.call('hset', cache_key(key), 'jid', jid, 'created', Engine.now, 'ttl', ttl)
  redis.call('expire', cache_key(key), math.ceil(ttl + CACHE_KEEP_EXTRA))
  redis.call('zadd', caches_key(), Engine.now, key)
  return cjson.encode({ hit = false })
end

api['cache.list'] = function(args)
  local cmd = 'CacheList'
  local offset = Arg.optional_integer(cmd, 'offset', args[1], 0, 0)
  local count = Arg.optional_integer(cmd, 'count', args[2], 100, 1, 1000)
  if args[3] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local keys = redis.call('zrevrange', caches_key(), offset, offset + count - 1)
  local out = {}
  for _, key in ipairs(keys) do
    local e = redis.call('hmget', cache_key(key), 'jid', 'created', 'ttl')
    if e[1] then
      local producer = Job.fields(e[1], 'updated')
      table.insert(out, { key = key, jid = e[1], created = tonumber(e[2]), ttl = tonumber(e[3]),
        state = producer and producer.state or 'gone',
        completed = producer and producer.state == 'complete' and tonumber(producer.updated)
          or nil })
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

api['cache.clear'] = function(args)
  local cmd = 'CacheClear'
  local keys = {}
  for i, value in ipairs(args) do keys[i] = Arg.id(cmd, 'key', value) end
  if #keys == 0 then
    keys = redis.call('zrange', caches_key(), 0, 999)
  end
  local removed = 0
  for _, key in ipairs(keys) do
    removed = removed + redis.call('del', cache_key(key))
    redis.call('zrem', caches_key(), key)
  end
  return removed
end
