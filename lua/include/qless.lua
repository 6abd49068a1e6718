-- qless: the qless dialect's replies (api.lua calls Qless.reply after every command of a call in
-- the qless convention, or a command of Qless.COMMANDS instead of ours; the native dialect never
-- comes here).
--
-- A qless client reads replies as qless-core writes them: an empty list is `{}` (cjson's
-- encoding of an empty table), a job object has exactly qless's fields, `queues` has no counts
-- of ours, `config.get` lists qless's settings as stored. The commands' own
-- code stays the one engine; only the reply's shape is translated here, at the cost of one JSON
-- decode and encode per reply in this dialect. Rules that differ deeply are read by name from
-- include/dialect.lua (the table in docs/pages/engine.md lists every difference).
-- @include engine
-- @include keys
-- @include args
local Qless = {}

-- The fields of a qless job object; ours (created, updated, result, ttl, ...) are left out.
local JOB_FIELDS = { 'jid', 'klass', 'state', 'queue', 'worker', 'tracked', 'priority', 'expires',
  'retries', 'remaining', 'data', 'tags', 'history', 'failure', 'spawned_from_jid', 'dependents',
  'dependencies' }

-- The fields of a history entry qless writes (ours add the worker's host and pid).
local HISTORY_FIELDS = { 'what', 'q', 'worker', 'group' }

local function history_entry(entry)
  local out = {}
  for _, name in ipairs(HISTORY_FIELDS) do out[name] = entry[name] end
  -- qless records whole seconds.
  if type(entry.when) == 'number' then out.when = math.floor(entry.when) end
  for name, value in pairs(entry) do
    -- A `log` entry's own fields are the client's: kept as given.
    if out[name] == nil and name ~= 'when' and name ~= 'host' and name ~= 'pid' then
      out[name] = value
    end
  end
  return out
end

-- A job object (decoded) in qless's shape.
function Qless.job(job)
  local out = {}
  for _, name in ipairs(JOB_FIELDS) do out[name] = job[name] end
  -- qless empties a completed job's queue.
  if out.state == 'complete' then out.queue = '' end
  local history = {}
  for i, entry in ipairs(job.history or {}) do history[i] = history_entry(entry) end
  out.history = history
  return out
end

local function jobs(list)
  local out = {}
  for i, job in ipairs(list) do out[i] = Qless.job(job) end
  return out
end

-- command -> function(decoded reply) -> the qless reply as a Lua value (encoded after).
local SHAPES = {}

SHAPES['get'] = Qless.job
SHAPES['multiget'] = jobs
SHAPES['peek'] = jobs
SHAPES['pop'] = jobs

SHAPES['track'] = function(reply)
  if type(reply) ~= 'table' then return reply end
  return { jobs = jobs(reply.jobs or {}), expired = reply.expired or {} }
end

SHAPES['queues'] = function(reply)
  local function counts(queue)
    queue.parked, queue.buried = nil, nil
    return queue
  end
  if reply.name then return counts(reply) end
  for _, queue in ipairs(reply) do counts(queue) end
  return reply
end

SHAPES['stats'] = function(reply)
  reply.calls = nil -- ours (queue.stats)
  return reply
end

-- qless's own defaults, as qless-core lists them (ours are shown only once set).
Qless.CONFIG_DEFAULTS = {
  application = 'qless', heartbeat = 60, ['grace-period'] = 10, ['stats-history'] = 30,
  ['histogram-history'] = 7, ['jobs-history-count'] = 50000, ['jobs-history'] = 604800,
}

-- `config.get` without an option: qless's defaults, each stored setting over them as the text
-- it was set to (qless gives back what it stored: '1', not 1).
function Qless.config_all()
  local all = {}
  for name, value in pairs(Qless.CONFIG_DEFAULTS) do all[name] = value end
  local stored = redis.call('hgetall', Keys.config())
  for i = 1, #stored, 2 do all[stored[i]] = stored[i + 1] end
  return all
end

-- command -> function(args) -> its reply in the qless dialect, where qless answers from other
-- data than ours (the dispatch calls it instead of the command; its errors are the command's).
Qless.COMMANDS = {}

-- A stored setting as its text, a default of qless's as a number (an integer reply).
Qless.COMMANDS['config.get'] = function(args)
  local option = args[1]
  if option == nil then return cjson.encode(Qless.config_all()) end
  option = Arg.id('ConfigGet', 'option', option)
  local stored = redis.call('hget', Keys.config(), option)
  if stored then return stored end
  return Qless.CONFIG_DEFAULTS[option]
end

-- Replies that only need qless's encoding of empty lists.
local function same(reply) return reply end
SHAPES['workers'] = same
SHAPES['tag'] = same
SHAPES['recur.tag'] = same
SHAPES['recur.untag'] = same

-- The words qless's clients look for in an error, in place of ours: {pattern, replacement} on
-- the error reply's text (ids and jids hold no white space).
local WORDS = {
  { '^(NOTFOUND Depends%(%): Job %S+ does not exist)$', '%1: not in the depends state' },
  { '^(HASDEPENDENTS Cancel%(%): )(%S+) is a dependent of (%S+) ', '%1%3 is a dependency of %2 ' },
  { '^(LOCKLOST Heartbeat%(%): Job %S+) has been handed to ', '%1 given out to ' },
}

-- An error reply (redis.error_reply's) in qless's words.
function Qless.error(reply)
  local text = reply.err
  if type(text) ~= 'string' then return reply end
  for _, words in ipairs(WORDS) do
    local said, found = string.gsub(text, words[1], words[2])
    if found > 0 then return redis.error_reply(said) end
  end
  return reply
end

-- The reply of `command` (called with `args`) for a qless client.
function Qless.reply(command, result, args)
  local shape = SHAPES[command]
  if not shape or type(result) ~= 'string' then return result end
  return cjson.encode(shape(cjson.decode(result)))
end
