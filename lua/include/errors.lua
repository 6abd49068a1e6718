-- errors: raising engine errors with a stable code as the reply's first word.
--
-- Codes (mirrored one-to-one by scheduler/engine/errors.py, documented in lua/README.md):
--   INVALID, NOTFOUND, WRONGSTATE, LOCKLOST, HASDEPENDENTS, TOOLARGE, UNKNOWNCOMMAND, INTERNAL.
-- Err.raise throws a table; the dispatch catches it and returns it as an error reply, so the
-- client sees exactly '<CODE> <Command>(): <message>'.
local Err = {}

function Err.raise(code, message)
  error({ flows_error = code .. ' ' .. message }, 0)
end

-- What the server refuses inside a call is the caller's to fix, not an engine bug: the reply
-- keeps the server's code (the caller's ACL, a full server, a replica).
local REFUSALS = {
  { 'ACL failure', 'NOPERM' }, { '^NOPERM ', 'NOPERM' }, { 'No permissions', 'NOPERM' },
  { '^OOM ', 'OOM' }, { '^READONLY ', 'READONLY' },
}

-- Errors are raised before the first write of a command (see lua/README.md), so nothing needs
-- undoing here. `command` is the display name of the command that raised.
function Err.reply(raised, command)
  if type(raised) == 'table' and raised.flows_error then
    return redis.error_reply(raised.flows_error)
  end
  -- redis.call raises an error reply as a table ({err = ...}); an ACL refusal as a string.
  local text = tostring(type(raised) == 'table' and raised.err or raised)
  for _, refusal in ipairs(REFUSALS) do
    if string.find(text, refusal[1]) then
      return redis.error_reply(refusal[2] .. ' ' .. command .. '(): ' .. text)
    end
  end
  -- anything else (WRONGTYPE, a Lua runtime error) is an engine bug
  return redis.error_reply('INTERNAL ' .. text)
end
