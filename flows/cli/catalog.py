"""What ``flows --help`` lists without importing the command modules: each command's
module and the first sentence of its docstring. Generated from the modules (do not edit):
``python -m flows.cli.write_catalog`` rewrites it."""

COMMANDS: dict[str, tuple[str, str]] = {
    "approve": (
        "signal",
        'Approve STEP of RUN: `flows signal` with the data {"note": TEXT, "approved_by": '
        "USER} (USER: $FLOWS_USER, else the login name).",
    ),
    "audit": (
        "audit",
        "The audit log: every change made through the API or the command line (who, with "
        "which role, via which, what, on what, from where), newest first.",
    ),
    "backfill": (
        "backfill",
        "Run FLOW once per schedule tick from --from to --to (a flow file, or a "
        "registered flow's name).",
    ),
    "backfills": (
        "backfill",
        "Backfills, newest first (or one, ID): how many ticks are handled, runs "
        "submitted, canceled runs resumed, ticks that had run already, runs active.",
    ),
    "bury": (
        "queue_admin",
        "Take waiting or scheduled job JID out of circulation without failing it (see kick).",
    ),
    "cache": ("cache", "The shared step cache (steps with `cache: {key, ttl}`)."),
    "cancel": (
        "jobs",
        "Cancel runs (every job not yet done) or jobs (refused while a job depends on "
        "one, and for a completed job or a run's failed or expired one: `flows delete` "
        "removes one), or a backfill (--backfill ID).",
    ),
    "delete": (
        "queue_admin",
        "Delete jobs for good (refused while one runs, or while a job not listed depends on one).",
    ),
    "doctor": (
        "doctor",
        "Check that every job is in exactly the index its state names, and repair it.",
    ),
    "engine": (
        "engine",
        "The Lua job engine: print it for other qless clients, show its version, load it.",
    ),
    "explain": (
        "explain",
        "Why a job, or each unfinished step of a run (or STEP of it), is where it is: "
        "waiting for which dependencies, scheduled until when, parked on which throttle "
        "or concurrency key, no live worker on its queue, awaiting a signal, upstream "
        "failed, ...",
    ),
    "failed": ("jobs", "Failure groups with counts, or the failed jobs of GROUP."),
    "graph": ("graph", "Print the steps of FILE and their needs as a Mermaid or DOT graph."),
    "job": ("jobs", "One job: state, data, result, failure and history."),
    "jobs": ("jobs", "Jobs in a state (waiting by default), newest activity last."),
    "kick": (
        "queue_admin",
        "Make up to COUNT buried jobs of queue NAME waiting again (the longest buried "
        "first), or the buried jobs named with --job, whatever their queue, or those of a "
        "run's step (--step).",
    ),
    "logs": (
        "logs",
        "What a run's steps (or one job) wrote: stdout (|), a Python step's stderr (!), "
        "log records (~), every attempt of each job (a header where one starts).",
    ),
    "notifications": (
        "notifications",
        "Notifications: given up (kept until retried), waiting to be sent, and the latest sends.",
    ),
    "plan": ("plan", "Show the jobs one run of FILE would put: ids, queues, dependencies, delays."),
    "queue": (
        "queue_admin",
        "One queue: statistics by state and by call, pause, unpause, truncate, drop.",
    ),
    "queues": (
        "jobs",
        "Queues with their job counts; backlog (waiting and due) and leased (running and "
        "stalled) are what an autoscaler reads.",
    ),
    "rerun": (
        "jobs",
        "Run STEP of the finished run RUN again (with --downstream, every step after it), "
        "and work it here as `flows run` does.",
    ),
    "retry": (
        "jobs",
        "Resume run TARGET and work it here as `flows run` does (its failed steps run "
        "again, completed ones do not; exit code 0 when it succeeds), or put the failed "
        "jobs of TARGET back: a step of a run (RUN:STEP, a foreach step's items too) or a "
        "job.",
    ),
    "run": ("run", "Validate FILE, submit a run, and (unless --detach) run it here until it ends."),
    "runs": (
        "run",
        "Recent runs, newest first; a sub-flow's child runs are counted under their "
        "parent (``--all`` lists them).",
    ),
    "schedule": ("scheduler", "Act on one schedule: pause, resume, trigger, show, remove."),
    "scheduler": (
        "scheduler",
        "The scheduler service: fire the cron schedules of the flows under --flows-dir.",
    ),
    "schedules": (
        "scheduler",
        "Registered schedules: next fire time in their time zone, last run, policy, paused.",
    ),
    "schema": (
        "schema",
        "Print the JSON Schema of flow files (point your editor's YAML support at it).",
    ),
    "server": (
        "server",
        "The embedded server that keeps jobs on disk when no --redis URL is given.",
    ),
    "signal": (
        "signal",
        "Complete STEP of RUN, a `wait:` step awaiting its signal, with --data as its outputs.",
    ),
    "sources": (
        "sources",
        "The scheduler services' sources: the folder each published, live or stale.",
    ),
    "status": ("run", "A run's steps (the latest top-level run when RUN_ID is left out)."),
    "test": (
        "flowtest",
        "Run the flow tests in PATHS: test files (*.test.yaml, *.test.yml) and flow files "
        "with a tests: section, named or found in the folders named (default: .).",
    ),
    "throttle": (
        "queue_admin",
        "Set or lift a throttle's limit (jobs put with throttle=NAME, over all queues).",
    ),
    "throttles": ("queue_admin", "Named throttles: limit, running and parked jobs."),
    "ui": (
        "ui",
        "Serve the dashboard (/), the REST API (/api/v1/, OpenAPI at "
        "/api/v1/openapi.json) and /metrics.",
    ),
    "unfail": ("jobs", "Put up to COUNT failed jobs of GROUP back into QUEUE (oldest first)."),
    "user": (
        "users",
        "Users of flows ui: viewer (reads), operator (also retries, reruns, cancels, "
        "approves, signals, triggers), admin (also schedules, queues, workers, throttles, "
        "users).",
    ),
    "validate": ("validate", "Check flow files: YAML, schema, graph, templates, schedule."),
    "worker": (
        "worker",
        "Run jobs from QUEUES until stopped (SIGTERM/SIGINT: finish, then hand back; twice: now).",
    ),
    "workers": (
        "jobs",
        "Workers by recent activity: host, pid, queues, the jobs they hold, when last seen.",
    ),
}
