-- reads: the commands that only read (no key written, no event published).
--
-- The read-only entry (FCALL_RO of the library's `qless_ro` function, flagged `no-writes`)
-- serves these and refuses every other command, so inspection keeps working where the server
-- refuses writes: at maxmemory, on a read-only replica, for a read-only ACL user.
-- scheduler/engine/scripts.py reads this list to pick the entry; tests/lua/test_reads.py runs each
-- read through the read-only entry.
local Reads = {
  ['get'] = true, ['multiget'] = true, ['jobs'] = true, ['length'] = true, ['queues'] = true,
  ['queue.counts'] = true, ['queue.stats'] = true, ['stats'] = true, ['failed'] = true,
  ['failed.dropped'] = true,
  ['config.get'] = true, ['throttle.get'] = true, ['recur.get'] = true, ['run.get'] = true,
  ['runs'] = true, ['schedule.get'] = true, ['schedule.list'] = true, ['schedulers'] = true,
  ['doctor.names'] = true, ['doctor.index'] = true, ['doctor.jobs'] = true,
  ['wait.get'] = true, ['deadline.count'] = true, ['job.explain'] = true, ['cache.list'] = true,
  ['backfill.get'] = true, ['backfill.list'] = true, ['backfill.runs'] = true,
  ['run.read'] = true, ['run.job'] = true, ['runs.statuses'] = true, ['run.counts'] = true,
  ['catalog.list'] = true, ['catalog.sources'] = true,
}
