-- args: checking a command's arguments before it writes anything.
--
-- Every checker takes the command's display name (for example 'Put') and the argument's name,
-- and raises INVALID (or TOOLARGE) with a message naming both; on success it returns the value
-- converted (numbers as numbers, JSON as text that is known to decode).
-- @include errors
-- @include engine
-- @include dialect
local Arg = {}

-- Size limits, also enforced by the Python client (scheduler/engine/limits.py) so users hear of them
-- before a round trip.
Arg.MAX_ID_BYTES = 256
Arg.MAX_PAYLOAD_BYTES = 524288
Arg.MAX_TAGS = 64
-- Nesting allowed in JSON the engine stores and hands back: a job's data (every 'payload'), a
-- run's record, log data in a job's history, worker and scheduler info, a schedule's
-- definition, a backfill's record (Arg.json's default, whatever the kind). Every reader must read
-- it back inside a larger document: cjson refuses to encode more than 1000 levels, and the
-- Python readers (the API's serializer stops at about 250 levels, the json module and
-- dataclasses at Python's recursion limit) less; a deeper value would make every later read
-- of it fail, so it is refused when it comes in.
Arg.MAX_NESTING = 100
-- Nesting allowed in a job's result (a flow step's outputs; a wait's signal data becomes its
-- result): less than data, as a result is copied into what reads it (a downstream step's
-- data, a run's outputs, a sub-flow step's result) a few levels down. The same number as
-- scheduler/engine/limits.py MAX_RESULT_DEPTH.
Arg.MAX_RESULT_NESTING = 64

-- Suffixes the key layout appends to a jid: a jid ending in one would alias another job's keys.
local RESERVED_SUFFIXES = { '-history', '-dependencies', '-dependents' }

local function fail(cmd, message)
  Err.raise('INVALID', cmd .. '(): ' .. message)
end
Arg.fail = fail

-- Bytes of a refused value an error message shows.
Arg.SHOWN_BYTES = 60

-- A refused value as an error message shows it: its first Arg.SHOWN_BYTES bytes (a message
-- names what is wrong, it does not echo a megabyte back), and NUL, CR and LF as \x00, \x0d and
-- \x0a, which an error reply cannot carry (the server ends the message at a NUL and turns line
-- breaks into spaces); the client escapes the other control characters alike
-- (scheduler/engine/errors.py). Only refusals call it.
function Arg.shown(value)
  local text = tostring(value)
  local cut = #text > Arg.SHOWN_BYTES
  if cut then
    -- Not half a UTF-8 character: the last multibyte one goes, as the cut may have split it.
    text = string.gsub(string.sub(text, 1, Arg.SHOWN_BYTES), '[\192-\255][\128-\191]*$', '')
  end
  text = string.gsub(text, '[%z\r\n]', function(char) return string.format('\\x%02x', string.byte(char)) end)
  if cut then text = text .. '... (' .. #tostring(value) .. ' bytes)' end
  return text
end

function Arg.present(cmd, name, value)
  if value == nil or value == '' then
    fail(cmd, 'Arg "' .. name .. '" missing')
  end
  return value
end

-- Free text (a message, a setting): present and at most `max_bytes` (default 512 KiB).
function Arg.text(cmd, name, value, max_bytes)
  Arg.present(cmd, name, value)
  max_bytes = max_bytes or Arg.MAX_PAYLOAD_BYTES
  if #value > max_bytes then
    Err.raise('TOOLARGE', cmd .. '(): Arg "' .. name .. '" is ' .. #value ..
      ' bytes, more than the limit of ' .. max_bytes)
  end
  return value
end

-- A job id, queue, worker, group or tag: non-empty, bounded, printable, no white space.
-- The bidirectional controls (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) in
-- UTF-8: they make an id display as another ("Trojan Source"), in a terminal and on a page
-- alike, so an id holds none (scheduler/terminal.py lists the same characters).
local function bidi_control(value)
  return string.find(value, '\216\156') or string.find(value, '\226\128[\142\143\170-\174]')
    or string.find(value, '\226\129[\166-\169]')
end

