-- job: reading, describing, indexing and removing one job.
--
-- A job's state decides which index holds it (lua/README.md): waiting -> q:<queue>-work or
-- -fifo (include/work.lua), scheduled -> -scheduled, depends -> -depends, running -> -locks
-- and w:<worker>:jobs, failed -> f:<group>, complete -> completed; ours: buried ->
-- q:<queue>-buried, expired -> expired, awaiting -> awaiting (include/waits.lua), and a
-- waiting job may be parked for a slot instead (include/slots.lua).
-- @include keys
-- @include engine
-- @include config
-- @include events
-- @include stats
-- @include slots
-- @include work
-- @include registry
-- @include json_text
-- @include dialect
-- @include run_counts
-- @include job_hash
local Job = {}
-- A step cache entry outlives its ttl by a day: a hit's log still points at the run.
Job.CACHE_KEEP_EXTRA = 86400

-- Job `jid` becomes the entry of step cache key `key` for `ttl` seconds: by its miss's claim
-- (commands/cache.lua), the entry standing for no result yet, or by its successful complete
-- (commands/complete.lua), `completed` true: the entry stands for the result of this
-- completion, which it records as the job's `updated` (written in the same call, from the same
-- Engine.now).
function Job.cache_entry(jid, key, ttl, completed)
  local entry = Keys.cache(key)
  if completed then
    redis.call('hset', entry, 'jid', jid, 'created', Engine.now, 'ttl', ttl,
      'completed', Engine.now)
  else
    redis.call('hset', entry, 'jid', jid, 'created', Engine.now, 'ttl', ttl)
    redis.call('hdel', entry, 'completed')
  end
  redis.call('expire', entry, math.ceil(tonumber(ttl) + Job.CACHE_KEEP_EXTRA))
  redis.call('zadd', Keys.caches(), Engine.now, key)
end

-- What a job of a step cache entry's key starting now does with the entry's result: the rule
-- cache.use, the chain of a hit, a successful complete and cache.list all decide by.
-- `producer` is the fields state, updated and skipped of the job the entry names (nil: no such
-- job), `completed` the entry's own `completed` (the completion it stands for; nil while it
-- names a claim), `ttl` seconds the result may be reused. `fresh` when that job is complete (not
-- skipped) with the very completion the entry recorded (its `updated` unchanged) less than
-- `ttl` ago, the only status a job takes the result in; `expired` when it was earlier. Else the
-- entry stands for no result: the job's state while it has not completed (a claim running, or
-- the job put again), `skipped`, or `gone`: no such job, or one that completed since (put again
-- as another step, or a step of another key) or without making this entry.
function Job.cache_status(producer, completed, ttl)
  if not producer then return 'gone' end
  if producer.state ~= 'complete' then return producer.state end
  if producer.skipped then return 'skipped' end
  if not completed or producer.updated ~= completed then return 'gone' end
  if (tonumber(completed) or 0) + ttl > Engine.now then return 'fresh' end
  return 'expired'
end

-- Decode a JSON list, accepting the '{}' cjson writes for an empty one.
local function decode_list(text)
  if text == nil or text == '' or text == '{}' then return {} end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'table' then return value end
  return {}
end
Job.decode_list = decode_list

function Job.exists(jid)
  return redis.call('exists', Keys.job(jid)) == 1
end

-- A job's fields that its hash leaves out while they hold their default (lua/README.md, key
-- layout): a waiting job's hash is most of its memory. `remaining` is left out while it equals
-- `retries`, and `state` by a new job's put while it is `waiting` (JobHash.state). Every reader
-- of these fields goes through Job.hmget (or Job.fields, Job.get, Job.state; RunCounts.fields for
-- the counts), which fills them in; a hash written before (every field stored) reads the same.
Job.DEFAULTS = { priority = '0', tags = '{}', worker = '', expires = '0', retries = '5' }

-- Those fields and `remaining`: what a write of the whole job over an existing hash deletes
-- before it writes those not at their default (Job.put_fields).
Job.DEFAULTED = { 'priority', 'tags', 'worker', 'expires', 'retries', 'remaining' }

