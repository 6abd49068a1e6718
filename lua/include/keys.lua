-- keys: the one place that names every Redis key and channel of the engine.
-- The layout is documented in lua/README.md; `P` below is Engine.prefix ('ql:' by default).
-- @include engine
local Keys = {}

function Keys.job(jid) return Engine.prefix .. 'j:' .. jid end
function Keys.history(jid) return Engine.prefix .. 'j:' .. jid .. '-history' end
function Keys.dependencies(jid) return Engine.prefix .. 'j:' .. jid .. '-dependencies' end
function Keys.dependents(jid) return Engine.prefix .. 'j:' .. jid .. '-dependents' end
-- A job's step log of one attempt (ours, commands/log.lua): the attempt comes first, so no jid
-- can alias another job's key and no jid suffix needs reserving.
function Keys.log(jid, attempt) return Engine.prefix .. 'log:' .. attempt .. ':' .. jid end
-- The step logs of a job its run's cancel deleted, kept with the run (Job.keep_logs): the
-- counters as the job hash held them, and one list per attempt; a new job of the same jid logs
-- afresh under Keys.log.
function Keys.kept_log(jid, attempt) return Engine.prefix .. 'log-kept:' .. attempt .. ':' .. jid end
function Keys.kept_logs(jid) return Engine.prefix .. 'log-kept-counts:' .. jid end
function Keys.run_kept_logs(run_id) return Engine.prefix .. 'run:' .. run_id .. '-kept-logs' end

-- A queue's waiting jobs: those of priority 0 in put order (a list), the others by score
-- (include/work.lua).
function Keys.work(queue) return Engine.prefix .. 'q:' .. queue .. '-work' end
function Keys.fifo(queue) return Engine.prefix .. 'q:' .. queue .. '-fifo' end
function Keys.locks(queue) return Engine.prefix .. 'q:' .. queue .. '-locks' end
function Keys.scheduled(queue) return Engine.prefix .. 'q:' .. queue .. '-scheduled' end
function Keys.depends(queue) return Engine.prefix .. 'q:' .. queue .. '-depends' end
function Keys.recur(queue) return Engine.prefix .. 'q:' .. queue .. '-recur' end
function Keys.recurring(jid) return Engine.prefix .. 'r:' .. jid end
function Keys.buried(queue) return Engine.prefix .. 'q:' .. queue .. '-buried' end
function Keys.ttl(queue) return Engine.prefix .. 'q:' .. queue .. '-ttl' end
function Keys.parked(queue) return Engine.prefix .. 'q:' .. queue .. '-parked' end
function Keys.expired() return Engine.prefix .. 'expired' end
-- Jobs awaiting a signal (ours, include/waits.lua), score = when their wait times out (+inf: never).
function Keys.awaiting() return Engine.prefix .. 'awaiting' end

-- Concurrency keys and throttles (ours, include/slots.lua). A queue's running jobs per key, and
-- the jobs of one key parked until it has a free slot. Names are length-prefixed where two ids
-- meet in one key name, so no pair of (queue, key) can alias another.
function Keys.key_running(queue) return Engine.prefix .. 'q:' .. queue .. '-ck' end
function Keys.key_parked(queue, key)
  return Engine.prefix .. 'ck:' .. #queue .. ':' .. queue .. ':' .. key
end
-- Throttles: name -> limit, name -> running jobs, the queues with jobs parked for a throttle,
-- and those jobs per (throttle, queue).
function Keys.throttles() return Engine.prefix .. 'throttles' end
function Keys.throttle_running() return Engine.prefix .. 'throttle-running' end
function Keys.throttle_queues(name) return Engine.prefix .. 'tq:' .. name end
function Keys.throttle_parked(name, queue)
  return Engine.prefix .. 'tp:' .. #name .. ':' .. name .. ':' .. queue
end

function Keys.queues() return Engine.prefix .. 'queues' end
function Keys.paused() return Engine.prefix .. 'paused_queues' end
function Keys.failures() return Engine.prefix .. 'failures' end
function Keys.failed(group) return Engine.prefix .. 'f:' .. group end
-- Failed jobs dropped per group by max-failed-per-group (include/failed_bound.lua): group -> count.
function Keys.failed_dropped() return Engine.prefix .. 'failed-dropped' end
function Keys.workers() return Engine.prefix .. 'workers' end
function Keys.worker_jobs(worker) return Engine.prefix .. 'w:' .. worker .. ':jobs' end
function Keys.completed() return Engine.prefix .. 'completed' end
function Keys.config() return Engine.prefix .. 'config' end
function Keys.tracked() return Engine.prefix .. 'tracked' end
function Keys.tag(tag) return Engine.prefix .. 't:' .. tag end
function Keys.tags() return Engine.prefix .. 'tags' end
function Keys.seq() return Engine.prefix .. 'seq' end