-- Printable ASCII but space, the whole value: no control, C1 or bidirectional character can be
-- in it, so the one anchored match settles most ids (jids, queues, klasses) at once.
local PLAIN = '^[!-~]+$'

local function check_id(cmd, name, value)
  if type(value) == 'string' and #value <= Arg.MAX_ID_BYTES and string.find(value, PLAIN) then
    return value
  end
  Arg.present(cmd, name, value)
  if #value > Arg.MAX_ID_BYTES then
    Err.raise('TOOLARGE', cmd .. '(): Arg "' .. name .. '" is ' .. #value ..
      ' bytes, more than the limit of ' .. Arg.MAX_ID_BYTES)
  end
  -- One anchored match of the whole value: about twice as fast as searching for a bad
  -- character from every position ([%c ] is [%c%s]: the other white space is control).
  -- C1 control characters (U+0080..U+009F) are \194\128..\194\159 in UTF-8.
  if not string.find(value, '^[^%c ]*$') or string.find(value, '\194[\128-\159]')
      or (string.find(value, '[\216\226]') and bidi_control(value)) then
    fail(cmd, 'Arg "' .. name .. '" contains white space or a control character: ' ..
      string.format('%q', value))
  end
  return value
end

-- A name that ends up in a URL or a file path: a jid, queue, run id, step, schedule or flow
-- name. An id (above) that holds no '/' or '\\' and is not '.' or '..', so it is always one
-- path segment and never walks to another object's.
local function check_name(cmd, name, value)
  -- Printable ASCII but space, '/' and '\\' (the ranges ]-~, !-. and 0-[), the whole value: the
  -- one anchored match settles most names (jids, queues) at once, as PLAIN does ids. (The
  -- pattern written here: no local of the main chunk for it.)
  if type(value) == 'string' and #value <= Arg.MAX_ID_BYTES
      and string.find(value, '^[]-~!-.0-[]+$') and value ~= '.' and value ~= '..' then
    return value
  end
  check_id(cmd, name, value)
  -- Plain searches: a pattern's search tries a match at every position.
  if string.find(value, '/', 1, true) or string.find(value, '\\', 1, true) or value == '.'
      or value == '..' then
    fail(cmd, 'Arg "' .. name .. '" may not hold "/" or "\\" nor be "." or "..": ' ..
      string.format('%q', value))
  end
  return value
end

-- Ids found valid lately. An id's validity depends on nothing but the id, so this memo may
-- outlive a call (unlike per-call state): the queue, worker and class names that come with
-- almost every call are checked once. Bounded; jids (which seldom come twice) stay out of it.
local checked = { ids = {}, count = 0 }
local MAX_CHECKED = 256

function Arg.id(cmd, name, value)
  if checked.ids[value] then return value end
  check_id(cmd, name, value)
  if checked.count >= MAX_CHECKED then checked.ids, checked.count = {}, 0 end
  checked.ids[value] = true
  checked.count = checked.count + 1
  return value
end

-- Names found valid lately (a memo as the one of ids above; separate: a name is stricter).
local names = { ids = {}, count = 0 }

function Arg.name(cmd, name, value)
  if names.ids[value] then return value end
  check_name(cmd, name, value)
  if names.count >= MAX_CHECKED then names.ids, names.count = {}, 0 end
  names.ids[value] = true
  names.count = names.count + 1
  return value
end

function Arg.jid(cmd, name, value)
  check_name(cmd, name, value)
  -- Every reserved suffix starts with '-': most jids (hex uuids) have none to look at.
  if not string.find(value, '-', 1, true) then return value end
  for _, suffix in ipairs(RESERVED_SUFFIXES) do
    if #value >= #suffix and string.find(value, suffix, #value - #suffix + 1, true) then
      fail(cmd, 'Arg "' .. name .. '" may not end in "' .. suffix .. '" (reserved by the key layout): ' .. value)
    end
  end
  return value
end

-- Whether `value` is what Arg.jid takes, without failing: a listing of what a key holds skips
-- (and the doctor reports) an entry an outside writer left that is none (white space, a control
-- character), instead of the whole listing failing when a caller passes it back.
function Arg.is_jid(value)
  return (pcall(Arg.jid, '', 'jid', value))
end

