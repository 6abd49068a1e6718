-- recur, unrecur, recur.get, recur.update, recur.tag, recur.untag: interval recurring jobs.
--
--   recur queue, jid, klass, data, 'interval', seconds, offset,
--         ['priority', p], ['tags', JSON], ['retries', r], ['backlog', b]   -> jid
--   unrecur jid                                -> true
--   recur.get jid                              -> JSON {jid, klass, state: 'recur', queue,
--                                                 priority, interval, retries, count, data, tags,
--                                                 backlog}, or nil
--   recur.update jid, (field, value)...        -> true; fields: priority, interval, retries,
--                                                 data, klass, queue, backlog
--   recur.tag / recur.untag jid, tag...        -> JSON tags
--
-- The first child is spawned `offset` seconds from now, then one every `interval` seconds, as
-- `<jid>-<n>`, by pop and peek of the queue (and the scheduler service's housekeeping). After
-- downtime a recurring job spawns one child per missed interval, at most `backlog` (0: no bound).
-- The qless dialect follows qless: its backlog rule, `recur.update interval` moving the next
-- spawn, a child's put entry at its due time, and no tag index of the recurring jid.
-- recur on an existing recurring job redefines it and keeps its count; a recurring jid leaves
-- 11 bytes of Arg.MAX_ID_BYTES for the children's '-<n>'.
-- Errors: INVALID, TOOLARGE, NOTFOUND.
-- @include args
-- @include job
-- @include queue
-- @include dialect

local RECUR_OPTIONS = { priority = true, tags = true, retries = true, backlog = true }
-- Room for the children's '-<count>' (up to 10 digits) within Arg.MAX_ID_BYTES.
local MAX_RECUR_JID_BYTES = Arg.MAX_ID_BYTES - 11

-- The native dialect indexes a recurring job under its tags (`tag get` finds the template);
-- qless does not, and a recurring job defined in the qless dialect says so (`tagged` '0'), so
-- that no later call takes out of the indexes what was never put there.
local function index_tags(key, jid, tags)
  if Dialect.rules.recurring_untagged then
    redis.call('hset', key, 'tagged', '0')
  else
    redis.call('hdel', key, 'tagged')
    Job.retag(jid, {}, tags)
  end
end

local function unindex_tags(jid, tags, tagged)
  if tagged ~= '0' then Job.retag(jid, tags, {}) end
end

api['recur'] = function(args)
  local cmd = 'Recur'
  local queue = Arg.name(cmd, 'queue', args[1])
  local jid = Arg.jid(cmd, 'jid', args[2])
  if #jid > MAX_RECUR_JID_BYTES then
    Err.raise('TOOLARGE', cmd .. '(): Arg "jid" is ' .. #jid .. ' bytes, more than the limit of ' ..
      MAX_RECUR_JID_BYTES .. ' for a recurring job (its children add "-<count>")')
  end
  local klass = Arg.id(cmd, 'klass', args[3])
  local data = Arg.json(cmd, 'data', args[4], 'payload')
  if args[5] ~= 'interval' then
    Arg.fail(cmd, 'Arg "spec" must be "interval" (cron schedules are flow schedules): ' .. Arg.shown(args[5]))
  end
  local interval = Arg.number(cmd, 'interval', args[6], 0)
  if interval <= 0 then Arg.fail(cmd, 'Arg "interval" must be more than 0: ' .. args[6]) end
  local offset = Arg.number(cmd, 'offset', args[7], 0)
  local options = Arg.options(cmd, args, 8, RECUR_OPTIONS)
  local priority = Arg.optional_integer(cmd, 'priority', options.priority, 0, -Queue.MAX_PRIORITY, Queue.MAX_PRIORITY)
  local retries = Arg.optional_integer(cmd, 'retries', options.retries, 0, 0, Engine.MAX_COUNT)
  local backlog = Arg.optional_integer(cmd, 'backlog', options.backlog, 0, 0, Engine.MAX_COUNT)
  local tags = {}
  if options.tags then tags = Arg.id_list(cmd, 'tags', options.tags, Arg.id, Arg.MAX_TAGS) end

  local key = Keys.recurring(jid)
  local old = redis.call('hmget', key, 'queue', 'tags', 'count', 'tagged')
  if old[1] then
    redis.call('zrem', Keys.recur(old[1]), jid)
    if old[4] ~= '0' then Job.retag(jid, Job.decode_list(old[2]), {}) end
  end
  redis.call('hset', key, 'jid', jid, 'klass', klass, 'data', data, 'priority', priority,
    'tags', #tags == 0 and '[]' or cjson.encode(tags), 'state', 'recur', 'queue', queue,
    'type', 'interval', 'count', tonumber(old[3]) or 0, 'interval', interval, 'retries', retries,
    'backlog', backlog)
  index_tags(key, jid, tags)
  redis.call('zadd', Keys.recur(queue), Engine.now + offset, jid)
  redis.call('zadd', Keys.queues(), 'NX', Engine.now, queue)
  return jid
end

api['unrecur'] = function(args)
  local jid = Arg.jid('Unrecur', 'jid', args[1])
  local key = Keys.recurring(jid)
  local old = redis.call('hmget', key, 'queue', 'tags', 'tagged')
  if old[1] then
    redis.call('zrem', Keys.recur(old[1]), jid)
    unindex_tags(jid, Job.decode_list(old[2]), old[3])
    redis.call('del', key)
  end
  return true
end

api['recur.get'] = function(args)
  local jid = Arg.jid('RecurGet', 'jid', args[1])
  local r = redis.call('hmget', Keys.recurring(jid), 'jid', 'klass', 'state', 'queue', 'priority',
    'interval', 'retries', 'count', 'data', 'tags', 'backlog')
  if not r[1] then return nil end
  return cjson.encode({
    jid = r[1], klass = r[2], state = r[3], queue = r[4], priority = tonumber(r[5]),
    interval = tonumber(r[6]), retries = tonumber(r[7]), count = tonumber(r[8]), data = r[9],
    tags = Job.decode_list(r[10]), backlog = tonumber(r[11]),
  })
end

local UPDATABLE = { priority = true, interval = true, retries = true, data = true, klass = true,
  queue = true, backlog = true }

api['recur.update'] = function(args)
  local cmd = 'RecurUpdate'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local options = Arg.options(cmd, args, 2, UPDATABLE)
  local updates = {}
  for field, value in pairs(options) do
    if field == 'priority' then
      value = Arg.integer(cmd, 'priority', value, -Queue.MAX_PRIORITY, Queue.MAX_PRIORITY)
    elseif field == 'interval' then
      value = Arg.number(cmd, 'interval', value, 0)
      if value <= 0 then Arg.fail(cmd, 'Arg "interval" must be more than 0') end
    elseif field == 'retries' or field == 'backlog' then
      value = Arg.integer(cmd, field, value, 0, Engine.MAX_COUNT)
    elseif field == 'data' then
      value = Arg.json(cmd, 'data', value, 'payload')
    else
      value = Arg.id(cmd, field, value)
    end
    updates[field] = value
  end
  local key = Keys.recurring(jid)
  local queue = redis.call('hget', key, 'queue')
  if not queue then Err.raise('NOTFOUND', cmd .. '(): No recurring job ' .. jid) end
  for field, value in pairs(updates) do
    if field == 'interval' and Dialect.rules.qless_recurring_spawns then
      -- The next spawn moves by the change of interval.
      local before = tonumber(redis.call('hget', key, 'interval')) or value
      local current = redis.call('hget', key, 'queue')
      if redis.call('zscore', Keys.recur(current), jid) then
        redis.call('zincrby', Keys.recur(current), value - before, jid)
      end
    end
    if field == 'queue' and value ~= queue then
      local score = redis.call('zscore', Keys.recur(queue), jid)
      redis.call('zrem', Keys.recur(queue), jid)
      redis.call('zadd', Keys.recur(value), score or Engine.now, jid)
      redis.call('zadd', Keys.queues(), 'NX', Engine.now, value)
    end
    redis.call('hset', key, field, value)
  end
  return true
end

local function recur_tags(cmd, args, adding)
  local jid = Arg.jid(cmd, 'jid', args[1])
  local given = {}
  for i = 2, #args do table.insert(given, Arg.id(cmd, 'tag', args[i])) end
  local key = Keys.recurring(jid)
  local current = redis.call('hmget', key, 'tags', 'tagged')
  if not current[1] then Err.raise('NOTFOUND', cmd .. '(): No recurring job ' .. jid) end
  local old = Job.decode_list(current[1])
  local new = Job.merge_tags(old, given, adding)
  if #new > Arg.MAX_TAGS then Err.raise('TOOLARGE', cmd .. '(): at most ' .. Arg.MAX_TAGS .. ' tags') end
  unindex_tags(jid, old, current[2])
  index_tags(key, jid, new)
  local encoded = #new == 0 and '[]' or cjson.encode(new)
  redis.call('hset', key, 'tags', encoded)
  return encoded
end

api['recur.tag'] = function(args) return recur_tags('RecurTag', args, true) end
api['recur.untag'] = function(args) return recur_tags('RecurUntag', args, false) end
