-- log: step logs, the lines a job writes while it runs, one list per attempt (ours).
--
--   log.append (jid attempt dropped count (time stream level text)*count)...
--       Appends each job's lines to `P log:<attempt>:<jid>`, each entry the JSON text
--       {t, s, l, m} (time, stream, level, text; `l` only for a log record). An attempt keeps at
--       most `log-lines` lines and `log-bytes` bytes of text; the lines beyond are counted as
--       dropped, and the first of them leaves one entry {t, s = "truncated", m}. `dropped`:
--       lines the caller already dropped (counted the same way; at most 2^31 - 1). stream is
--       stdout, stderr or log; level is '' or a level name, followed by `/N` when the caller cut
--       N bytes off the end of the line (the entry gets {c = N}; the line counts as cut). A job
--       that does not exist is skipped (its lines would outlive it), unless its run's cancel
--       kept its logs (Job.keep_logs): a canceled running job's last lines join them. Replies a
--       JSON list, per job in the order given: "ok", "full" (the attempt keeps no more lines:
--       send none) or "gone".
--   log.get jid [attempt [offset [count]]]
--       -> JSON {jid, attempt, attempts, offset, next, lines, total, bytes, dropped, cut}:
--       `count` (1 to 1000, default 1000) entries from `offset`; attempt '' or 0: the latest
--       attempt with lines (0 when none has). `next` is the offset to read from next.
--       `dropped` counts the lines not kept and the lines kept cut short, `cut` the latter.
--       A job its run's cancel deleted is read from the logs the cancel kept.
--
-- The counters live in the job's hash: `log-attempts` (the highest attempt with lines) and
-- `log:<attempt>` ("lines bytes dropped cut"); Job.drop_logs deletes lists and counters with the
-- job, Job.keep_logs moves them aside when a run's cancel deletes it.
-- Errors: INVALID (an argument), TOOLARGE (a line over 16 KiB, more than 5,000 lines a call);
-- log.get: NOTFOUND when the job does not exist.
-- @include args
-- @include config
-- @include job

-- One table, not top-level locals: the joined script's main chunk may hold at most 200.
local Log = {
  STREAMS = { stdout = true, stderr = true, log = true },
  MAX_LINE = 16384,
  MAX_LINES_PER_CALL = 5000,
  MAX_ATTEMPT = 100000,
}

function Log.counters(text)
  if not text then return 0, 0, 0, 0 end
  local lines, bytes, dropped, cut = string.match(text, '^(%d+) (%d+) (%d+) ?(%d*)$')
  return tonumber(lines), tonumber(bytes), tonumber(dropped), tonumber(cut) or 0
end

-- Where a job's logs are: the job's hash and its lists, or those its run's cancel kept
-- (Job.keep_logs); nil when neither exists. `state` is the job's state (nil once deleted).
function Log.home(jid, state)
  if state then return Keys.job(jid), Keys.log end
  local kept = Keys.kept_logs(jid)
  if redis.call('exists', kept) == 1 then return kept, Keys.kept_log end
  return nil
end

-- A line's level argument: the level name and the bytes cut off the line (nil: not cut).
function Log.split_level(cmd, text)
  local name, cut = string.match(text, '^([^/]*)/(%d+)$')
  if not name then name = text end
  if #name > 16 then Arg.fail(cmd, 'Arg "level" is longer than 16 bytes') end
  return name, tonumber(cut)
end

