-- errors: raising engine errors with a stable code as the reply's first word.
--
-- Codes (mirrored one-to-one by scheduler/errors.py, documented in lua/README.md):
--   INVALID, NOTFOUND, WRONGSTATE, LOCKLOST, HASDEPENDENTS, TOOLARGE, UNKNOWNCOMMAND, INTERNAL.
-- Err.raise throws a table; the dispatch catches it and returns it as an error reply, so the
-- client sees exactly '<CODE> <Command>(): <message>'.
local Err = {}

function Err.raise(code, message)
  error({ flows_error = code .. ' ' .. message }, 0)
end

-- Errors are raised before the first write of a command (see lua/README.md), so nothing needs
-- undoing here.
function Err.reply(raised)
  if type(raised) == 'table' and raised.flows_error then
    return redis.error_reply(raised.flows_error)
  end
  if type(raised) == 'table' and raised.err then
    -- an error reply from redis.call (for example WRONGTYPE): report it as an engine bug
    return redis.error_reply('INTERNAL ' .. tostring(raised.err))
  end
  return redis.error_reply('INTERNAL ' .. tostring(raised))
end
