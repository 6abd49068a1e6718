"""Entry point of one worker process: ``python -m scheduler.worker`` (used by the pool).

Users start workers with ``flows worker``; this module takes the same core options with argparse
so a child process does not need the CLI. The Redis URL comes from ``FLOWS_REDIS_URL``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from scheduler.engine.backoff import transient
from scheduler.engine.client import Client
from scheduler.engine.errors import FlowsError
from scheduler.engine.faults import debug_enabled, one_line
from scheduler.worker.imports import import_path, load_object
from scheduler.worker.pool import EXIT_CONFIG
from scheduler.worker.supervision import watch_supervisor
from scheduler.worker.worker import Worker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler.worker")
    parser.add_argument("-q", "--queues", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prefetch", type=int, default=64)
    parser.add_argument("--strategy", default="ordered", choices=["ordered", "round-robin"])
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--name")
    parser.add_argument("--prepare", help="module:function run before each job")
    parser.add_argument("--shutdown-grace", type=float, default=30.0)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--exit-on-stuck", action="store_true")
    parser.add_argument("--path", action="append", default=[], help="a folder to import from")
    args = parser.parse_args(argv)
    import_path(args.path)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s",
    )
    try:
        client = Client(
            os.environ.get("FLOWS_REDIS_URL"),
            namespace=os.environ.get("FLOWS_NAMESPACE"),
            worker_name=args.name,
        )
        worker = Worker(
            client,
            [q for q in args.queues.split(",") if q],
            strategy=args.strategy,
            threads=args.threads,
            prefetch=args.prefetch,
            burst=args.burst,
            poll_interval=args.poll_interval,
            shutdown_grace=args.shutdown_grace,
            prepare=load_object(args.prepare) if args.prepare else None,
            exit_on_stuck=args.exit_on_stuck,
            wait_for_server=True,  # the pool checked it at start: it is away only for a while
        )
        # A pool child: stop with the supervisor, however it dies.
        watch_supervisor(worker.stop, args.shutdown_grace + worker.kill_after + 5)
        return worker.run()
    except Exception as error:  # one line that says what to fix (the traceback with FLOWS_DEBUG)
        logging.getLogger("flows.worker").error(
            "%s", one_line(error), exc_info=error if debug_enabled() else None
        )
        return 1 if transient(error) or not isinstance(error, FlowsError) else EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
