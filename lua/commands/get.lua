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
  local jid = Arg.jid('Get', 'jid', args[1])
  local job = Job.describe(jid)
  if not job then return nil end
  return cjson.encode(job)
end

api['multiget'] = function(args)
  local jobs = {}
  for _, jid in ipairs(args) do
    local job = Job.describe(Arg.jid('Multiget', 'jid', jid))
    if job then table.insert(jobs, job) end
  end
  if #jobs == 0 then return '[]' end
  return cjson.encode(jobs)
end
