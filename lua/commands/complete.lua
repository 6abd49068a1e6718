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
-- `result` (our extension) is JSON text stored on the job as its result (a flow step's outputs).
-- The call succeeds once per pop: a second complete, or one from a worker whose lock expired or
-- was taken away, is refused.
-- complete.many (ours) completes a batch of the worker's jobs in one call, each as `complete jid
-- worker queue '' ['result', result]` (result '' for none): what one job is refused changes
-- nothing of it and nothing of the others. The worker's activity and the retention sweep are
-- done once per batch. At most 1,000 jobs.
-- Errors: INVALID, TOOLARGE, NOTFOUND, WRONGSTATE (not running, or running in another queue),
-- LOCKLOST (another worker holds it, or the lock expired); complete.many raises only INVALID
-- and TOOLARGE for the call itself (its jobs' errors are in its reply).
-- @include args
-- @include job
-- @include queue
-- @include triggers
-- @include lock
local COMPLETE_OPTIONS = { next = true, delay = true, depends = true, result = true }

-- What complete reads of the job (nil when there is none): its lock (Lock.check_fields), what
-- releasing it needs (Lock.release) and when it was popped (its run-time sample); `next` reads
-- more (advance). Built by one constructor: filling a table field by field from the reply, as
-- Job.fields does, costs as much as the read itself.
local function job_fields(jid)
  local v = redis.call('hmget', Keys.job(jid), 'state', 'queue', 'worker', 'expires', 'grace',
    'popped', 'ttl_at', 'ckey', 'climit', 'throttle')
  if not v[1] then return nil end
  return { state = v[1], queue = v[2] or nil, worker = v[3] or nil, expires = v[4] or nil,
    grace = v[5] or nil, popped = v[6] or nil, ttl_at = v[7] or nil, ckey = v[8] or nil,
    climit = v[9] or nil, throttle = v[10] or nil }
end

-- The checked arguments: jid, worker, queue, data (nil: keep the job's), next, delay, depends,
-- result.
local function parse(cmd, args)
  local jid = Arg.jid(cmd, 'jid', args[1])
  local worker = Arg.id(cmd, 'worker', args[2])
  local queue = Arg.id(cmd, 'queue', args[3])
  local data
  if args[4] ~= '' then data = Arg.json(cmd, 'data', args[4], 'object') end
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
  if options.result then c.result = Arg.json(cmd, 'result', options.result, 'any') end
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
    local state = redis.call('hget', Keys.job(dependency), 'state')
    if state and state ~= 'complete' then
      redis.call('sadd', Keys.dependencies(jid), dependency)
      redis.call('sadd', Keys.dependents(dependency), jid)
      pending = pending + 1
    end
  end
  if pending > 0 then
    redis.call('zadd', Keys.depends(next_queue), Engine.now, jid)
    redis.call('hset', key, 'state', 'depends')
    return 'depends'
  end
  return Queue.release(next_queue, jid, tonumber(fields.priority) or 0, delay)
end

-- Every setting complete needs, in one read: max-job-history, jobs-history, jobs-history-count.
local function settings()
  return { Config.values('max-job-history', 'jobs-history', 'jobs-history-count') }
end

-- One complete. `batch` (complete.many): the settings, read once, and the worker's activity
-- and the retention sweep are the batch's to do once.
local function complete(cmd, args, batch)
  local c = parse(cmd, args)
  local jid, worker, queue = c.jid, c.worker, c.queue
  local fields = Lock.check_fields(cmd, jid, worker, queue, job_fields(jid))
  local config = batch or settings()
  local history_limit, max_age, max_count = config[1], config[2], config[3]

  local key = Keys.job(jid)
  Lock.release(jid, queue, worker, fields)
  Stats.sample(queue, 'run', Engine.now - (tonumber(fields.popped) or Engine.now))
  Job.history(jid, 'done', { worker = worker }, tonumber(history_limit))
  -- The job's hash in one write (its state too, unless it moves on).
  local written = { 'worker', '', 'expires', 0, 'updated', Engine.now }
  if c.data then table.insert(written, 'data'); table.insert(written, c.data) end
  if c.result then table.insert(written, 'result'); table.insert(written, c.result) end
  if not c.next then table.insert(written, 'state'); table.insert(written, 'complete') end
  redis.call('hset', key, unpack(written))
  if fields.grace then redis.call('hdel', key, 'grace') end
  if not batch then redis.call('zadd', Keys.workers(), Engine.now, worker) end
  Events.tracked('completed', jid)
  if c.next then return advance(c) end

  Events.log({ jid = jid, event = 'completed', queue = queue })
  redis.call('zadd', Keys.completed(), Engine.now, jid)
  -- Most jobs have no dependents: one look saves settling none and deleting nothing.
  if redis.call('exists', Keys.dependents(jid)) == 1 then
    Deps.settle(jid, 'complete')
    redis.call('del', Keys.dependents(jid))
  end
  if not batch then Job.expire_completed(100, max_age, max_count) end
  return 'complete'
end

api['complete'] = function(args) return complete('Complete', args, nil) end

local MAX_MANY = 1000

-- The text of an error raised by complete(): an engine error's reply, else an engine bug.
local function error_text(raised)
  if type(raised) == 'table' and raised.flows_error then return raised.flows_error end
  if type(raised) == 'table' and raised.err then return 'INTERNAL ' .. tostring(raised.err) end
  return 'INTERNAL ' .. tostring(raised)
end

api['complete.many'] = function(args)
  local cmd = 'CompleteMany'
  local worker = Arg.id(cmd, 'worker', args[1])
  local given = #args - 1
  if given == 0 or given % 3 ~= 0 then
    Arg.fail(cmd, 'give the jobs as (jid, queue, result) triples, at least one')
  end
  if given / 3 > MAX_MANY then
    Err.raise('TOOLARGE', cmd .. '(): ' .. given / 3 .. ' jobs, more than the limit of ' .. MAX_MANY)
  end
  local batch = settings()
  local replies = {}
  for i = 2, #args, 3 do
    local one = { args[i], worker, args[i + 1], '' }
    if args[i + 2] ~= '' then one[5], one[6] = 'result', args[i + 2] end
    -- Each complete checks everything before it writes: a refused one wrote nothing.
    local ok, reply = pcall(complete, 'Complete', one, batch)
    replies[#replies + 1] = ok and reply or error_text(reply)
  end
  redis.call('zadd', Keys.workers(), Engine.now, worker)
  Job.expire_completed(math.max(100, #replies), batch[2], batch[3])
  return cjson.encode(replies)
end