-- Statistics are grouped by day (midnight UTC, epoch seconds) and queue.
function Keys.stats(kind, day, queue)
  return Engine.prefix .. 's:' .. kind .. ':' .. day .. ':' .. queue
end

function Keys.channel(name) return Engine.prefix .. name end
function Keys.worker_info(worker) return Engine.prefix .. 'w:' .. worker .. ':info' end
-- The last worker that listened on each queue, kept when it left `workers` (include/registry.lua):
-- queue -> JSON {worker, seen}.
function Keys.workers_last() return Engine.prefix .. 'workers-last' end
-- Worker liveness leases (ours, include/lease.lua): worker -> when its lease expires.
function Keys.leases() return Engine.prefix .. 'leases' end
-- When the last lease renewal happened (a gap longer than a few seconds is a stall).
function Keys.leases_seen() return Engine.prefix .. 'leases-seen' end
-- Idle hand-off (ours, include/handoff.lua): the workers waiting on a queue (score = when their
-- wait ends), the queues one worker waits on, and the jobs handed to it while it waited.
function Keys.idle(queue) return Engine.prefix .. 'q:' .. queue .. '-idle' end
function Keys.worker_waiting(worker) return Engine.prefix .. 'w:' .. worker .. ':waiting' end
function Keys.inbox(worker) return Engine.prefix .. 'w:' .. worker .. ':inbox' end
-- Jobs locked to a live worker that its last lease renewal did not name (include/lease.lua):
-- jid -> when first seen so.
function Keys.unheld(worker) return Engine.prefix .. 'w:' .. worker .. ':unheld' end

-- Flow runs (ours): the run record, its jids in submission order, and run ids by submit time.
function Keys.run(run_id) return Engine.prefix .. 'run:' .. run_id end
function Keys.run_jobs(run_id) return Engine.prefix .. 'run:' .. run_id .. '-jobs' end
function Keys.run_canceled(run_id) return Engine.prefix .. 'run-canceled:' .. run_id end
function Keys.run_counts(run_id) return Engine.prefix .. 'run-counts:' .. run_id end
function Keys.runs() return Engine.prefix .. 'runs' end
-- A step cache key's entry (jid, created, ttl) and the index of keys (commands/cache.lua).
function Keys.cache(key) return Engine.prefix .. 'cache:' .. key end
function Keys.caches() return Engine.prefix .. 'caches' end
function Keys.flow_runs(flow) return Engine.prefix .. 'runs:' .. flow end

-- Cron schedules (ours). A schedule's name is its flow's name; `schedules` holds the next fire
-- time of every schedule that has one (the scheduled sorted set), `schedule-names` every
-- registered schedule (score 0, so ZRANGE lists them by name).
function Keys.schedules() return Engine.prefix .. 'schedules' end
function Keys.schedule_names() return Engine.prefix .. 'schedule-names' end
function Keys.schedule(name) return Engine.prefix .. 'schedule:' .. name end
function Keys.schedule_skips(name) return Engine.prefix .. 'schedule-skips:' .. name end
function Keys.schedules_buffered() return Engine.prefix .. 'schedules-buffered' end
-- Scheduler services' health: service id -> time of its last tick, and what each registered.
function Keys.schedulers() return Engine.prefix .. 'schedulers' end
function Keys.scheduler(id) return Engine.prefix .. 'scheduler:' .. id end
-- The catalogue of the services' folders (commands/catalog.lua): source -> JSON {digest, folder,
-- files, synced, seen}; a source's files, path -> text.
function Keys.catalog() return Engine.prefix .. 'catalog' end
function Keys.catalog_files(source) return Engine.prefix .. 'catalog:' .. source end

-- Notifications (ours, include/notify.lua): the outbox stream the scheduler service delivers.
function Keys.outbox() return Engine.prefix .. 'notify:outbox' end
-- Deadlines (ours, include/deadlines.lua): runs and steps to check, score = when they could
-- first be missed; how many deadlines were missed in all.
function Keys.deadlines() return Engine.prefix .. 'deadlines' end
function Keys.deadlines_missed() return Engine.prefix .. 'deadlines-missed' end
