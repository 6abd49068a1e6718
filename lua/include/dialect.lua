-- dialect: where the qless dialect's rules differ from ours, each rule a function named for it.
--
-- The qless dialect (a call of the qless bundle: `Engine.qless`, set by the dispatch) is mostly a
-- translation at the edges: replies in include/qless.lua (and `Qless.COMMANDS`, the reads qless
-- answers from other data), events in include/events.lua. What is left is here: a rule of
-- qless-core that a shared command path keeps in that dialect because qless's clients depend on
-- it (what they may send, what they are allowed to do, what the engine writes). Each function
-- is true in the qless dialect; a command path reads the rule by its name, so this file is the
-- whole list of differences (lua/README.md says why each exists; docs/pages/engine.md shows
-- them to users). A rule costs a function call and a table read: the native paths do nothing
-- more.
-- @include engine
local Dialect = {}

-- Arguments qless takes and ours refuse: a job's payload may be a JSON array, a number among
-- tags is taken as its text, a negative delay is none, a put may name no worker ('': qless
-- clients' `job.move()`).
function Dialect.lenient_arguments() return Engine.qless end

-- `config.set` takes negative numbers (a negative jobs-history drops completed jobs at once).
function Dialect.negative_settings() return Engine.qless end

-- `fail` fails only a running job, and only by the worker it was given to (ours: any job; a
-- running one only while its worker holds a valid lock).
function Dialect.fail_by_given_worker() return Engine.qless end

-- A worker holds the job it was given until the job is given to another or timed out: its
-- lock never expires for it by the clock (heartbeat, complete, retry, fail still succeed), a job
-- `timeout` took has its expiry written as 0, and only that job reads `stalled`.
function Dialect.lock_held_until_taken() return Engine.qless end

-- A lost worker's job (its lock expired after the grace period) uses one of its retries, and
-- fails in failed-retries-<queue> when none are left; qless's own `pop` keeps this rule in both
-- dialects (`by_qless_pop`). Ours: include/reclaim.lua.
function Dialect.lost_lock_uses_retry(by_qless_pop)
  return by_qless_pop or Engine.qless
end

-- The fields of a `done` or `timed-out` history entry by `worker`: none as qless writes them
-- (ours name the worker).
function Dialect.entry_by(worker)
  if Engine.qless then return nil end
  return { worker = worker }
end

-- A lock's time-out is recorded in the job's history even with no grace period.
function Dialect.timeout_always_recorded() return Engine.qless end

-- `retry` records no history entry and no retry in the queue's statistics, but the failure it
-- was given.
function Dialect.retry_records_failure() return Engine.qless end

-- A failure as qless records it: its time in whole seconds, no worker in the entry once retries
-- ran out, and none in the failure when the engine wrote the message (include/failing.lua).
function Dialect.failure_as_qless() return Engine.qless end

-- A job keeps its failure over a re-put and an unfail, until it completes.
function Dialect.failure_kept_until_complete() return Engine.qless end

-- A delay given with dependencies counts from the put (or the complete that moved the job on),
-- not from the last dependency's completion (the job's `scheduled`, Queue.release_dependent).
function Dialect.delay_counts_from_put() return Engine.qless end

-- A re-put that names no dependencies keeps the job's (ours: a put states all of them).
function Dialect.reput_keeps_dependencies() return Engine.qless end

-- `queues` and `jobs scheduled` make due scheduled jobs waiting before they count or list them.
function Dialect.reads_promote_scheduled() return Engine.qless end

-- `tag get` reads a range to offset + count - 1 whatever count is (0 from 0: every job).
function Dialect.zero_count_reads_all() return Engine.qless end

-- Recurring jobs spawn as qless spawns them: the backlog counted from the first due spawn (one
-- child more when now falls on a spawn time), each child put at the time it was due, and a
-- change of interval moving the next spawn.
function Dialect.qless_recurring_spawns() return Engine.qless end

-- A recurring job is indexed under no tag (ours: `tag get` finds the template); one defined in
-- this dialect says so (`tagged` '0'), so that no later call unindexes what was never indexed.
function Dialect.recurring_untagged() return Engine.qless end

-- Error words: `qless`, the words qless's clients look for, in the qless dialect; else `ours`.
function Dialect.words(ours, qless_words)
  if Engine.qless then return qless_words end
  return ours
end
