-- json_text: JSON text as cjson writes it, spliced together on hot paths (a put's event and
-- history entry, pop.lean's reply) instead of encoding a table each time, which costs about
-- twice as much; and the text a caller gave, kept where cjson would write it back changed
-- (JsonText.exact, JsonText.members).
local JsonText = {}

-- A string: quoted as it is when it has nothing to escape, else through cjson.
function JsonText.string(text)
  -- One anchored match of the whole text: a search would try a match at every position.
  if string.find(text, '^[^%c"\\/]*$') then return '"' .. text .. '"' end
  return cjson.encode(text)
end

-- A name Arg.name or Arg.jid took (a jid, a queue): it holds no control character, '/' or '\\',
-- so of what cjson escapes only '"' can be in it, which a plain search finds at a fraction of
-- the cost of the pattern above (a put quotes two per call).
function JsonText.name(text)
  if not string.find(text, '"', 1, true) then return '"' .. text .. '"' end
  return cjson.encode(text)
end

-- An integer stored as text (the engine writes them so) as it is; anything else through cjson.
function JsonText.integer(text)
  if text and (text == '0' or string.find(text, '^%-?[1-9]%d*$')) then return text end
  return cjson.encode(tonumber(text) or 0)
end

-- Whether cjson (or tostring, for a number) writes `value` again exactly: false when a number
-- in it needs more than the 14 significant digits they write (a 17-digit id, an epoch time in
-- microseconds), which comes back as another number.
function JsonText.exact(value)
  local kind = type(value)
  if kind == 'number' then
    return tonumber(string.format('%.14g', value)) == value
  elseif kind == 'table' then
    for _, item in pairs(value) do
      if not JsonText.exact(item) then return false end
    end
  end
  return true
end

-- The index of the quote that ends the JSON string starting at `at` in `text`.
local function string_end(text, at)
  local q = at
  while true do
    q = string.find(text, '["\\]', q + 1)
    if string.sub(text, q, q) == '"' then return q end
    q = q + 1 -- the escaped character
  end
end

-- The index of the last character of the JSON value starting at `at` in `text`.
local function value_end(text, at)
  local first = string.sub(text, at, at)
  if first == '"' then return string_end(text, at) end
  if first ~= '{' and first ~= '[' then
    return (string.find(text, '[,}%]%s]', at) or #text + 1) - 1
  end
  local depth, q = 0, at
  while true do
    local found, _, char = string.find(text, '(["{}%[%]])', q)
    q = found
    if char == '"' then
      q = string_end(text, q)
    elseif char == '{' or char == '[' then
      depth = depth + 1
    else
      depth = depth - 1
      if depth == 0 then return q end
    end
    q = q + 1
  end
end

-- The members of a JSON object's text (one cjson decoded already, so well formed) as the text
-- each value was given in: name -> text (a name given twice: its last value, as cjson keeps).
-- For a value that cjson would not write again exactly (JsonText.exact).
function JsonText.members(text)
  local members = {}
  local at = string.find(text, '{', 1, true) + 1
  while true do
    local s = string.find(text, '["}]', at)
    if string.sub(text, s, s) == '}' then return members end
    local e = string_end(text, s)
    local name = cjson.decode(string.sub(text, s, e))
    local v = string.find(text, '[^%s:]', e + 1)
    local last = value_end(text, v)
    members[name] = string.sub(text, v, last)
    at = last + 1
  end
end
