-- log: step logs, the lines a job writes while it runs, one list per attempt (ours).
--
--   log.append (jid attempt dropped count (time stream level text)*count)...
--       Appends each job's lines to `P log:<attempt>:<jid>`, each entry the JSON text
--       {t, s, l, m} (time, stream, level, text; `l` only for a log record). An attempt keeps at
--       most `log-lines` lines and `log-bytes` bytes of text; the lines beyond are counted as
--       dropped, and the first of them leaves one entry {t, s = "truncated", m}. `dropped`:
--       lines the caller already dropped (counted the same way). stream is stdout, stderr or
--       log; level is '' or a level name. A job that does not exist is skipped: its lines would
--       outlive it. Replies a JSON list, per job in the order given: "ok", "full" (the attempt
--       keeps no more lines: send none) or "gone".
--   log.get jid [attempt [offset [count]]]
--       -> JSON {jid, attempt, attempts, offset, next, lines, total, bytes, dropped}: `count`
--       (1 to 1000, default 1000) entries from `offset`; attempt '' or 0: the latest attempt
--       with lines (0 when none has). `next` is the offset to read from next.
--
-- The counters live in the job's hash: `log-attempts` (the highest attempt with lines) and
-- `log:<attempt>` ("lines bytes dropped"); Job.drop_logs deletes lists and counters with the job.
-- A job re-run by run.rerun has `attempt-base` (its attempts before): the attempt a worker names
-- is counted on from it.
-- Errors: INVALID (an argument), TOOLARGE (a line over 16 KiB, more than 5,000 lines a call);
-- log.get: NOTFOUND when the job does not exist.
-- @include args
-- @include config
-- @include job

local LOG_STREAMS = { stdout = true, stderr = true, log = true }
local LOG_MAX_LINE = 16384
local LOG_MAX_LINES_PER_CALL = 5000
local LOG_MAX_ATTEMPT = 100000

local function log_counters(text)
  if not text then return 0, 0, 0 end
  local lines, bytes, dropped = string.match(text, '^(%d+) (%d+) (%d+)$')
  return tonumber(lines), tonumber(bytes), tonumber(dropped)
end

api['log.append'] = function(args)
  local cmd = 'LogAppend'
  if #args == 0 then Arg.fail(cmd, 'no jobs given') end
  -- Check everything first (nothing is written when one argument is wrong).
  local batches, i, lines_total = {}, 1, 0
  while i <= #args do
    local jid = Arg.jid(cmd, 'jid', args[i])
    local attempt = Arg.integer(cmd, 'attempt', args[i + 1], 1, LOG_MAX_ATTEMPT)
    local dropped = Arg.integer(cmd, 'dropped', args[i + 2], 0)
    local count = Arg.integer(cmd, 'count', args[i + 3], 0)
    lines_total = lines_total + count
    if lines_total > LOG_MAX_LINES_PER_CALL then
      Err.raise('TOOLARGE', cmd .. '(): more than ' .. LOG_MAX_LINES_PER_CALL .. ' lines in one call')
    end
    local first = i + 4
    if #args < first + count * 4 - 1 then
      Arg.fail(cmd, 'job ' .. jid .. ' announces ' .. count .. ' lines but fewer follow')
    end
    for at = first, first + count * 4 - 1, 4 do
      Arg.number(cmd, 'time', args[at], 0)
      if not LOG_STREAMS[args[at + 1]] then
        Arg.fail(cmd, 'Arg "stream" must be stdout, stderr or log: ' .. tostring(args[at + 1]))
      end
      if #args[at + 2] > 16 then Arg.fail(cmd, 'Arg "level" is longer than 16 bytes') end
      if #args[at + 3] > LOG_MAX_LINE then
        Err.raise('TOOLARGE', cmd .. '(): a line of ' .. #args[at + 3] .. ' bytes, more than '
          .. LOG_MAX_LINE)
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
    local key = Keys.job(b.jid)
    -- A re-run job (run.rerun) counts its attempts on from the earlier ones' (its worker's
    -- count starts at 1 again), so their lines stay readable as theirs.
    b.attempt = b.attempt + (tonumber(redis.call('hget', key, 'attempt-base')) or 0)
    local field = 'log:' .. b.attempt
    local state, counters, attempts = unpack(redis.call('hmget', key, 'state', field, 'log-attempts'))
    if not state then
      replies[n] = 'gone'
    else
      local lines, bytes, dropped = log_counters(counters)
      local was_full = dropped > 0
      local entries = {}
      for at = b.first, b.first + b.count * 4 - 1, 4 do
        local text = args[at + 3]
        if dropped == 0 and lines < max_lines and bytes + #text <= max_bytes then
          local entry = { t = tonumber(args[at]), s = args[at + 1], m = text }
          if args[at + 2] ~= '' then entry.l = args[at + 2] end
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
      if #entries > 0 then Engine.call_many('rpush', Keys.log(b.jid, b.attempt), entries) end
      local fields = { field, lines .. ' ' .. bytes .. ' ' .. dropped }
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
  local attempt = Arg.optional_integer(cmd, 'attempt', args[2], 0, 0, LOG_MAX_ATTEMPT)
  local offset = Arg.optional_integer(cmd, 'offset', args[3], 0, 0)
  local count = Arg.optional_integer(cmd, 'count', args[4], 1000, 1, 1000)
  local key = Keys.job(jid)
  local state, attempts = unpack(redis.call('hmget', key, 'state', 'log-attempts'))
  if not state then Err.raise('NOTFOUND', cmd .. '(): no job ' .. jid) end
  attempts = tonumber(attempts) or 0
  if attempt == 0 then attempt = attempts end
  local out = { jid = jid, attempt = attempt, attempts = attempts, offset = offset, next = offset,
    total = 0, bytes = 0, dropped = 0 }
  local lines = {}
  if attempt > 0 then
    local _, bytes, dropped = log_counters(redis.call('hget', key, 'log:' .. attempt))
    local list = Keys.log(jid, attempt)
    lines = redis.call('lrange', list, offset, offset + count - 1)
    out.total, out.bytes, out.dropped = redis.call('llen', list), bytes, dropped
    out.next = offset + #lines
  end
  -- The entries are JSON texts already: spliced in, not decoded and encoded again.
  local text = cjson.encode(out)
  local list = #lines == 0 and '[]' or '[' .. table.concat(lines, ',') .. ']'
  return string.sub(text, 1, -2) .. ',"lines":' .. list .. '}'
end
