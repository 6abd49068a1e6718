-- put, requeue: create a job, or move an existing one (any state) into a queue.
--
--   put     worker, queue, jid, klass, data, delay,
--           ['priority', p], ['tags', JSON], ['retries', r], ['depends', JSON],
--           ['trigger', rule],
--           ['ttl', s], ['ttr', s], ['concurrency_key', k], ['concurrency_limit', n],
--           ['throttle', name], ['unique', 0|1]                 -> jid ('exists': see unique)
--   requeue the same arguments                                                  -> jid
--
-- A job put with pending dependencies waits in state depends; with a delay too, the delay starts
-- when its last dependency completes (our extension: qless refuses delay with depends). Moving a
-- running job revokes its worker's lock (the worker is told lock_lost unless it is the putter).
-- Priority: lower runs sooner. Options left out keep the existing job's values (retries
-- default 5, priority 0, tags []); dependencies are replaced by `depends` (none when left out).
-- `trigger` (ours) is the rule by which the dependencies' outcomes release the job:
-- all_success (default), all_done, one_failed, none_failed (include/triggers.lua).
-- Ours, each an option a put without it clears:
--   ttl               seconds the job has to start once ready, else it expires (include/ttl.lua);
--   ttr               the job's lock time (time to run), instead of the queue's heartbeat;
--   concurrency_key   at most `concurrency_limit` (default 1) jobs of the key run at once in the
--                     queue, starting in priority then put order (include/slots.lua);
--   throttle          at most the throttle's limit (throttle.set) of its jobs run at once, over
--                     all queues (include/slots.lua);
--   unique            '1': if the job exists and is neither complete nor expired, nothing is
--                     changed and the reply is 'exists' (Redis Work Queue's unique adds). Without
--                     it a put keeps qless's meaning: the job is moved, whatever its state.
-- Errors: INVALID (arguments), TOOLARGE (sizes), NOTFOUND (requeue of a job that does not exist).
-- @include putting

-- The fields of the job being put over that Put.write needs, or nil for a new job. Most puts are
-- of new jobs, and one field tells (Job.fields reads the rest only for a job that exists).
local function existing(jid)
  if not redis.call('hget', Keys.job(jid), 'state') then return nil end
  return Job.fields(jid, 'queue', 'worker', 'failure', 'tags', 'priority', 'retries')
end

local function put(cmd, args, must_exist)
  local p = Put.parse(cmd, args)
  local old = existing(p.jid)
  if must_exist and not old then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. p.jid .. ' does not exist')
  end
  if Put.exists(p, old) then return 'exists' end
  return Put.write(p, old)
end

api['put'] = function(args) return put('Put', args, false) end
api['requeue'] = function(args) return put('Requeue', args, true) end
