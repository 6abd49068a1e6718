-- engine: per-call state shared by every helper and command.
--
-- `Engine.prefix` and `Engine.now` are set by the dispatch (api.lua) at the start of each call
-- (the dialect's rules: `Dialect.rules`, include/dialect.lua).
-- The Functions library keeps this table between calls, so nothing else may be cached in it
-- (but `bound`: the globals below, which are the same in every call of one Lua state).
local Engine = { prefix = 'ql:', now = 0 }

-- The globals the engine reads most, as upvalues: a script's global is looked up in an empty
-- table whose metatable leads to the server's table of them (two look-ups and a metatable's),
-- an upvalue is read at once. A library's load sees none of them (only its own `redis`, of
-- register_function), so they are bound on a call's way in (Engine.bind_globals: the
-- dispatch), by a function declared before them, which still sees the globals: once for the
-- library (a script's main chunk runs again for each call, and binds them again), saving some
-- 2,000 instructions a call. (Each is a local of the main chunk, of which Lua allows 200: the
-- ones read most only.)
function Engine.globals()
  return redis, cjson, string, table, math, tonumber, type, pairs, ipairs, unpack
end
local redis = redis
local cjson, string, table, math, tonumber, type, pairs, ipairs, unpack
function Engine.bind_globals()
  if Engine.bound then return end
  Engine.bound = true
  redis, cjson, string, table, math, tonumber, type, pairs, ipairs, unpack = Engine.globals()
end

-- Integer above which a count (of jobs, items, retries) is considered out of range.
Engine.MAX_COUNT = 100000
-- Integer above which an offset into a list is out of range (offsets must reach Redis as exact
-- integers: a larger Lua number is sent in exponent notation, which Redis refuses).
Engine.MAX_OFFSET = 2147483647

-- redis.call(command, key, values...) in slices of SLICE values: unpack() copies its values onto
-- Lua's C stack, which a few thousand overflow. SLICE is even, so {score, member} pairs stay whole.
local SLICE = 1000
function Engine.call_many(command, key, values)
  local count = #values
  -- Most often one slice (a job's dependencies): no loop to set up.
  if count <= SLICE then
    if count > 0 then redis.call(command, key, unpack(values)) end
    return
  end
  for first = 1, count, SLICE do
    redis.call(command, key, unpack(values, first, math.min(first + SLICE - 1, count)))
  end
end

-- '(<now>': the exclusive score bound "later than now", exact. Concatenating the number itself
-- would round it to 14 significant digits (about 0.1 ms for epoch seconds).
function Engine.after_now()
  return '(' .. string.format('%.17g', Engine.now)
end
