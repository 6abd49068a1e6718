-- json_text: JSON text as cjson writes it, spliced together on hot paths (a put's event and
-- history entry, pop.lean's reply) instead of encoding a table each time, which costs about
-- twice as much.
local JsonText = {}

-- A string: quoted as it is when it has nothing to escape, else through cjson.
function JsonText.string(text)
  -- One anchored match of the whole text: a search would try a match at every position.
  if string.find(text, '^[^%c"\\/]*$') then return '"' .. text .. '"' end
  return cjson.encode(text)
end

-- An integer stored as text (the engine writes them so) as it is; anything else through cjson.
function JsonText.integer(text)
  if text and (text == '0' or string.find(text, '^%-?[1-9]%d*$')) then return text end
  return cjson.encode(tonumber(text) or 0)
end
