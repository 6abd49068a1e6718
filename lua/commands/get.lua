-- get, multiget: read jobs.
--
--   get       jid      -> job JSON, or nil when there is no such job
--   multiget  jid...   -> JSON list of the jobs that exist
--
-- A running job whose lock has expired is reported in state 'stalled'.
-- Errors: INVALID.
-- @include args
-- @include job

api['get'] = function(args)
  -- The job's text (Job.describe_list says why).
  return Job.describe_json(Arg.jid('Get', 'jid', args[1]))
end

api['multiget'] = function(args)
  local jids = {}
  for i, jid in ipairs(args) do jids[i] = Arg.jid('Multiget', 'jid', jid) end
  return (Job.describe_list(jids))
end
