-- fanout: a flow step whose foreach items are another step's output becomes one job per item
-- in the engine call that completes that step (ours).
--
-- At submit (flow.submit, include/runs.lua) the step is one *template* job, waiting for its
-- needs, whose spec has `fanout = {from = <producer jid>, output = <key>}` (the producer must
-- be one of its depends). Runs.write stores it on the template (field `fanout`, JSON
-- {from, output, run}) and lists the template on the producer (field `feeds`, a JSON list of
-- templates). When the producer completes (complete, complete.many; not when it is skipped or
-- moved on with `next`), for each template it feeds, in that same call and before the
-- producer's other dependents are settled:
--
--   * the output `result[output]` must be a list (a JSON array, or text holding one: a shell
--     step's outputs are text) of at most Fanout.MAX_ITEMS items; an empty JSON object counts
--     as an empty list (the server's JSON decoder cannot tell them apart);
--   * N >= 1 items: N jobs `<template>[0]` .. `<template>[N-1]` are put, each a copy of the
--     template (queue, klass, data, priority, retries, tags, delay, ttl, ttr, concurrency key
--     and limit, throttle, needs) waiting for the template's dependencies still open; every
--     dependent of the template waits for all N instead (its `needs` too); the run's job list
--     has the N jids where the template was; the template is deleted;
--   * no items: the template becomes an empty fan-out (include/triggers.lua): settled with
--     the producer's other dependents, it completes (result `[]`, history `fanout`) once its
--     other needs let it, as a foreach step with no items does, and its dependents are
--     settled as after any complete;
--   * anything else (not a list, too many items, an item job that exists already): the
--     template fails in group `fanout-invalid` with a message saying why; the producer still
--     completes.
-- Which of these happens is decided before the call writes anything (Fanout.plan), so a
-- refused complete changes nothing and a reader never sees a step half expanded.
-- An item finds its item by its index (the `[i]` of its jid) in the producer's output when it
-- starts (flows/flowfile/job_data.py), as step outputs are resolved.
-- run.retry (commands/run_admin.lua) expands a template failed this way again from the
-- producer's stored result.
-- An expansion leaves `fed:<template>` ({output, items}) on the producer: when the producer
-- completes again with the items waiting for it (run.rerun with its downstream jobs), they run
-- again, each its item of the new output, if it has as many items; otherwise they fail in
-- `fanout-invalid` saying so (the step is never expanded twice: Fanout.replan).
-- @include args
-- @include putting
-- @include failing
local Fanout = {}

-- Items of one fan-out: the same number as scheduler/engine/limits.py MAX_FANOUT_ITEMS.
Fanout.MAX_ITEMS = 10000
Fanout.GROUP = 'fanout-invalid'

local TEMPLATE_FIELDS = { 'queue', 'worker', 'failure', 'klass', 'data', 'priority', 'retries',
  'tags', 'delay', 'needs', 'ttl', 'ttr', 'ckey', 'climit', 'throttle', 'fanout' }

-- flow.submit's `fanout` of the job `p` (Put.parse_spec's result): {from, output}, `from` one
-- of its depends and of `earlier` (the jids of the run's earlier jobs). Raises INVALID.
function Fanout.parse_spec(cmd, spec, p, earlier)
  if type(spec) ~= 'table' then Arg.fail(cmd, 'fanout must be an object {from, output}') end
  local from = Arg.jid(cmd, 'fanout.from', type(spec.from) == 'string' and spec.from or '')
  local output = Arg.id(cmd, 'fanout.output', type(spec.output) == 'string' and spec.output or '')
  local needed = false
  for _, dependency in ipairs(p.depends) do
    if dependency == from then needed = true end
  end
  if not needed or not earlier[from] then
    Arg.fail(cmd, 'fanout.from ' .. from .. ' must be an earlier job of the run that the job ' ..
      'depends on')
  end
  return { from = from, output = output }
end

-- After Runs.write put the template `p`: its spec on it, and it in its producer's `feeds`.
function Fanout.write_spec(p, run_id)
  local spec = p.fanout
  redis.call('hset', Keys.job(p.jid), 'fanout',
    cjson.encode({ from = spec.from, output = spec.output, run = run_id }))
  local key = Keys.job(spec.from)
  local feeds = Job.decode_list(redis.call('hget', key, 'feeds'))
  table.insert(feeds, p.jid)
  redis.call('hset', key, 'feeds', cjson.encode(feeds))
end

-- How many items `value` (an output) holds, or nil and why not.
local function count_items(value, output)
  if type(value) == 'string' then
    local ok, decoded = pcall(cjson.decode, value)
    if not ok or type(decoded) ~= 'table' then
      return nil, 'output "' .. output .. '" is text that is not a JSON array: ' ..
        string.format('%q', string.sub(value, 1, 60))
    end
    value = decoded
  end
  if value == nil or value == cjson.null then
    return nil, 'the producer has no output "' .. output .. '"'
  end
  if type(value) ~= 'table' then
    return nil, 'output "' .. output .. '" is a ' .. type(value) .. ', not a list'
  end
  local count = 0
  for _ in pairs(value) do count = count + 1 end
  if count ~= #value then
    return nil, 'output "' .. output .. '" is an object, not a list'
  end
  if count > Fanout.MAX_ITEMS then
    return nil, 'output "' .. output .. '" has ' .. count .. ' items, more than the limit of ' ..
      Fanout.MAX_ITEMS
  end
  return count
end

-- What completing a producer whose result is `result` (JSON text, or nil) does to the template
-- `jid`: nil (nothing: it is gone, or no longer waiting), or {jid, fields, spec, items = N} or
-- {jid, fields, spec, invalid = why}. Reads only. `retrying`: the template failed (run.retry).
function Fanout.plan(jid, result, retrying)
  local fields = Job.fields(jid, unpack(TEMPLATE_FIELDS))
  if not fields or not fields.fanout then return nil end
  if fields.state ~= (retrying and 'failed' or 'depends') then return nil end
  local spec = cjson.decode(fields.fanout)
  local plan = { jid = jid, fields = fields, spec = spec }
  local decoded
  if result then
    local ok, value = pcall(cjson.decode, result)
    if ok then decoded = value end
  end
  if type(decoded) ~= 'table' then
    plan.invalid = 'the producer ' .. spec.from .. ' completed without outputs (an object)'
    return plan
  end
  local count, why = count_items(decoded[spec.output], spec.output)
  if not count then
    plan.invalid = why
    return plan
  end
  plan.items = count
  return plan
end

-- Why the items the producer `from` made of the template `jid` (its `fed:<jid>`) cannot run
-- with its output now (`result`: JSON text, or nil): another number of items, or no list; nil
-- when they can (or it never expanded it). Reads only.
function Fanout.mismatch(jid, from, result)
  local fed = redis.call('hget', Keys.job(from), 'fed:' .. jid)
  if not fed then return nil end
  fed = cjson.decode(fed)
  local ok, decoded = false, nil
  if result then ok, decoded = pcall(cjson.decode, result) end
  if not ok or type(decoded) ~= 'table' then
    return 'the producer ' .. from .. ' completed without outputs (an object)'
  end
  local count, why = count_items(decoded[fed.output], fed.output)
  if count == fed.items then return nil end
  if not count then return why end
  return 'output "' .. fed.output .. '" has ' .. count .. ' items now, but the step was ' ..
    'expanded into ' .. fed.items .. ' when ' .. from .. ' first completed; a re-run runs ' ..
    'the same items: start a new run for another list'
end

-- A template the producer `from` expanded before, whose items wait for it again (it was re-run
-- with them: `flows rerun --downstream`): its items are the ones first made, each reading its
-- item of the new output by its index, so an output of another length (or no list) fails
-- those items instead of leaving items out or running some past its end. nil when nothing is
-- to be done: the same number of items, or none of them waits for the producer. Reads only.
function Fanout.replan(jid, from, result)
  local fed = redis.call('hget', Keys.job(from), 'fed:' .. jid)
  if not fed then return nil end
  local waiting = {}
  for i = 0, cjson.decode(fed).items - 1 do
    local item = jid .. '[' .. i .. ']'
    local fields = Job.fields(item, unpack(TEMPLATE_FIELDS))
    if fields and fields.state == 'depends' and
        redis.call('sismember', Keys.dependencies(item), from) == 1 then
      waiting[#waiting + 1] = { jid = item, fields = fields }
    end
  end
  if #waiting == 0 then return nil end
  local why = Fanout.mismatch(jid, from, result)
  if not why then return nil end
  return { jid = jid, spec = { from = from }, invalid = why, items_waiting = waiting }
end

-- Why run.retry cannot put back an item (`fields`: its hash's) that failed in this group
-- because its producer's output no longer fits the expansion (the failure's text, naming the
-- producer); nil when it can (another failure, or the output fits now). Reads only.
function Fanout.refail_reason(jid, fields)
  local failure = fields.failure and cjson.decode(fields.failure)
  if type(failure) ~= 'table' or failure.group ~= Fanout.GROUP then return nil end
  local template = string.match(jid, '^(.+)%[%d+%]$')
  if not template then return nil end
  for _, need in ipairs(Job.decode_list(fields.needs)) do
    if redis.call('hexists', Keys.job(need), 'fed:' .. template) == 1 then
      local why = Fanout.mismatch(template, need, redis.call('hget', Keys.job(need), 'result') or nil)
      if not why then return nil end
      return 'foreach.items from ' .. need .. ': ' .. why
    end
  end
  return nil
end

-- Why run.retry cannot put back the template `jid` (`fields`: its hash's) that failed in this
-- group: its producer's stored output is still refused (the failure's text); nil when it can
-- be expanded now, or is no such template. Reads only.
function Fanout.template_reason(jid, fields)
  if not fields.fanout or fields.state ~= 'failed' then return nil end
  local from = cjson.decode(fields.fanout).from
  local plan = Fanout.plan(jid, redis.call('hget', Keys.job(from), 'result') or nil, true)
  if not plan or not plan.invalid then return nil end
  return 'foreach.items from ' .. from .. ': ' .. plan.invalid
end

-- The item `jid` fails again with `why` (Fanout.refail_reason's): its failure says it now.
function Fanout.refail_item(jid, fields, why)
  Job.fail(jid, fields, 'flows', Fanout.GROUP, why)
end

-- The plans of every template `feeds` (JSON text: the producer's field) lists; `from`, the
-- producer's jid, also checks templates it expanded before (Fanout.replan).
function Fanout.plans(feeds, result, from)
  local plans = {}
  for _, jid in ipairs(Job.decode_list(feeds)) do
    local plan = Fanout.plan(jid, result, false)
    if not plan and from and not Job.exists(jid) then plan = Fanout.replan(jid, from, result) end
    if plan then table.insert(plans, plan) end
  end
  return plans
end

local function fail(plan, message)
  local text = 'foreach.items from ' .. plan.spec.from .. ': ' .. message
  if plan.items_waiting then
    for _, item in ipairs(plan.items_waiting) do
      Job.fail(item.jid, item.fields, 'flows', Fanout.GROUP, text)
    end
    return
  end
  Job.fail(plan.jid, plan.fields, 'flows', Fanout.GROUP, text)
end

-- No items: the template becomes an empty fan-out (field `empty`, include/triggers.lua), as a
-- foreach step with no items is put: the producer's complete then settles it as any of its
-- dependents, so it completes with the empty list when nothing else holds it back (its other
-- needs, by its trigger rule), and its dependents go on. A template failed before (run.retry)
-- completes at once.
local function complete_empty(plan)
  local jid, fields = plan.jid, plan.fields
  if fields.state == 'depends' then
    redis.call('hset', Keys.job(jid), 'empty', 1)
    return
  end
  Job.unindex(jid, fields)
  Job.drop_dependencies(jid)
  redis.call('hdel', Keys.job(jid), 'failure')
  Deps.complete_empty(jid, fields.queue)
  Deps.settle(jid, 'complete')
  redis.call('del', Keys.dependents(jid))
end

-- A JSON list of jids (`needs`) with `jid` replaced by `jids`.
local function replaced(needs, jid, jids)
  local out = {}
  for _, need in ipairs(Job.decode_list(needs)) do
    if need == jid then
      for _, item in ipairs(jids) do out[#out + 1] = item end
    else
      out[#out + 1] = need
    end
  end
  return #out == 0 and '[]' or cjson.encode(out)
end

-- The run's job list with `jid` replaced by `jids` (in place: the list keeps dependency order).
local function replace_in_run(run_id, jid, jids)
  local key = Keys.run_jobs(run_id)
  local before = redis.call('lrange', key, 0, -1)
  local after, found = {}, false
  for _, one in ipairs(before) do
    if one == jid then
      found = true
      for _, item in ipairs(jids) do after[#after + 1] = item end
    else
      after[#after + 1] = one
    end
  end
  if not found then return false end
  redis.call('del', key)
  Engine.call_many('rpush', key, after)
  redis.call('hincrby', Keys.run(run_id), 'jobs', #jids - 1)
  return true
end

-- The item puts of `plan`: copies of the template, each waiting for the template's needs but
-- the producer (complete, or about to be); Put.write leaves out the needs that completed.
local function item_puts(plan)
  local jid, fields, spec = plan.jid, plan.fields, plan.spec
  local open = {}
  local needs = fields.needs and Job.decode_list(fields.needs) or
    redis.call('smembers', Keys.dependencies(jid))
  for _, dependency in ipairs(needs) do
    if dependency ~= spec.from then open[#open + 1] = dependency end
  end
  local tags = Job.decode_list(fields.tags)
  local puts = {}
  for i = 1, plan.items do
    puts[i] = {
      worker = 'flows', queue = fields.queue, jid = jid .. '[' .. (i - 1) .. ']',
      klass = fields.klass, data = fields.data, delay = tonumber(fields.delay) or 0,
      priority = tonumber(fields.priority) or 0, retries = tonumber(fields.retries) or 0,
      tags = tags, depends = open, ttl = tonumber(fields.ttl), ttr = tonumber(fields.ttr),
      ckey = fields.ckey, climit = tonumber(fields.climit) or 1, throttle = fields.throttle,
      unique = false,
    }
  end
  return puts
end

-- Expand the template into its items (plan.items >= 1).
local function expand(plan, puts)
  local jid, fields = plan.jid, plan.fields
  local jids = {}
  for i, p in ipairs(puts) do jids[i] = p.jid end
  -- The items take the template's place in its run's list and join its counts, each counted
  -- and given the template's full needs in its one write.
  local run_id = replace_in_run(plan.spec.run, jid, jids) and plan.spec.run or nil
  local batch = Put.batch(true) -- the `fanout` event tells of the items
  for _, p in ipairs(puts) do
    p.count_in, p.needs = run_id, fields.needs
    Put.write(p, nil, batch)
    if run_id then RunCounts.join(p.jid, run_id, nil, p.counted) end
  end
  Put.finish(batch)
  -- Fan-in: whoever waited for the template waits for every item.
  local dependents = redis.call('smembers', Keys.dependents(jid))
  for _, dependent in ipairs(dependents) do
    local key = Keys.dependencies(dependent)
    redis.call('srem', key, jid)
    Engine.call_many('sadd', key, jids)
    local needs = redis.call('hget', Keys.job(dependent), 'needs')
    if needs then redis.call('hset', Keys.job(dependent), 'needs', replaced(needs, jid, jids)) end
  end
  if #dependents > 0 then
    for _, item in ipairs(jids) do Engine.call_many('sadd', Keys.dependents(item), dependents) end
  end
  if run_id then RunCounts.leave(jid) end
  redis.call('del', Keys.dependents(jid))
  Job.delete(jid, fields)
  -- What a later complete of the producer checks its items against (Fanout.replan).
  redis.call('hset', Keys.job(plan.spec.from), 'fed:' .. jid,
    cjson.encode({ output = plan.spec.output, items = #jids }))
  Events.log({ jid = jid, event = 'fanout', items = #jids, run = plan.spec.run })
end

-- Carry out `plan` (Fanout.plan's): expand, complete empty, or fail the template.
function Fanout.apply(plan)
  if plan.invalid then return fail(plan, plan.invalid) end
  if plan.items == 0 then return complete_empty(plan) end
  local puts = item_puts(plan)
  if Put.any_exist(puts) then
    for _, p in ipairs(puts) do
      if Job.exists(p.jid) then return fail(plan, 'job ' .. p.jid .. ' exists already') end
    end
  end
  expand(plan, puts)
end
