-- put, requeue: create a job, or move an existing one (any state) into a queue.
--
--   put     worker, queue, jid, klass, data, delay,
--           ['priority', p], ['tags', JSON], ['retries', r], ['depends', JSON],
--           ['trigger', rule]                                                   -> jid
--   requeue the same arguments                                                  -> jid
--
-- A job put with pending dependencies waits in state depends; with a delay too, the delay starts
-- when its last dependency completes (our extension: qless refuses delay with depends). Moving a
-- running job revokes its worker's lock (the worker is told lock_lost unless it is the putter).
-- Priority: lower runs sooner. Options left out keep the existing job's values (retries
-- default 5, priority 0, tags []); dependencies are replaced by `depends` (none when left out).
-- `trigger` (ours) is the rule by which the dependencies' outcomes release the job:
-- all_success (default), all_done, one_failed, none_failed (include/triggers.lua).
-- Errors: INVALID (arguments), TOOLARGE (sizes), NOTFOUND (requeue of a job that does not exist).
-- @include putting
local function put(cmd, args, must_exist)
  local p = Put.parse(cmd, args)
  local old = Job.fields(p.jid, 'queue', 'worker', 'failure', 'tags', 'priority', 'retries')
  if must_exist and not old then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. p.jid .. ' does not exist')
  end
  return Put.write(p, old)
end

api['put'] = function(args) return put('Put', args, false) end
api['requeue'] = function(args) return put('Requeue', args, true) end
