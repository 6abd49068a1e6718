-- complete, complete.many: the worker holding a job finishes it.
--
--   complete jid, worker, queue, data, ['next', q], ['delay', d], ['depends', JSON],
--            ['result', JSON]                     -> 'complete', 'waiting', 'scheduled' or 'depends'
--   complete.many worker, (jid, queue, result)... -> JSON list, per job in order: 'complete', or
--                                                    the error its complete raised ('CODE ...')
--
-- `data` (a JSON object) becomes the job's data; '' (ours) keeps the data the job has, so a
-- worker need not send the payload back.
-- Without `next` the job is complete: kept by jobs-history (age) and jobs-history-count, and every
-- dependent whose last dependency this was is released in this same call. With `next` it moves
-- to that queue (waiting, scheduled after `delay`, or waiting for `depends`), retries reset.
-- `result` (our extension) is JSON text stored on the job as its result (a flow step's outputs),
-- at most Arg.MAX_RESULT_NESTING levels deep (data: Arg.MAX_NESTING).
-- A job that feeds fan-outs (include/fanout.lua) expands them in this same call, before its
-- dependents are settled.
-- `skipped` (ours) is why the job chose not to run (a flow step whose `if:` is false): it ends
-- complete and skipped, as a trigger rule would skip it (history 'skipped' with `why`), and its
-- dependents are settled as after a skip in this same call. Not with `next`.
-- The call succeeds once per pop: a second complete, or one from a worker whose lock expired or
-- was taken away, is refused.
-- complete.many (ours) completes a batch of the worker's jobs in one call, each as `complete jid
-- worker queue '' ['result', result]` (result '' for none): what one job is refused changes
-- nothing of it and nothing of the others. The worker's activity and the retention sweep are
-- done once per batch, and so are the writes its jobs share (each queue's locks and run-time
-- statistics, the worker's jobs, the completed set). At most 1,000 jobs.
-- complete.pop (ours) is complete.many followed by `pop.lean queue worker count` in the same
-- call, replying both: what a worker sends when it has free slots. A job its completes release
-- into `queue` is popped at once, with no second call: the pop is the ordinary one (its rules,
-- its order), so it hands out exactly what a pop right after the completes would.
--   complete.pop  worker, queue, count, (jid, queue, result)...
--                                               -> [complete.many's reply, pop.lean's reply]
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE (not running, or running in another queue),
-- LOCKLOST (another worker holds it, or the lock expired); complete.many and complete.pop raise
-- only INVALID and TOOLARGE for the call itself (its jobs' errors are in its reply).
-- @include args
-- @include job
-- @include queue
-- @include triggers
-- @include lock
-- @include fanout
-- @include notify
-- @include dialect
local COMPLETE_OPTIONS = { next = true, delay = true, depends = true, result = true, skipped = true }

-- What complete reads of the job (nil when there is none): its lock (Lock.check_fields), what
-- releasing it needs (Lock.release) and when it was popped (its run-time sample); `next` reads
-- more (advance). Built by one constructor: filling a table field by field from the reply, as
-- Job.fields does, costs as much as the read itself.
local function job_fields(jid)
  local v = Job.hmget(jid, 'state', 'queue', 'worker', 'expires', 'grace',
    'popped', 'ttl_at', 'ckey', 'climit', 'throttle', 'feeds', 'notify', 'notify_run', 'cclaim',
    'counted', 'skipped', 'child', 'cached', 'runs', 'wait_since', 'deadline_missed')
  if not v[1] then return nil end
  return { state = v[1], queue = v[2] or nil, worker = v[3] or nil, expires = v[4] or nil,
    grace = v[5] or nil, popped = v[6] or nil, ttl_at = v[7] or nil, ckey = v[8] or nil,
    climit = v[9] or nil, throttle = v[10] or nil, feeds = v[11] or nil, notify = v[12] or nil,
    notify_run = v[13] or nil, cclaim = v[14] or nil, counted = v[15] or nil, skipped = v[16],
    child = v[17], cached = v[18], runs = v[19], wait_since = v[20], deadline_missed = v[21] }
end

-- The move of a job that completes (not one that moves on to another queue) in its run's
-- counts (RunCounts.moving), its `counted` written with the rest; nil: read back.
local function counted_move(jid, c, fields)
  if c.next then return nil end
  local skipped = c.skipped or fields.skipped
  return RunCounts.moving(jid, fields.counted,
    RunCounts.class('complete', skipped, fields.child, fields.cached)), skipped
end

-- A cached step's job that ran (cache.use missed: `claim` is '<key> <ttl>') completed with a
-- result: it becomes its key's entry, standing for this completion (Job.cache_entry), unless
-- the entry names another job whose result is fresh for this job's ttl (Job.cache_status, as
-- cache.use would hit it): the first of two racing jobs to complete with success is the entry,
-- whichever claimed last, and a job that fails leaves the entry as it is; an older result, or
-- an entry that stands for none (its job put again, deleted), gives way to this one. The entry
-- naming this job (its claim) now records the completion. An entry no longer in Redis
-- (cleared, or its ttl plus a day passed) is not made again: `cache clear` forgets the jobs
-- still running too.
local function cache_claimed(jid, claim)
  local key, ttl = string.match(claim, '^(%S+) (%S+)$')
  if not key then return end
  local entry = redis.call('hmget', Keys.cache(key), 'jid', 'completed')
  local holder = entry[1]
  if not holder then return end
  if holder ~= jid and Job.cache_status(Job.fields(holder, 'updated', 'skipped'), entry[2] or nil,
      tonumber(ttl)) == 'fresh' then
    return
  end
  Job.cache_entry(jid, key, ttl, true)
end

-- The checked arguments: jid, worker, queue, data (nil: keep the job's), next, delay, depends,
-- result.
local function parse(cmd, args)
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local queue = Arg.id(cmd, 'queue', args[3])
  local data
  if args[4] ~= '' then data = Arg.json(cmd, 'data', args[4], 'payload') end
  local c = { jid = jid, worker = worker, queue = queue, data = data }
  if #args < 5 then return c end
  local options = Arg.options(cmd, args, 5, COMPLETE_OPTIONS)
  if options.next then c.next = Arg.id(cmd, 'next', options.next) end
  if options.delay then c.delay = Arg.number(cmd, 'delay', options.delay, 0) end
  if options.depends then
    c.depends = Arg.id_list(cmd, 'depends', options.depends, Arg.jid, Engine.MAX_COUNT)
    for _, dependency in ipairs(c.depends) do
      if dependency == jid then
        Arg.fail(cmd, 'Arg "depends": job ' .. jid .. ' cannot depend on itself')
      end
    end
  end
  if options.result then c.result = Arg.json(cmd, 'result', options.result, 'any', nil, Arg.MAX_RESULT_NESTING) end
  if options.skipped then
    if options.next then Arg.fail(cmd, '"skipped" and "next" exclude each other') end
    c.skipped = Arg.text(cmd, 'skipped', options.skipped)
  end
  if (c.delay or c.depends) and not c.next then
    Arg.fail(cmd, '"delay" and "depends" need "next" (the queue to move the job to)')
  end
  return c
end

-- With `next`: the job moves on to that queue, its retries reset. Returns its new state.
local function advance(c)
  local jid, key, next_queue, delay = c.jid, Keys.job(c.jid), c.next, c.delay
  local fields = Job.fields(jid, 'priority', 'retries')
  Events.log({ jid = jid, event = 'advanced', queue = c.queue, to = next_queue })
  redis.call('hset', key, 'queue', next_queue, 'remaining', fields.retries, 'delay', delay or 0)
  Queue.known(next_queue)
  Job.history(jid, 'put', { q = next_queue })
  local pending = 0
  for _, dependency in ipairs(c.depends or {}) do
    local state = Job.state(dependency)
    if state and state ~= 'complete' then
      redis.call('sadd', Keys.dependencies(jid), dependency)
      redis.call('sadd', Keys.dependents(dependency), jid)
      pending = pending + 1
    end
  end
  if pending > 0 then
    redis.call('zadd', Keys.depends(next_queue), Engine.now, jid)
    redis.call('hset', key, 'state', 'depends')
    if Dialect.rules.delay_counts_from_put and delay and delay > 0 then
      -- Counted from now (Queue.release_dependent).
      redis.call('hset', key, 'delay', 0, 'scheduled', string.format('%.17g', Engine.now + delay))
    end
    return 'depends'
  end
  return Queue.release(next_queue, jid, tonumber(fields.priority) or 0, delay)
end

-- Every setting complete needs, in one read: max-job-history, jobs-history, jobs-history-count.
local function settings()
  return { Config.values('max-job-history', 'jobs-history', 'jobs-history-count') }
end

-- The completes of one call: the settings, read once, and what its jobs share: the 'done'
-- history entry (the same text for each: one worker, one now), whether any is tracked or has
-- dependents (look), and, for complete.many (`many`), the writes to keys its jobs share,
-- gathered and made once (finish): each queue's locks and run-time samples, the worker's jobs,
-- the completed set. A lone complete makes them at once (fewer tables to build for one job).
local function new_batch(config, many)
  local b = { config = config, entry = nil, looked = false, quiet = false, many = many }
  if many then
    b.queues, b.locks, b.samples, b.released, b.completed = {}, {}, {}, {}, {}
  end
  return b
end

-- One look for the batch (the jobs `jids`) instead of two per job: `quiet` when the namespace
-- tracks no job and none of the jobs has dependents (the common case); else each job is looked
-- at as it completes.
local function look(b, jids)
  local keys = { Keys.tracked() }
  for _, jid in ipairs(jids) do
    -- (a jid too long to be valid is refused by its complete before anything is written)
    if #jid <= Arg.MAX_ID_BYTES then keys[#keys + 1] = Keys.dependents(jid) end
  end
  b.quiet = redis.call('exists', unpack(keys)) == 0
  b.looked = true
end

-- Job `jid` of `queue` (its `fields` as job_fields reads them) is no longer locked by `worker`:
-- out of the two indexes, with its run-time sample.
local function unlocked(b, jid, queue, worker, fields, seconds)
  if not b.many then
    Lock.release(jid, queue, worker, fields)
    return Stats.sample(queue, 'run', seconds)
  end
  Lock.released(jid, queue, fields)
  if not b.locks[queue] then
    table.insert(b.queues, queue)
    b.locks[queue], b.samples[queue] = {}, {}
  end
  table.insert(b.locks[queue], jid)
  table.insert(b.samples[queue], seconds)
  table.insert(b.released, jid)
end

-- One complete, in batch `b`. Every check comes before the first write, so a refused one wrote
-- nothing; the index writes it shares with the rest of the batch wait for finish().
local function complete(cmd, args, b)
  local c = parse(cmd, args)
  local jid, worker, queue = c.jid, c.worker, c.queue
  local fields = Lock.check_fields(cmd, jid, worker, queue, job_fields(jid))

  local key = Keys.job(jid)
  -- A producer of fan-outs (include/fanout.lua): what its output does to each, decided before
  -- the first write.
  local fanouts
  if fields.feeds and not c.next and not c.skipped then
    fanouts = Fanout.plans(fields.feeds, c.result or redis.call('hget', key, 'result') or nil,
      jid)
  end
  if not b.looked then look(b, { jid }) end
  unlocked(b, jid, queue, worker, fields, Engine.now - (tonumber(fields.popped) or Engine.now))
  -- qless's entry names no worker.
  if c.skipped then
    Job.history(jid, 'skipped', { worker = worker, why = c.skipped }, tonumber(b.config[1]))
  else
    b.entry = b.entry or Job.history_entry('done', Dialect.entry_by(worker))
    Job.append_history(jid, b.entry, tonumber(b.config[1]))
  end
  -- The job's hash in one write (its state too, unless it moves on).
  local written = { 'worker', '', 'expires', 0, 'updated', Engine.now }
  -- A failure the qless dialect kept over a re-put ends here, as in qless.
  if Dialect.rules.failure_kept_until_complete then
    table.insert(written, 'failure'); table.insert(written, '{}')
  end
  if c.data then table.insert(written, 'data'); table.insert(written, c.data) end
  if c.result then table.insert(written, 'result'); table.insert(written, c.result) end
  if not c.next then table.insert(written, 'state'); table.insert(written, 'complete') end
  if c.skipped then table.insert(written, 'skipped'); table.insert(written, 1) end
  local move, skipped = counted_move(jid, c, fields)
  if move and move.counted then
    table.insert(written, 'counted'); table.insert(written, move.counted)
  end
  redis.call('hset', key, unpack(written))
  -- (RunCounts.FIELDS: counted, state, skipped, child, cached, runs, popped, wait_since, updated,
  -- deadline_missed)
  RunCounts.moved(jid, move, { false, 'complete', skipped or false, fields.child, fields.cached,
    fields.runs, fields.popped or false, fields.wait_since, Engine.now, fields.deadline_missed })
  if fields.grace or fields.cclaim then redis.call('hdel', key, 'grace', 'cclaim') end
  if fields.cclaim and not c.skipped and not c.next then cache_claimed(jid, fields.cclaim) end
  if not b.quiet then Events.tracked('completed', jid) end
  if c.next then return advance(c) end

  Events.log({ jid = jid, event = c.skipped and 'skipped' or 'completed', queue = queue })
  if b.many then
    table.insert(b.completed, Engine.now)
    table.insert(b.completed, jid)
  else
    redis.call('zadd', Keys.completed(), Engine.now, jid)
  end
  if fanouts then
    for _, plan in ipairs(fanouts) do Fanout.apply(plan) end
  end
  -- Most jobs have no dependents: one look saves settling none and deleting nothing.
  if not b.quiet and redis.call('exists', Keys.dependents(jid)) == 1 then
    Deps.settle(jid, c.skipped and 'skipped' or 'complete')
    redis.call('del', Keys.dependents(jid))
  end
  if fields.notify then Notify.job(jid, c.skipped and 'skipped' or 'success', fields) end
  return 'complete'
end

-- The batch's gathered writes (see new_batch), the worker's activity, and the retention sweep
-- of up to `sweep` completed jobs (none when nil: a complete that moved its job on).
local function finish(b, worker, sweep)
  if b.many then
    for _, queue in ipairs(b.queues) do
      redis.call('zrem', Keys.locks(queue), unpack(b.locks[queue]))
      Stats.add(queue, 'run', b.samples[queue])
    end
    if #b.released > 0 then redis.call('zrem', Keys.worker_jobs(worker), unpack(b.released)) end
    if #b.completed > 0 then redis.call('zadd', Keys.completed(), unpack(b.completed)) end
  end
  redis.call('zadd', Keys.workers(), Engine.now, worker)
  if sweep then Job.expire_completed(sweep, b.config[2], b.config[3]) end
end

api['complete'] = function(args)
  local b = new_batch(settings(), false)
  local reply = complete('Complete', args, b)
  finish(b, args[2], reply == 'complete' and 100 or nil)
  return reply
end

local MAX_MANY = 1000

-- The text of an error raised by complete(): an engine error's reply, else an engine bug.
local function error_text(raised)
  if type(raised) == 'table' and raised.flows_error then return raised.flows_error end
  if type(raised) == 'table' and raised.err then return 'INTERNAL ' .. tostring(raised.err) end
  return 'INTERNAL ' .. tostring(raised)
end

-- complete.many's work, its errors named `cmd`.
local function complete_many(cmd, args)
  local worker = Arg.id(cmd, 'worker', args[1])
  local given = #args - 1
  if given == 0 or given % 3 ~= 0 then
    Arg.fail(cmd, 'give the jobs as (jid, queue, result) triples, at least one')
  end
  if given / 3 > MAX_MANY then
    Err.raise('TOOLARGE', cmd .. '(): ' .. given / 3 .. ' jobs, more than the limit of ' .. MAX_MANY)
  end
  local b = new_batch(settings(), true)
  local jids = {}
  for i = 2, #args, 3 do jids[#jids + 1] = args[i] end
  look(b, jids)
  local replies = {}
  for i = 2, #args, 3 do
    local one = { args[i], worker, args[i + 1], '' }
    if args[i + 2] ~= '' then one[5], one[6] = 'result', args[i + 2] end
    -- Each complete checks everything before it writes: a refused one wrote nothing.
    local ok, reply = pcall(complete, 'Complete', one, b)
    replies[#replies + 1] = ok and reply or error_text(reply)
  end
  finish(b, worker, math.max(100, #replies))
  return cjson.encode(replies)
end

api['complete.many'] = function(args) return complete_many('CompleteMany', args) end

api['complete.pop'] = function(args)
  local cmd = 'CompletePop'
  local worker = Arg.id(cmd, 'worker', args[1])
  -- The pop's arguments are checked before the completes write anything.
  local queue = Arg.id(cmd, 'queue', args[2])
  Arg.integer(cmd, 'count', args[3], 0, Engine.MAX_COUNT)
  local many = { worker }
  for i = 4, #args do many[i - 2] = args[i] end
  local done = complete_many(cmd, many)
  return { done, api['pop.lean']({ queue, worker, args[3] }) }
end
