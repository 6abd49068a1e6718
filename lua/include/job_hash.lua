-- job_hash: the one rule for the state a job's hash leaves out. A job put waiting stores no
-- `state` (include/putting.lua, its hash then fits a smaller allocation): a hash with a `klass`
-- and no `state` is a waiting job; one with neither holds no job. Job.hmget and
-- RunCounts.fields read a job's state through it (job.lua includes run_counts.lua, so neither
-- can call the other's).
local JobHash = {}

-- The job's state from its hash's `state` and `klass` fields; false when it holds no job.
function JobHash.state(state, klass)
  if state then return state end
  if klass then return 'waiting' end
  return false
end
