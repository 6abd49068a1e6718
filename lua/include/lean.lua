-- lean: a job as pop.lean replies it (commands/pop.lua), the text our worker reads: also what a
-- put pushes to an idle worker's inbox when it hands its job straight over (include/handoff.lua).
-- JSON text spliced together (include/json_text.lua): about half the cost of encoding a table
-- per job.
-- @include engine
-- @include job
-- @include json_text
local Lean = {}

-- The state a job just handed out is reported in (Job.describe_json's rule: a lock of 0 seconds is
-- stalled at once).
local function running_state(expires)
  return expires > Engine.now and 'running' or 'stalled'
end

-- The text of job `jid` handed out until `expires`, from `f`: the job's fields as pop.lean reads
-- them (commands/pop.lua, CANDIDATE_LEAN: 3 ttr, 4 concurrency key, 6 throttle, 9 on klass,
-- data, priority, tags, retries, remaining, lost). `c` holds what every job of one reply
-- shares: queue and worker, and the text made of them and of the expiry, filled in here.
-- `runs`: the times the job started running, this run included (its step log's attempt).
function Lean.job(c, jid, f, expires, runs)
  if not c.shared then
    c.shared = ',"queue":' .. JsonText.string(c.queue) .. ',"worker":' ..
      JsonText.string(c.worker) .. ',"popped":' .. cjson.encode(Engine.now)
  end
  if expires ~= c.expires then
    c.expires = expires
    c.expires_text = ',"expires":' .. cjson.encode(expires) .. ',"state":"' ..
      running_state(expires) .. '"'
  end
  local tags = f[12]
  if tags ~= '{}' then tags = cjson.encode(Job.decode_list(tags)) end
  local optional, ttr = '', tonumber(f[3])
  if ttr then optional = ',"ttr":' .. cjson.encode(ttr) end
  if f[6] then optional = optional .. ',"throttle":' .. JsonText.string(f[6]) end
  if f[4] then optional = optional .. ',"concurrency_key":' .. JsonText.string(f[4]) end
  if f[15] then optional = optional .. ',"lost":' .. JsonText.integer(f[15]) end
  if runs then optional = optional .. ',"runs":' .. JsonText.integer(runs) end
  return '{"jid":' .. JsonText.string(jid) .. ',"klass":' .. JsonText.string(f[9] or '') ..
    c.shared .. c.expires_text .. ',"data":' .. cjson.encode(f[10] or '{}') ..
    ',"priority":' .. JsonText.integer(f[11]) .. ',"tags":' .. tags ..
    ',"retries":' .. JsonText.integer(f[13]) .. ',"remaining":' .. JsonText.integer(f[14]) ..
    optional .. '}'
end
