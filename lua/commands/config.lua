-- config.get, config.set, config.unset: the engine's settings (defaults in include/config.lua).
--
--   config.get    [option]      -> no option: JSON of the defaults merged with the stored
--                                  settings; else the value, or nil. The qless dialect gives
--                                  qless's: its seven defaults (with `application`) under the
--                                  stored settings as text; a default alone as a number
--                                  (Qless.COMMANDS, include/qless.lua)
--   config.set    option, value -> nil; publishes config_set on `P log`
--   config.unset  option        -> nil; publishes config_unset on `P log`
--
-- Numeric settings (the defaults, <queue>-heartbeat, <queue>-max-concurrency) take a number of
-- at least 0, in decimal notation (kept as given, read by every client); those that count
-- things (the *-count and *-history ones in days or entries, <queue>-max-concurrency) a whole
-- number (also lost-worker-retries, log-lines, log-bytes); the qless dialect takes negative ones
-- too for qless's own settings, as qless does (ours, which qless has not, are >= 0 in both).
-- Other options take any text up to 512 KiB.
-- Errors: INVALID (for example a non-numeric value for a numeric setting), TOOLARGE.
-- @include args
-- @include config
-- @include events
-- @include dialect

local COUNTS = { ['jobs-history-count'] = true, ['stats-history'] = true,
  ['histogram-history'] = true, ['max-job-history'] = true, ['max-failed-per-group'] = true,
  ['lost-worker-retries'] = true, ['log-lines'] = true, ['log-bytes'] = true }

-- Settings qless-core has no such of: nothing a qless client stores, so >= 0 in both dialects.
local OURS = { ['worker-silent-after'] = true, ['max-failed-per-group'] = true,
  ['lost-worker-retries'] = true, ['log-lines'] = true, ['log-bytes'] = true }

-- 'integer', 'number' or nil (free text) for an option's value.
local function value_kind(option)
  if COUNTS[option] or string.match(option, '%-max%-concurrency$') then return 'integer' end
  if Config.defaults[option] ~= nil or string.match(option, '%-heartbeat$') then return 'number' end
  return nil
end

api['config.get'] = function(args)
  if args[1] == nil then return cjson.encode(Config.all()) end
  local value = Config.get(Arg.id('ConfigGet', 'option', args[1]))
  if value == nil then return nil end
  return tostring(value)
end

api['config.set'] = function(args)
  local cmd = 'ConfigSet'
  local option = Arg.id(cmd, 'option', args[1])
  local value = Arg.present(cmd, 'value', args[2])
  local kind = value_kind(option)
  -- qless takes negative values of its settings (a negative jobs-history drops completed jobs
  -- at once); both dialects refuse what is no number, or not finite.
  local min = (OURS[option] or not Dialect.rules.negative_settings) and 0 or nil
  if kind ~= nil then Arg.decimal(cmd, 'value', value) end -- kept as given
  if kind == 'integer' then
    Arg.integer(cmd, 'value', value, min and 0 or -Engine.MAX_OFFSET, Engine.MAX_OFFSET)
  elseif kind == 'number' then
    Arg.number(cmd, 'value', value, min)
  else
    Arg.text(cmd, 'value', value)
  end
  redis.call('hset', Keys.config(), option, value)
  Events.log({ event = 'config_set', option = option, value = value })
  return nil
end

api['config.unset'] = function(args)
  local option = Arg.id('ConfigUnset', 'option', args[1])
  redis.call('hdel', Keys.config(), option)
  Events.log({ event = 'config_unset', option = option })
  return nil
end
