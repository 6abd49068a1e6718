-- track, log: tracked jobs and custom history entries.
--
--   track                  -> JSON {jobs: [job...], expired: [jid...]}
--   track 'track', jid     -> 1 (the job's jid is published on `P track`)
--   track 'untrack', jid   -> 1 if it was tracked, else 0
--   log jid, message, [data JSON object]  -> nil; appends {what = message, ...data} to history
--                                            (message up to 4 KiB, data up to 100 levels deep;
--                                            a number cjson would write back changed kept as
--                                            given)
--
-- `expired` lists tracked jids whose job no longer exists (completed and expired, or canceled);
-- an entry an outside writer left that is no jid is no job, listed in neither (Arg.jids_in).
-- Errors: INVALID, TOOLARGE, NOTFOUND.
-- @include args
-- @include job
-- @include events

api['track'] = function(args)
  local cmd = 'Track'
  if args[1] == nil then
    -- The jobs spliced in as their text (Job.describe_list says why).
    local jobs, expired = Job.describe_list(Arg.jids_in(redis.call('zrange', Keys.tracked(), 0, -1)))
    local encoded = #expired == 0 and '[]' or cjson.encode(expired)
    return '{"jobs":' .. jobs .. ',"expired":' .. encoded .. '}'
  end
  local verb = args[1]
  local jid = Arg.jid(cmd, 'jid', args[2])
  if verb == 'track' then
    if not Job.exists(jid) then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
    redis.call('zadd', Keys.tracked(), Engine.now, jid)
    Events.publish('track', jid)
    return 1
  end
  if verb == 'untrack' then
    local removed = redis.call('zrem', Keys.tracked(), jid)
    if removed == 1 then Events.publish('untrack', jid) end
    return removed
  end
  Arg.fail(cmd, 'Arg "verb" must be "track" or "untrack": ' .. Arg.shown(verb))
end

api['log'] = function(args)
  local cmd = 'Log'
  local jid = Arg.jid(cmd, 'jid', args[1])
  local message = Arg.text(cmd, 'message', args[2], Arg.MAX_ID_BYTES * 16)
  local given, extra
  if args[3] ~= nil then
    given, extra = Arg.json(cmd, 'data', args[3], 'object', nil, Arg.MAX_NESTING)
  end
  if not Job.exists(jid) then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
  Job.append_history(jid, Job.history_entry(message, extra, given))
  return nil
end
