-- config.get, config.set, config.unset: the engine's settings (defaults in include/config.lua).
--
--   config.get    [option]      -> no option: JSON of the defaults merged with the stored
--                                  settings; else the value, or nil
--   config.set    option, value -> nil; publishes config_set on `P log`
--   config.unset  option        -> nil; publishes config_unset on `P log`
--
-- Errors: INVALID (for example a non-numeric value for a numeric setting).
-- @include args
-- @include config
-- @include events

-- Settings whose value must be a number: the defaults, and the per-queue ones.
local function numeric(option)
  return Config.defaults[option] ~= nil
    or string.match(option, '%-heartbeat$') ~= nil
    or string.match(option, '%-max%-concurrency$') ~= nil
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
  if numeric(option) then Arg.number(cmd, 'value', value, 0) end
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
