-- engine: per-call state shared by every helper and command.
--
-- `Engine.prefix` and `Engine.now` are set by the dispatch (api.lua) at the start of each call.
-- The Functions library keeps this table between calls, so nothing else may be cached in it.
local Engine = { prefix = 'ql:', now = 0 }

-- Integer above which an id, a count or an offset is considered out of range.
Engine.MAX_COUNT = 100000