-- The entries of `list` that are jids (Arg.is_jid), in order.
function Arg.jids_in(list)
  local out = {}
  for _, value in ipairs(list) do
    if Arg.is_jid(value) then out[#out + 1] = value end
  end
  return out
end

-- A finite number (not NaN, not infinite), at least `min` when given.
function Arg.number(cmd, name, value, min)
  if value == nil or value == '' then fail(cmd, 'Arg "' .. name .. '" missing') end -- Arg.present
  local n = tonumber(value)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then
    fail(cmd, 'Arg "' .. name .. '" is not a finite number: ' .. Arg.shown(value))
  end
  if min ~= nil and n < min then
    fail(cmd, 'Arg "' .. name .. '" must be at least ' .. min .. ': ' .. Arg.shown(value))
  end
  return n
end

-- A length of time in seconds: more than 0 and at most `max`.
function Arg.seconds(cmd, name, value, max)
  local n = Arg.number(cmd, name, value, 0)
  if n <= 0 or n > max then
    fail(cmd, 'Arg "' .. name .. '" must be more than 0 and at most ' .. max .. ': ' .. Arg.shown(value))
  end
  return n
end

function Arg.integer(cmd, name, value, min, max)
  local n = Arg.number(cmd, name, value, min)
  if math.floor(n) ~= n then
    fail(cmd, 'Arg "' .. name .. '" is not an integer: ' .. Arg.shown(value))
  end
  if max ~= nil and n > max then
    fail(cmd, 'Arg "' .. name .. '" must be at most ' .. max .. ': ' .. Arg.shown(value))
  end
  return n
end

-- A number kept as the text given (a setting): besides what Arg.number checks, in decimal
-- notation, as JSON writes numbers. Lua reads ' 5', '5 ' and '0x10' as numbers, other readers
-- of the text (Python's float, qless's clients) do not all. Returns the number.
function Arg.decimal(cmd, name, value)
  local n = Arg.number(cmd, name, value)
  if type(value) == 'string' and not string.find(value, '^-?%d*%.?%d*$')
      and not string.find(value, '^-?%d*%.?%d*[eE][-+]?%d+$') then
    fail(cmd, 'Arg "' .. name .. '" is not a number in decimal notation: ' .. Arg.shown(value))
  end
  return n
end

-- `value` if given, else `default`; checked as Arg.number / Arg.integer otherwise.
function Arg.optional_number(cmd, name, value, default, min)
  if value == nil or value == '' then return default end
  return Arg.number(cmd, name, value, min)
end

function Arg.optional_integer(cmd, name, value, default, min, max)
  if value == nil or value == '' then return default end
  return Arg.integer(cmd, name, value, min, max)
end

-- What is wrong with a decoded value: 'nan' when it holds NaN or an infinity anywhere (the
-- server's cjson accepts them as extensions, but they are not JSON and no other client could
-- read them back), 'deep' when a table in it is more than `room` levels down (the value itself
-- is level 1), or nil. Only values are looked at: cjson gives object keys as strings and array
-- keys as 1..n. One walk for both, with inline type tests, not a call per value: this walk is
-- most of the cost of checking a job's data.
local HUGE = 1 / 0 -- math.huge (a library's top level may not read the math table)
local function unfit(value, room)
  if room < 1 then return 'deep' end
  -- `next` itself, not pairs(): the same walk without a call per table.
  for _, item in next, value do
    local kind = type(item)
    if kind == 'number' then
      if item ~= item or item == HUGE or item == -HUGE then return 'nan' end
    elseif kind == 'table' then
      local found = unfit(item, room - 1)
      if found then return found end
    end
  end
  return nil
end

-- The first number of JSON text `text`, outside its strings, that is past what a double holds
-- (cjson decodes `1e999`, or an integer of 309 digits and more, to an infinity), as written
-- (cut short when long); nil when there is none, so the infinity was written as one
-- (`Infinity`, `inf`). Looked for only once a decoded value was found to hold an infinity: the
-- common path never scans the text.
function Arg.past_double(text)
  local at = 1
  while true do
    local s, _, char = string.find(text, '(["%d])', at)
    if not s then return nil end
    if char == '"' then
      local q = s
      repeat
        q = string.find(text, '["\\]', q + 1)
        if not q then return nil end
        local quote = string.sub(text, q, q) == '"'
        if not quote then q = q + 1 end -- the escaped character
      until quote
      at = q + 1
    else
      local number = string.match(text, '^%d+%.?%d*', s)
      number = number .. (string.match(text, '^[eE][-+]?%d+', s + #number) or '')
      if tonumber(number) == HUGE then
        if s > 1 and string.sub(text, s - 1, s - 1) == '-' then number = '-' .. number end
        if #number > 24 then number = string.sub(number, 1, 12) .. '... (' .. #number .. ' characters)' end
        return number
      end
      at = s + #number
    end
  end
end

-- Arg.json but for the finite-number and nesting checks: text, decoded value.
local function decode(cmd, name, value, kind, max_bytes)
  if value == nil or value == '' then fail(cmd, 'Arg "' .. name .. '" missing') end -- Arg.present
  max_bytes = max_bytes or Arg.MAX_PAYLOAD_BYTES
  if #value > max_bytes then
    Err.raise('TOOLARGE', cmd .. '(): Arg "' .. name .. '" is ' .. #value ..
      ' bytes, more than the limit of ' .. max_bytes)
  end
  local ok, decoded = pcall(cjson.decode, value)
  if not ok then
    fail(cmd, 'Arg "' .. name .. '" is not valid JSON: ' .. tostring(decoded))
  end
  -- cjson decodes '{}' and '[]' alike, so the first character tells objects from arrays (most
  -- often an object's '{' at once, without a pattern).
  local first = string.byte(value) == 123 and '{' or string.match(value, '^%s*(.)')
  local is_table = type(decoded) == 'table'
  -- A job's payload: an object; in the qless dialect an array too, as qless takes either.
  if kind == 'payload' then
    if Dialect.rules.lenient_arguments and first == '[' and is_table then return value, decoded, true end
    kind = 'object'
  end
  if kind == 'object' and (not is_table or first ~= '{') then
    fail(cmd, 'Arg "' .. name .. '" is not a JSON object: ' .. string.sub(value, 1, 80))
  end
  if kind == 'array' and (not is_table or (first ~= '[' and value ~= '{}')) then
    fail(cmd, 'Arg "' .. name .. '" is not a JSON array: ' .. string.sub(value, 1, 80))
  end
  return value, decoded, is_table
end

-- JSON text that decodes; `kind` is 'object', 'array', 'any' or 'payload' (a job's data: an
-- object, in the qless dialect an array too); at most `max_bytes` (default
-- Arg.MAX_PAYLOAD_BYTES) and at most `max_depth` levels deep (default: Arg.MAX_NESTING, for
-- whatever the engine may keep: a schedule's definition, a backfill's record, as a payload).
-- Returns text, decoded value.
function Arg.json(cmd, name, value, kind, max_bytes, max_depth)
  -- The most common payload, valid as every kind (an empty array too: cjson decodes both alike).
  if value == '{}' then return value, {} end
  max_depth = max_depth or Arg.MAX_NESTING
  local _, decoded, is_table = decode(cmd, name, value, kind, max_bytes)
  -- Walked, not searched for in the text: a pattern search costs more per byte than the walk
  -- costs per value (a payload of one long string is one value).
  local found
  if is_table then
    found = unfit(decoded, max_depth)
  elseif decoded ~= decoded or decoded == HUGE or decoded == -HUGE then
    found = 'nan'
  end
  if found == 'nan' then
    local number = Arg.past_double(value)
    if number then
      fail(cmd, 'Arg "' .. name .. '" holds a number past what JSON readers hold (a double: about '
        .. '1.8e308 either way; beyond, they read infinity): ' .. number .. '; give it as text')
    end
    fail(cmd, 'Arg "' .. name .. '" is not valid JSON: NaN and Infinity are not JSON numbers')
  elseif found == 'deep' then
    fail(cmd, 'Arg "' .. name .. '" nests more than ' .. max_depth .. ' levels deep')
  end
  return value, decoded
end

-- Whether JSON text the engine kept earlier (not an argument: it was checked, if at all, by
-- older rules) would be refused now as one nested at most `max_depth` levels deep: deeper, or
-- holding NaN, or not decoding at all (deeper than cjson goes). nil text is not. For a path
-- that copies a kept value into another key (a cache hit's result), which would else store
-- what no argument may bring in.
function Arg.kept_unfit(text, max_depth)
  -- Each level takes at least two characters: short text cannot nest too deeply.
  if text == nil or #text <= 2 * max_depth then return false end
  local ok, decoded = pcall(cjson.decode, text)
  if not ok then return true end
  return type(decoded) == 'table' and unfit(decoded, max_depth) ~= nil
end

-- A JSON array of ids (tags, jids); each checked with `check` (Arg.id by default).
function Arg.id_list(cmd, name, value, check, max)
  local _, list = Arg.json(cmd, name, value, 'array')
  return Arg.id_items(cmd, name, list, check, max)
end

-- Whether a decoded JSON value is a list (an array; cjson gives an object string keys).
function Arg.is_list(value)
  if type(value) ~= 'table' then return false end
  local count = 0
  for _ in pairs(value) do count = count + 1 end
  return count == #value
end

-- A decoded list of ids: each checked with `check` (Arg.id by default), duplicates dropped,
-- at most `max` of them when given. Returns the ids in order.
function Arg.id_items(cmd, name, list, check, max)
  if not Arg.is_list(list) then
    local ok, shown = pcall(cjson.encode, list)
    fail(cmd, 'Arg "' .. name .. '" is not a JSON array: ' .. (ok and string.sub(shown, 1, 80) or type(list)))
  end
  check = check or Arg.id
  local seen, out = {}, {}
  for i, item in ipairs(list) do
    -- qless takes numbers among tags: the qless dialect takes them as their text.
    if Dialect.rules.lenient_arguments and type(item) == 'number' and item == item and item ~= HUGE
      and item ~= -HUGE then
      item = tostring(item)
    end
    if type(item) ~= 'string' then
      fail(cmd, 'Arg "' .. name .. '" item ' .. i .. ' is not a string')
    end
    check(cmd, name .. '[' .. i .. ']', item)
    if not seen[item] then
      seen[item] = true
      table.insert(out, item)
    end
  end
  if max and #out > max then
    Err.raise('TOOLARGE', cmd .. '(): Arg "' .. name .. '" has ' .. #out ..
      ' items, more than the limit of ' .. max)
  end
  return out
end

-- Check `count` items (a bulk command's jobs): `check(named, i)` for i = 1..count, where `named`
-- is the display name its errors start with, `cmd label[?]`. An error is then told about the
-- item it came from: `cmd label[i]`. One name for the whole call, not one string per item.
function Arg.each(cmd, label, count, check)
  local named = cmd .. ' ' .. label .. '[?]'
  local current = 0
  local ok, raised = pcall(function()
    for i = 1, count do
      current = i
      check(named, i)
    end
  end)
  if ok then return end
  if type(raised) == 'table' and raised.flows_error then
    local text = raised.flows_error
    local at = string.find(text, named, 1, true)
    if at then
      raised.flows_error = string.sub(text, 1, at - 1) .. cmd .. ' ' .. label .. '[' .. current ..
        ']' .. string.sub(text, at + #named)
    end
  end
  error(raised, 0)
end

-- Trailing ('name', value) pairs from args[first]; `allowed` is a set of option names.
-- Returns a table name -> raw value; an odd count or an unknown name raises INVALID.
function Arg.options(cmd, args, first, allowed)
  local options = {}
  local n = #args
  if n >= first and (n - first + 1) % 2 ~= 0 then
    fail(cmd, 'option "' .. Arg.shown(args[n]) .. '" has no value (options come in (name, value) pairs)')
  end
  for i = first, n, 2 do
    local key = args[i]
    if not allowed[key] then
      local names = {}
      for name in pairs(allowed) do table.insert(names, name) end
      table.sort(names)
      fail(cmd, 'unknown option "' .. Arg.shown(key) .. '" (known: ' .. table.concat(names, ', ') .. ')')
    end
    options[key] = args[i + 1]
  end
  return options
end