api['log.append'] = function(args)
  local cmd = 'LogAppend'
  if #args == 0 then Arg.fail(cmd, 'no jobs given') end
  -- Check everything first (nothing is written when one argument is wrong).
  local batches, i, lines_total = {}, 1, 0
  while i <= #args do
    local jid = Arg.jid(cmd, 'jid', args[i])
    local attempt = Arg.integer(cmd, 'attempt', args[i + 1], 1, Log.MAX_ATTEMPT)
    -- Bounded: the counters are kept as text of whole numbers (Log.counters), which a Lua
    -- number past 1e14 is not (it prints in exponent notation).
    local dropped = Arg.integer(cmd, 'dropped', args[i + 2], 0, Engine.MAX_OFFSET)
    local count = Arg.integer(cmd, 'count', args[i + 3], 0)
    lines_total = lines_total + count
    if lines_total > Log.MAX_LINES_PER_CALL then
      Err.raise('TOOLARGE', cmd .. '(): more than ' .. Log.MAX_LINES_PER_CALL .. ' lines in one call')
    end
    local first = i + 4
    if #args < first + count * 4 - 1 then
      Arg.fail(cmd, 'job ' .. jid .. ' announces ' .. count .. ' lines but fewer follow')
    end
    for at = first, first + count * 4 - 1, 4 do
      Arg.number(cmd, 'time', args[at], 0)
      if not Log.STREAMS[args[at + 1]] then
        Arg.fail(cmd, 'Arg "stream" must be stdout, stderr or log: ' .. Arg.shown(args[at + 1]))
      end
      Log.split_level(cmd, args[at + 2])
      if #args[at + 3] > Log.MAX_LINE then
        Err.raise('TOOLARGE', cmd .. '(): a line of ' .. #args[at + 3] .. ' bytes, more than '
          .. Log.MAX_LINE)
      end
    end
    table.insert(batches, { jid = jid, attempt = attempt, dropped = dropped, first = first,
      count = count })
    i = first + count * 4
  end

  local max_lines, max_bytes = Config.values('log-lines', 'log-bytes')
  max_lines, max_bytes = tonumber(max_lines), tonumber(max_bytes)
  local replies = {}
  for n, b in ipairs(batches) do
    local field = 'log:' .. b.attempt
    local state = Job.state(b.jid)
    local key, list_key = Log.home(b.jid, state)
    if not key then
      replies[n] = 'gone'
    else
      local counters, attempts = unpack(redis.call('hmget', key, field, 'log-attempts'))
      local lines, bytes, dropped, cut = Log.counters(counters)
      local was_full = dropped > 0
      local entries = {}
      for at = b.first, b.first + b.count * 4 - 1, 4 do
        local text = args[at + 3]
        if dropped == 0 and lines < max_lines and bytes + #text <= max_bytes then
          local entry = { t = tonumber(args[at]), s = args[at + 1], m = text }
          local level, cut_bytes = Log.split_level(cmd, args[at + 2])
          if level ~= '' then entry.l = level end
          if cut_bytes then entry.c, cut = cut_bytes, cut + 1 end
          entries[#entries + 1] = cjson.encode(entry)
          lines, bytes = lines + 1, bytes + #text
        else
          dropped = dropped + 1
        end
      end
      dropped = dropped + b.dropped
      if dropped > 0 and not was_full then
        entries[#entries + 1] = cjson.encode({ t = Engine.now, s = 'truncated',
          m = 'log truncated: more than ' .. max_lines .. ' lines or ' .. max_bytes .. ' bytes' })
      end
      if #entries > 0 then Engine.call_many('rpush', list_key(b.jid, b.attempt), entries) end
      local fields = { field, lines .. ' ' .. bytes .. ' ' .. dropped .. ' ' .. cut }
      if b.attempt > (tonumber(attempts) or 0) then
        fields[3], fields[4] = 'log-attempts', b.attempt
      end
      redis.call('hset', key, unpack(fields))
      replies[n] = dropped > 0 and 'full' or 'ok'
    end
  end
  return cjson.encode(replies)
end

api['log.get'] = function(args)
  local cmd = 'LogGet'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local attempt = Arg.optional_integer(cmd, 'attempt', args[2], 0, 0, Log.MAX_ATTEMPT)
  local offset = Arg.optional_integer(cmd, 'offset', args[3], 0, 0, Engine.MAX_OFFSET)
  local count = Arg.optional_integer(cmd, 'count', args[4], 1000, 1, 1000)
  local key, list_key = Log.home(jid, Job.state(jid))
  if not key then Err.raise('NOTFOUND', cmd .. '(): no job ' .. jid) end
  local attempts = tonumber(redis.call('hget', key, 'log-attempts')) or 0
  if attempt == 0 then attempt = attempts end
  local out = { jid = jid, attempt = attempt, attempts = attempts, offset = offset, next = offset,
    total = 0, bytes = 0, dropped = 0, cut = 0 }
  local lines = {}
  if attempt > 0 then
    local _, bytes, dropped, cut = Log.counters(redis.call('hget', key, 'log:' .. attempt))
    local list = list_key(jid, attempt)
    lines = redis.call('lrange', list, offset, offset + count - 1)
    out.total, out.bytes, out.dropped, out.cut = redis.call('llen', list), bytes, dropped + cut, cut
    out.next = offset + #lines
  end
  -- The entries are JSON texts already: spliced in, not decoded and encoded again.
  local text = cjson.encode(out)
  local list = #lines == 0 and '[]' or '[' .. table.concat(lines, ',') .. ']'
  return string.sub(text, 1, -2) .. ',"lines":' .. list .. '}'
end