-- Job.DEFAULTS as numbers (those that are), made on first use (the library's load calls no
-- global): a memo of a pure function, kept on the module table (not a local of the bundle's
-- main chunk). A put compares its numbers with these, making no text of them.
Job.default_numbers = nil

function Job.numbers()
  local numbers = Job.default_numbers
  if not numbers then
    numbers = {}
    for name, text in pairs(Job.DEFAULTS) do numbers[name] = tonumber(text) end
    Job.default_numbers = numbers
  end
  return numbers
end

-- The fields a job's new life writes (a put, a recurring job's spawn) that Job.DEFAULTS knows,
-- appended to the HSET arguments `args` unless at their default: priority, expires and retries
-- as numbers, tags (JSON text) and worker as text. `remaining` starts equal to `retries`, so it
-- is never written.
function Job.put_fields(args, priority, tags, worker, expires, retries)
  local numbers, texts = Job.numbers(), Job.DEFAULTS
  local n = #args
  if priority ~= numbers.priority then
    args[n + 1], args[n + 2], n = 'priority', priority, n + 2
  end
  if tags ~= texts.tags then args[n + 1], args[n + 2], n = 'tags', tags, n + 2 end
  if worker ~= texts.worker then args[n + 1], args[n + 2], n = 'worker', worker, n + 2 end
  if expires ~= numbers.expires then
    args[n + 1], args[n + 2], n = 'expires', expires, n + 2
  end
  if retries ~= numbers.retries then args[n + 1], args[n + 2] = 'retries', retries end
end

-- The values of fields of job `jid`'s hash, by position, those at their default filled in
-- (Job.DEFAULTS, and `state` 'waiting': a job put waiting stores none); false for each other
-- field it lacks, and for every field when there is no job (every job has a state or, put
-- waiting, a klass). An index entry an outside writer left that is no jid may name another
-- key (`x-history`, a list, which HMGET refuses): it reads as no job at all, so the index's
-- readers drop it as they drop an entry whose job is gone (the doctor reports it: bad-id).
function Job.hmget(jid, ...)
  local n = select('#', ...)
  -- Its state, klass and retries come with the fields asked for: whether the job exists, and
  -- what a `remaining` left out equals.
  local values = redis.pcall('hmget', Keys.job(jid), 'state', 'klass', 'retries', ...)
  if values.err then return {} end
  local state, klass, retries = values[1], values[2], values[3]
  table.remove(values, 1)
  table.remove(values, 1)
  table.remove(values, 1)
  state = JobHash.state(state, klass)
  if not state then return values end
  local defaults, names = Job.DEFAULTS, nil
  for i = 1, n do
    if not values[i] then
      names = names or { ... } -- (select(i, ...) copies every name each time)
      local name = names[i]
      local default = defaults[name]
      if default then
        values[i] = default
      elseif name == 'remaining' then
        values[i] = retries or defaults.retries
      elseif name == 'state' then
        values[i] = state
      end
    end
  end
  return values
end

-- Job `jid`'s state (a job put waiting stores none: Job.hmget), or false when there is no job.
function Job.state(jid)
  return Job.hmget(jid, 'state')[1] or false
end

-- One field of job `jid` (Job.hmget): false when it lacks it or there is no job.
function Job.get(jid, name)
  return Job.hmget(jid, name)[1] or false
end

-- The named fields of a job as a table (absent fields are nil); nil when there is no job.
function Job.fields(jid, ...)
  local names = { ... }
  local values = Job.hmget(jid, 'state', unpack(names))
  if not values[1] then return nil end
  local out = { state = values[1] }
  for i, name in ipairs(names) do
    if values[i + 1] then out[name] = values[i + 1] end
  end
  return out
end

