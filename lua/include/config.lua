-- config: the engine's settings, stored in the `P config` hash over these defaults.
-- @include keys
local Config = {}

Config.defaults = {
  ['heartbeat'] = 60,            -- seconds a popped job's lock lasts (per queue: <queue>-heartbeat)
  ['grace-period'] = 10,         -- seconds between telling a worker lock_lost and retrying the job
  ['jobs-history'] = 604800,     -- seconds completed jobs are kept
  ['jobs-history-count'] = 50000, -- completed jobs kept at most
  ['stats-history'] = 30,        -- days of summary statistics
  ['histogram-history'] = 7,     -- days of histograms
  ['max-worker-age'] = 86400,    -- seconds before a silent worker is dropped from `workers`
  ['worker-silent-after'] = 60,  -- seconds without a word before worker.list calls a worker silent
  ['max-job-history'] = 100,     -- history entries kept per job (the first is always kept)
  ['max-failed-per-group'] = 0,  -- failed jobs kept per group, oldest dropped first (0: no bound)
  ['lost-worker-retries'] = 2,   -- runs again after lost workers, apart from a job's own retries
  ['log-lines'] = 10000,         -- step log lines kept per job attempt (0: none kept)
  ['log-bytes'] = 1048576,       -- bytes of step log text kept per job attempt
}

function Config.get(name)
  local value = redis.call('hget', Keys.config(), name)
  if value then return value end
  return Config.defaults[name]
end

function Config.number(name)
  return tonumber(Config.get(name))
end

-- Several settings in one read (a hot command needs three or four), in the order named: each
-- the stored value as text, else the default, else nil.
function Config.values(...)
  local names = { ... }
  local values = redis.call('hmget', Keys.config(), ...)
  for i, name in ipairs(names) do
    if not values[i] then values[i] = Config.defaults[name] end
  end
  return unpack(values, 1, #names)
end

-- Lock duration for a queue: `<queue>-heartbeat`, else `heartbeat`, else the default.
function Config.heartbeat(queue)
  local values = redis.call('hmget', Keys.config(), queue .. '-heartbeat', 'heartbeat')
  return tonumber(values[1] or values[2] or Config.defaults['heartbeat'])
end

function Config.all()
  local merged = {}
  for name, value in pairs(Config.defaults) do merged[name] = value end
  local stored = redis.call('hgetall', Keys.config())
  for i = 1, #stored, 2 do
    -- A number when it reads as a finite one: a text setting such as 'nan' or '1e400' stays
    -- text (n - n is NaN for NaN and the infinities, which JSON cannot carry).
    local n = tonumber(stored[i + 1])
    merged[stored[i]] = (n and n - n == 0) and n or stored[i + 1]
  end
  return merged
end
