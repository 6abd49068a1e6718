-- put, requeue: create a job, or move an existing one (any state) into a queue.
--
--   put     worker, queue, jid, klass, data, delay,
--           ['priority', p], ['tags', JSON], ['retries', r], ['depends', JSON],
--           ['trigger', rule],
--           ['ttl', s], ['ttr', s], ['concurrency_key', k], ['concurrency_limit', n],
--           ['throttle', name], ['unique', 0|1]                 -> jid ('exists': see unique)
--   requeue the same arguments                                                  -> jid
--   put.many worker, queue, options, (jid, klass, data, delay)...        -> JSON list of jids
--
-- A job put with pending dependencies waits in state depends; with a delay too, the delay starts
-- when its last dependency completes (our extension: qless refuses delay with depends). Moving a
-- running job revokes its worker's lock (the worker is told lock_lost unless it is the putter).
-- Priority: lower runs sooner. Options left out keep the existing job's values (retries
-- default 5, priority 0, tags []); dependencies are replaced by `depends` (none when left out;
-- the qless dialect keeps them then, counts a delay with dependencies from the put, and keeps a
-- failure until the job completes).
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
-- put.many (ours) puts 1 to 1,000 jobs into one queue in one call, each exactly as `put worker
-- queue jid klass data delay` with the shared options would: a job that exists is moved, as put
-- moves it. `options` is '' or a JSON object of put options for every job: priority, tags (a
-- list), retries, ttl, ttr, concurrency_key, concurrency_limit, throttle (null: not given);
-- depends and trigger are refused (a job with dependencies is put alone, or in a flow), and so
-- is unique. Every job is checked before the first write; an error names the job, as
-- `PutMany jobs[3](): Arg "data" ...` (the third job), and a jid given twice is refused. The
-- reply lists the jids in the order given. Statistics, the queue's registration and the hand-off
-- to idle workers happen once per call.
-- A put over an existing job drops its step logs (its attempts count from 1 again); a requeue
-- keeps them (commands/log.lua).
-- Errors: INVALID (arguments), TOOLARGE (sizes), NOTFOUND (requeue of a job that does not exist).
-- @include putting

-- The fields of the job being put over that Put.write needs, or nil for a new job. Most puts are
-- of new jobs, and whether the key exists tells (Job.fields reads the rest only for a job that
-- exists, and gives nil for a hash that holds no job: neither a state nor a klass).
local function existing(jid)
  if redis.call('exists', Keys.job(jid)) == 0 then return nil end
  return Job.fields(jid, 'queue', 'worker', 'failure', 'tags', 'priority', 'retries')
end

local function put(cmd, args, must_exist)
  local p = Put.parse(cmd, args)
  local old = existing(p.jid)
  if must_exist and not old then
    Err.raise('NOTFOUND', cmd .. '(): Job ' .. p.jid .. ' does not exist')
  end
  if Put.exists(p, old) then return 'exists' end
  -- The call's only job: it may go straight to an idle worker (Put.write). A call writing
  -- several (run.retry) leaves them to the hand-off's pops, which take the best first.
  p.alone = true
  -- A requeue moves the job on with its life: its step logs stay, the next start numbered after
  -- them; a put over it starts afresh.
  p.keep_logs = must_exist
  return Put.write(p, old)
end

api['put'] = function(args) return put('Put', args, false) end
api['requeue'] = function(args) return put('Requeue', args, true) end

-- Jobs one put.many call takes at most (the Python client sends larger lists in chunks).
local MAX_MANY = 1000
-- Arguments per job of put.many: jid, klass, data, delay.
local PER_JOB = 4

local function shared_options(cmd, value)
  if value == nil or value == '' then return { climit = 1, unique = false } end
  local _, options = Arg.json(cmd, 'options', value, 'object')
  return Put.parse_shared(cmd, options)
end

api['put.many'] = function(args)
  local cmd = 'PutMany'
  local worker = Arg.id(cmd, 'worker', args[1])
  local queue = Arg.name(cmd, 'queue', args[2])
  local shared = shared_options(cmd, args[3])
  local values = #args - 3
  if values <= 0 or values % PER_JOB ~= 0 then
    Arg.fail(cmd, 'jobs come as (jid, klass, data, delay) groups after the options, at least one')
  end
  local count = values / PER_JOB
  if count > MAX_MANY then
    Err.raise('TOOLARGE', cmd .. '(): ' .. count .. ' jobs, more than the limit of ' .. MAX_MANY)
  end
  local puts = {}
  Arg.each(cmd, 'jobs', count, function(named, i)
    local at = 3 + (i - 1) * PER_JOB
    puts[i] = Put.parse_one(named, worker, queue, shared, args[at + 1], args[at + 2],
      args[at + 3], args[at + 4])
  end)
  local seen = {}
  for i, p in ipairs(puts) do
    if seen[p.jid] then
      Arg.fail(cmd, 'job ' .. p.jid .. ' appears twice (jobs[' .. seen[p.jid] .. '] and jobs[' ..
        i .. '])')
    end
    seen[p.jid] = i
  end
  -- Each job read just before it is written (a put of its own would read it then too).
  local some_exist = Put.any_exist(puts)
  local batch = Put.batch()
  local jids = {}
  for i, p in ipairs(puts) do
    jids[i] = Put.write(p, some_exist and existing(p.jid) or nil, batch)
  end
  Put.finish(batch)
  return cjson.encode(jids)
end
