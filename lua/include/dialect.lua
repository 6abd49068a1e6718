-- dialect: where the qless dialect's rules differ from ours, each rule named in one table.
--
-- The qless dialect (a call of the qless bundle, as the dispatch knows it) is mostly a
-- translation at the edges: replies in include/qless.lua (`Qless.COMMANDS`, the reads qless answers
-- from other data; `Qless.error`, its error words), events in include/events.lua (by the rule
-- `qless_events`). What is left is here: a rule of qless-core that a shared command path keeps in
-- that dialect because qless's clients depend on it (what they may send, what they are allowed to
-- do, what the engine writes). A command path reads a rule by its name, `Dialect.rules.<name>`:
-- true in the qless dialect, false in ours (the dispatch picks the table each call), so this file
-- is the whole list of differences (lua/README.md says why each exists; docs/pages/engine.md shows
-- them to users). A rule costs two table reads: the native hot paths do nothing more.
-- @include engine
local Dialect = {}

-- The qless dialect's rules, each true in it.
Dialect.QLESS = {
  -- Arguments qless takes and ours refuse: a job's payload may be a JSON array, a number among
  -- tags is taken as its text, a negative delay is none, a put may name no worker ('': qless
  -- clients' `job.move()`).
  lenient_arguments = true,
  -- `config.set` takes negative numbers (a negative jobs-history drops completed jobs at once).
  negative_settings = true,
  -- `fail` fails only a running job, and only by the worker it was given to (ours: any job; a
  -- running one only while its worker holds a valid lock).
  fail_by_given_worker = true,
  -- A worker holds the job it was given until the job is given to another or timed out: its
  -- lock never expires for it by the clock (heartbeat, complete, retry, fail still succeed), a job
  -- `timeout` took has its expiry written as 0, and only that job reads `stalled`.
  lock_held_until_taken = true,
  -- A lost worker's job (its lock expired after the grace period) uses one of its retries, and
  -- fails in failed-retries-<queue> when none are left; qless's own `pop` keeps this rule in
  -- both dialects (include/reclaim.lua). Ours count lost workers apart (lost-worker-retries).
  lost_lock_uses_retry = true,
  -- History entries as qless writes them: `done` and `timed-out` name no worker (Dialect.entry_by).
  entries_without_worker = true,
  -- A lock's time-out is recorded in the job's history even with no grace period.
  timeout_always_recorded = true,
  -- `retry` records no history entry and no retry in the queue's statistics, but the failure it
  -- was given.
  retry_records_failure = true,
  -- A failure as qless records it: its time in whole seconds, no worker in the entry once retries
  -- ran out, and none in the failure when the engine wrote the message (include/failing.lua).
  failure_as_qless = true,
  -- A job keeps its failure over a re-put and an unfail, until it completes.
  failure_kept_until_complete = true,
  -- A delay given with dependencies counts from the put (or the complete that moved the job on),
  -- not from the last dependency's completion (the job's `scheduled`, Queue.release_dependent).
  delay_counts_from_put = true,
  -- A re-put that names no dependencies keeps the job's (ours: a put states all of them).
  reput_keeps_dependencies = true,
  -- `queues` and `jobs scheduled` make due scheduled jobs waiting before they count or list them.
  reads_promote_scheduled = true,
  -- `tag get` reads a range to offset + count - 1 whatever count is (0 from 0: every job).
  zero_count_reads_all = true,
  -- Recurring jobs spawn as qless spawns them: the backlog counted from the first due spawn (one
  -- child more when now falls on a spawn time), each child put at the time it was due, and a
  -- change of interval moving the next spawn.
  qless_recurring_spawns = true,
  -- A recurring job is indexed under no tag (ours: `tag get` finds the template); one defined in
  -- this dialect says so (`tagged` '0'), so that no later call unindexes what was never indexed.
  recurring_untagged = true,
  -- `cancel` of a completed job removes it, its result with it (ours refuse: a cancel stops
  -- what has not ended, and `delete` removes a job for good).
  cancel_removes_completed = true,
  -- Events on qless-core's channels (no `ready:<queue>`) and in its order: include/events.lua
  -- publishes them (Events.failed, Events.canceled, Events.ready); a put, whose events come
  -- between its writes, reads the rule itself.
  qless_events = true,
}

-- Ours: every rule nil (false). A name missing from QLESS would read nil in both dialects:
-- tests/lua/test_dialect_rules.py checks that every rule read is listed there.
Dialect.OURS = {}

-- The rules of this call: set by the dispatch (api.lua) at the start of each call.
Dialect.rules = Dialect.OURS

-- The fields of a `done` or `timed-out` history entry by `worker` (entries_without_worker).
function Dialect.entry_by(worker)
  if Dialect.rules.entries_without_worker then return nil end
  return { worker = worker }
end
