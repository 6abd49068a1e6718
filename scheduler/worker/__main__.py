"""Entry point of one worker process: ``python -m scheduler.worker`` (used by the pool).

Users start workers with ``flows worker``; this module takes the same settings
(:mod:`scheduler.worker.settings`, the one table both read) without the CLI, and those only a
pool child needs. The Redis URL comes from ``FLOWS_REDIS_URL``, the namespace from
``FLOWS_NAMESPACE``.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace

from scheduler.connect import Client
from scheduler.engine.backoff import EXIT_CONFIG, transient
from scheduler.engine.errors import FlowsError, given_as, given_by_starter
from scheduler.engine.faults import debug_enabled, one_line
from scheduler.terminal import log_to_stderr
from scheduler.worker.imports import import_path
from scheduler.worker.settings import WorkerSettings
from scheduler.worker.supervision import watch_supervisor
from scheduler.worker.worker import Worker


def main(argv: list[str] | None = None) -> int:
    # A pool's child: faults word the URL as its pool was given it (--redis under `flows
    # worker`, the URL given to Client() in Python); started by hand, as its flags.
    with given_as(given_by_starter("flag")):
        return run(argv)


def run(argv: list[str] | None) -> int:
    settings = WorkerSettings.from_argv(argv)
    import_path(settings.paths)
    # A job's own log records reach this stderr too: shown, not obeyed, by the terminal.
    log_to_stderr(settings.log_level, "%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s")
    try:
        client = Client(
            os.environ.get("FLOWS_REDIS_URL"),
            namespace=os.environ.get("FLOWS_NAMESPACE"),
            worker_name=settings.name,
        )
        # The pool checked the server at start: it is away only for a while.
        worker = Worker(client, settings=replace(settings, wait_for_server=True))
        # A pool child: stop with the supervisor, however it dies.
        watch_supervisor(worker.stop, settings.shutdown_grace + settings.kill_after + 5)
        return worker.run()
    except Exception as error:  # one line that says what to fix (the traceback with FLOWS_DEBUG)
        logging.getLogger("flows.worker").error(
            "%s", one_line(error), exc_info=error if debug_enabled() else None
        )
        return 1 if transient(error) or not isinstance(error, FlowsError) else EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