-- The JSON text of a history entry `what` at now, with `extra` (a table it fills in). An entry
-- naming a registered worker also records its host and pid (include/registry.lua). `given`: the
-- JSON object text `extra` was decoded from, when a caller wrote it (`log`): a member cjson would
-- write back changed (JsonText.exact: a 17-digit id) is kept as that text.
function Job.history_entry(what, extra, given)
  local exact = given == nil or JsonText.exact(extra)
  local entry = Registry.stamp(extra or {})
  entry.what = what
  entry.when = Engine.now
  if exact then return cjson.encode(entry) end
  local members = JsonText.members(given)
  local parts = {}
  for name, value in pairs(entry) do
    -- (what and when are the engine's, written as always)
    local text = not JsonText.exact(value) and name ~= 'when' and members[name]
    parts[#parts + 1] = JsonText.string(name) .. ':' .. (text or cjson.encode(value))
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- The 'popped' entry of a job handed to `worker` is `Job.popped_head(worker)`, then the time
-- and '}': the same text as Job.history_entry('popped', { worker = worker }) would hold, spliced,
-- and its start made once for every job of a pop (or, for an idle worker, when it starts
-- waiting: include/handoff.lua).
function Job.popped_head(worker)
  local known = Registry.identity(worker)
  local head = '{"worker":' .. JsonText.string(worker)
  if known.host then head = head .. ',"host":' .. JsonText.string(known.host) end
  if known.pid then head = head .. ',"pid":' .. cjson.encode(known.pid) end
  return head .. ',"what":"popped","when":'
end

function Job.popped_entry(head)
  return head .. cjson.encode(Engine.now) .. '}'
end

-- The text of a 'put' history entry into `queue` at `when`: Job.history_entry('put', { q = queue })
-- spliced (no worker in it, so nothing for Registry.stamp to add).
function Job.put_entry(queue, when)
  return '{"q":' .. JsonText.string(queue) .. ',"what":"put","when":' .. cjson.encode(when) .. '}'
end

-- A job put as a new job has no history list while its put is all that happened to it (a list
-- costs a waiting job more memory than its hash): its history is then implied, the one entry of
-- that put, made from the hash's queue and created (both unchanged until the list exists: a put
-- over the job writes the implied entry first, Job.keep_history). The entry, or nil for a job
-- without those fields. `origin` ({queue, created}) when the caller read them.
function Job.implied_history(jid, origin)
  local queue, created
  if origin then
    queue, created = origin.queue, origin.created
  else
    local values = redis.call('hmget', Keys.job(jid), 'queue', 'created')
    queue, created = values[1], values[2]
  end
  if not queue or not created then return nil end
  return Job.put_entry(queue, tonumber(created))
end

-- Write a job's implied history (Job.implied_history) as its list, before a change to its queue.
function Job.keep_history(jid)
  if redis.call('exists', Keys.history(jid)) == 1 then return end
  local implied = Job.implied_history(jid)
  if implied then redis.call('rpush', Keys.history(jid), implied) end
end

-- Append an entry (JSON text; or a list of them, in order) to a job's history, keeping the first
-- one and the newest `max-job-history - 1`. `limit` is that setting when the caller already read
-- it. The first append to a job whose history is implied writes the implied entry first;
-- `origin` is false when the entries begin the history themselves (a put writing its own
-- entry), else nil or what Job.implied_history takes.
function Job.append_history(jid, entry, limit, origin)
  RunCounts.touch(jid) -- an entry tells of a change: its run's counts settle after the call
  local key = Keys.history(jid)
  local entries = type(entry) == 'table' and entry or { entry }
  local length
  if type(origin) == 'table' then
    -- The caller read the job's origin (the pop, whose append usually starts the list): a new
    -- list is written in one RPUSH, the implied entry first, one write fewer in the append-only
    -- file and the replicas' stream than an RPUSH and an LPUSH.
    local implied = redis.call('exists', key) == 0 and Job.implied_history(jid, origin)
    if implied then
      length = redis.call('rpush', key, implied, unpack(entries))
    else
      length = redis.call('rpush', key, unpack(entries))
    end
  else
    length = redis.call('rpush', key, unpack(entries))
    if length == #entries and origin ~= false then -- the list is new: the history was implied
      local implied = Job.implied_history(jid, origin)
      if implied then length = redis.call('lpush', key, implied) end
    end
  end
  -- The first entry is always kept: a history of one is never trimmed, whatever the setting,
  -- so a new job's put need not read it.
  if length <= 1 then return end
  limit = limit or Config.number('max-job-history')
  if limit > 0 and length > limit then
    local first = redis.call('lindex', key, 0)
    redis.call('ltrim', key, length - limit + 1, -1)
    redis.call('lpush', key, first)
  end
end

-- Append a history entry (Job.history_entry, Job.append_history).
function Job.history(jid, what, extra, limit, origin)
  Job.append_history(jid, Job.history_entry(what, extra), limit, origin)
end

-- The hash fields a job's description is made of (`described` reads them by position).
local DESCRIBED = { 'jid', 'klass', 'state', 'queue', 'worker', 'priority', 'expires', 'retries',
  'remaining', 'data', 'tags', 'failure', 'spawned_from_jid', 'result', 'created', 'updated',
  'grace', 'ttl', 'ttl_at', 'ttr', 'ckey', 'climit', 'throttle', 'parked', 'lost', 'child', 'runs' }

-- The DESCRIBED fields of a job (absent ones false), or nil when there is no job (every job has
-- a state; a job put as new has no `jid` field: its key names it).
local function described_values(jid)
  local values = Job.hmget(jid, unpack(DESCRIBED))
  if not values[3] then return nil end
  values[1] = jid
  return values
end

-- The qless job JSON object without its history, from the DESCRIBED `values` of job `jid`;
-- `tracked` is whether the job is tracked.
local function described(jid, values, tracked)
  local state = values[3]
  local expires = tonumber(values[7]) or 0
  -- The lock's rule (include/lock.lua): valid while expires > now and not taken away. qless
  -- says `stalled` only of a job `timeout` took away (its lock's expiry 0), else `running`.
  if state == 'running' then
    if Dialect.rules.lock_held_until_taken then
      if values[17] == '1' and expires == 0 then state = 'stalled' end
    elseif expires <= Engine.now or values[17] == '1' then
      state = 'stalled'
    end
  end
  local failure = {}
  if values[12] and values[12] ~= '' and values[12] ~= '{}' then
    failure = cjson.decode(values[12])
  end
  -- Our put options, only on jobs put with them (absent fields leave the JSON as qless has it).
  local parked
  if values[24] then parked = values[24] == 'k' and 'concurrency_key' or 'throttle' end
  return {
    jid = values[1],
    klass = values[2],
    state = state,
    queue = values[4] or '',
    worker = values[5] or '',
    tracked = tracked,
    priority = tonumber(values[6]) or 0,
    expires = expires,
    retries = tonumber(values[8]) or 0,
    remaining = tonumber(values[9]) or 0,
    data = values[10] or '{}',
    tags = decode_list(values[11]),
    failure = failure,
    dependents = redis.call('smembers', Keys.dependents(jid)),
    dependencies = redis.call('smembers', Keys.dependencies(jid)),
    spawned_from_jid = values[13] or false,
    result = values[14] or cjson.null,
    created = tonumber(values[15]) or cjson.null,
    updated = tonumber(values[16] or values[15]) or cjson.null, -- a new job's is its created
    ttl = tonumber(values[18]),
    deadline = tonumber(values[19]),
    ttr = tonumber(values[20]),
    concurrency_key = values[21] or nil,
    concurrency_limit = values[21] and (tonumber(values[22]) or 1) or nil,
    throttle = values[23] or nil,
    parked = parked,
    lost = tonumber(values[25]), -- lost workers (include/reclaim.lua), once there was one
    child = values[26] or nil, -- a sub-flow step's child run (commands/subflow.lua)
    runs = tonumber(values[27]), -- times it started running since put (commands/pop.lua)
  }
end

local function is_tracked(jid)
  return redis.call('zscore', Keys.tracked(), jid) ~= false
end

-- The entries of a job's history (JSON texts), its implied one when it has no list
-- (Job.implied_history); `values` are its DESCRIBED fields.
local function history_entries(jid, values)
  local entries = redis.call('lrange', Keys.history(jid), 0, -1)
  if #entries > 0 then return entries end
  local implied = Job.implied_history(jid, { queue = values[4], created = values[15] or nil })
  return implied and { implied } or entries
end

-- The job as the qless job JSON object's text, or nil; `tracked` when the caller knows it. The history entries
-- are JSON text written by cjson (Job.history_entry): spliced in as they are, not decoded and
-- encoded again (the costliest part of a pop's reply otherwise).
function Job.describe_json(jid, tracked)
  local values = described_values(jid)
  if not values then return nil end
  if tracked == nil then tracked = is_tracked(jid) end
  local text = cjson.encode(described(jid, values, tracked))
  local entries = history_entries(jid, values)
  -- cjson writes an empty list as {}: kept so, as qless has it.
  local history = #entries == 0 and '{}' or '[' .. table.concat(entries, ',') .. ']'
  -- `text` is an object of many fields: its last character is the closing brace.
  return string.sub(text, 1, -2) .. ',"history":' .. history .. '}'
end

-- The jobs of `jids` that exist, as the JSON text of a list of Job.describe_json's texts ('[]'
-- for none), and the jids of those that do not. Readers send a job as this text, never decoded
-- and encoded again: a value stored nested deeper than cjson goes (a history entry written
-- before the nesting limits) reaches the reader as it is, which shows it cut
-- (scheduler/engine/limits.py, read_json) instead of failing the whole read.
function Job.describe_list(jids)
  local texts, missing = {}, {}
  for _, jid in ipairs(jids) do
    local text = Job.describe_json(jid)
    if text then texts[#texts + 1] = text else missing[#missing + 1] = jid end
  end
  return '[' .. table.concat(texts, ',') .. ']', missing
end

-- Take a job out of the index its state puts it in (see the header). `fields` must hold
-- state, queue, worker and failure where the state needs them; `taken` set: a waiting job a
-- pop already took out of its work queue (saves a search of the list).
function Job.unindex(jid, fields)
  local state, queue = fields.state, fields.queue
  if state == 'waiting' then
    if not fields.taken then Work.remove(queue, jid) end
    Slots.left(jid, queue)
  elseif state == 'scheduled' then
    redis.call('zrem', Keys.scheduled(queue), jid)
  elseif state == 'depends' then
    redis.call('zrem', Keys.depends(queue), jid)
  elseif state == 'running' then
    redis.call('zrem', Keys.locks(queue), jid)
    if fields.worker and fields.worker ~= '' then
      redis.call('zrem', Keys.worker_jobs(fields.worker), jid)
    end
    Slots.stopped(jid, queue, nil)
  elseif state == 'complete' then
    redis.call('zrem', Keys.completed(), jid)
  elseif state == 'buried' then
    redis.call('zrem', Keys.buried(queue), jid)
  elseif state == 'expired' then
    redis.call('zrem', Keys.expired(), jid)
  elseif state == 'awaiting' then
    redis.call('zrem', Keys.awaiting(), jid)
  elseif state == 'failed' then
    local failure = {}
    if fields.failure and fields.failure ~= '' then failure = cjson.decode(fields.failure) end
    if failure.group then
      redis.call('lrem', Keys.failed(failure.group), 0, jid)
      if redis.call('llen', Keys.failed(failure.group)) == 0 then
        redis.call('srem', Keys.failures(), failure.group)
      end
      if queue and queue ~= '' then
        Stats.bump(queue, 'failed', -1, tonumber(failure.when) or Engine.now)
      end
    end
  end
end

-- Make the job's tags `new` (a list), keeping the tag indexes in step with it.
function Job.retag(jid, old, new)
  local before, after = {}, {}
  for _, tag in ipairs(old) do before[tag] = true end
  for _, tag in ipairs(new) do
    after[tag] = true
    if not before[tag] then
      redis.call('zadd', Keys.tag(tag), Engine.now, jid)
      redis.call('zincrby', Keys.tags(), 1, tag)
    end
  end
  for _, tag in ipairs(old) do
    if not after[tag] then
      redis.call('zrem', Keys.tag(tag), jid)
      if tonumber(redis.call('zincrby', Keys.tags(), -1, tag)) <= 0 then
        redis.call('zrem', Keys.tags(), tag)
      end
    end
  end
end

-- Forget this job's own dependencies (both directions of each edge). `deleting`: the caller
-- deletes their set with the job's other keys (Job.delete), in one DEL.
function Job.drop_dependencies(jid, deleting)
  local key = Keys.dependencies(jid)
  for _, dependency in ipairs(redis.call('smembers', key)) do
    redis.call('srem', Keys.dependents(dependency), jid)
  end
  if not deleting then redis.call('del', key) end
end

-- Delete a job and everything that points at it. `fields` as for Job.unindex, plus tags.
-- An expired job stays in `tracked`, so `track` can report it as expired; a canceled one leaves.
-- `counts`: the run counts' deltas of a batch of deletes (RunCounts.forget).
-- `fields.counts` and `fields.log_attempts`, when the caller read them (Job.load_finished), are
-- not read again.
function Job.delete(jid, fields, keep_tracked, counts)
  RunCounts.forget(jid, counts, fields.counts)
  Job.unindex(jid, fields)
  Job.retag(jid, decode_list(fields.tags), {})
  Job.drop_dependencies(jid, true)
  if fields.queue and fields.queue ~= '' then redis.call('zrem', Keys.ttl(fields.queue), jid) end
  if not keep_tracked then redis.call('zrem', Keys.tracked(), jid) end
  Job.drop_logs(jid, fields.log_attempts)
  redis.call('del', Keys.job(jid), Keys.history(jid), Keys.dependents(jid),
    Keys.dependencies(jid))
end

-- Delete a job's step logs (commands/log.lua): one list per attempt up to `log-attempts`, and
-- their counters in the job's hash. `known`: its `log-attempts` as the caller read it (false:
-- none), else read here.
function Job.drop_logs(jid, known)
  local key = Keys.job(jid)
  local attempts
  if known == nil then
    attempts = tonumber(redis.call('hget', key, 'log-attempts'))
  else
    attempts = tonumber(known)
  end
  if not attempts then return end
  local fields = { 'log-attempts' }
  for attempt = 1, attempts do
    redis.call('del', Keys.log(jid, attempt))
    fields[attempt + 1] = 'log:' .. attempt
  end
  redis.call('hdel', key, unpack(fields))
end

-- Keep a job's step logs when its run's cancel deletes the job (commands/run_admin.lua): the
-- lists and counters move under Keys.kept_log / Keys.kept_logs, listed in the run's
-- Keys.run_kept_logs, and go when the run does (maintain.retention). log.get reads them and
-- log.append adds a canceled running job's last lines to them.
function Job.keep_logs(jid, run_id)
  local key = Keys.job(jid)
  local attempts = tonumber(redis.call('hget', key, 'log-attempts'))
  if not attempts then return end
  local fields = { 'log-attempts' }
  local kept = { 'log-attempts', attempts }
  for attempt = 1, attempts do
    local field = 'log:' .. attempt
    local counters = redis.call('hget', key, field)
    if counters then
      kept[#kept + 1], kept[#kept + 2] = field, counters
      if redis.call('exists', Keys.log(jid, attempt)) == 1 then
        redis.call('rename', Keys.log(jid, attempt), Keys.kept_log(jid, attempt))
      end
    end
    fields[attempt + 1] = field
  end
  redis.call('del', Keys.kept_logs(jid))
  redis.call('hset', Keys.kept_logs(jid), unpack(kept))
  redis.call('hdel', key, unpack(fields))
  redis.call('sadd', Keys.run_kept_logs(run_id), jid)
end

-- Give a job its run's retry puts back the step logs Job.keep_logs kept: its attempts stay
-- readable where they were, and the next is numbered after them.
function Job.restore_logs(jid, run_id)
  local kept = Keys.kept_logs(jid)
  local counters = redis.call('hgetall', kept)
  if #counters == 0 then return end
  local attempts = tonumber(redis.call('hget', kept, 'log-attempts')) or 0
  for attempt = 1, attempts do
    if redis.call('exists', Keys.kept_log(jid, attempt)) == 1 then
      redis.call('rename', Keys.kept_log(jid, attempt), Keys.log(jid, attempt))
    end
  end
  redis.call('hset', Keys.job(jid), unpack(counters))
  redis.call('del', kept)
  redis.call('srem', Keys.run_kept_logs(run_id), jid)
end

-- Delete the logs Job.keep_logs kept for a run's jobs.
function Job.drop_kept_logs(run_id)
  local set = Keys.run_kept_logs(run_id)
  for _, jid in ipairs(redis.call('smembers', set)) do
    local attempts = tonumber(redis.call('hget', Keys.kept_logs(jid), 'log-attempts')) or 0
    for attempt = 1, attempts do redis.call('del', Keys.kept_log(jid, attempt)) end
    redis.call('del', Keys.kept_logs(jid))
  end
  redis.call('del', set)
end

function Job.load_for_delete(jid)
  return Job.fields(jid, 'queue', 'worker', 'failure', 'tags')
end

-- What Job.load_for_delete reads, with what Job.delete would read of the job again: its run
-- counts' fields (`counts`: RunCounts.FIELDS by position) and its step logs' attempts
-- (`log_attempts`, false for none). One read for the retention that deletes a job right after
-- (the only such caller: nothing writes the job in between). nil when there is no job.
function Job.load_finished(jid)
  local names = Job.finished_names
  if not names then
    names = { 'queue', 'worker', 'failure', 'tags', 'log-attempts' }
    for _, name in ipairs(RunCounts.FIELDS) do names[#names + 1] = name end
    Job.finished_names = names -- (built on first use: a library's load calls no global)
  end
  local v = Job.hmget(jid, unpack(names))
  local counts = { unpack(v, 6, #names) }
  if not counts[2] then return nil end -- (RunCounts.FIELDS[2]: state)
  return { state = counts[2], queue = v[1] or nil, worker = v[2] or nil, failure = v[3] or nil,
    tags = v[4] or nil, log_attempts = v[5], counts = counts }
end

-- Drop completed jobs beyond jobs-history (age) and jobs-history-count, at most `limit` of
-- them, oldest first: every call stays bounded; the service's housekeeping does the rest.
-- `max_age` and `max_count` are those settings when the caller already read them.
function Job.expire_completed(limit, max_age, max_count)
  return Job.expire_finished(Keys.completed(), limit, max_age, max_count)
end

-- The same for the finished jobs indexed in `key` (completed, or expired: include/ttl.lua).
function Job.expire_finished(key, limit, max_age, max_count)
  if not max_age or not max_count then
    max_age, max_count = Config.values('jobs-history', 'jobs-history-count')
  end
  max_age, max_count = tonumber(max_age), tonumber(max_count)
  local victims = redis.call('zrangebyscore', key, '-inf', Engine.now - max_age, 'LIMIT', 0, limit)
  local excess = redis.call('zcard', key) - #victims - max_count
  if excess > 0 and #victims < limit then
    local more = redis.call('zrange', key, #victims, #victims + math.min(excess, limit - #victims) - 1)
    for _, jid in ipairs(more) do table.insert(victims, jid) end
  end
  local counts = {}
  for _, jid in ipairs(victims) do
    local fields = Job.load_finished(jid)
    if fields then
      Job.delete(jid, fields, true, counts)
    else
      redis.call('zrem', key, jid)
    end
  end
  RunCounts.apply(counts)
  return #victims
end

-- `old` tags with `given` added (adding) or removed (not adding), order kept, no duplicates.
function Job.merge_tags(old, given, adding)
  local new, seen, drop = {}, {}, {}
  if not adding then for _, tag in ipairs(given) do drop[tag] = true end end
  for _, tag in ipairs(old) do
    if not drop[tag] and not seen[tag] then seen[tag] = true; table.insert(new, tag) end
  end
  if adding then
    for _, tag in ipairs(given) do
      if not seen[tag] then seen[tag] = true; table.insert(new, tag) end
    end
  end
  return new
end
