"""A worker process of the chaos harness: ``python chaos_worker.py <python -m scheduler.worker
arguments>``.

``FLOWS_CHAOS_SKEW`` (seconds) shifts this process's ``time.time`` to simulate a machine whose
clock is wrong. The worker sends the engine no time of its own (the server's clock decides), so
the skew must change nothing; the harness checks that it does not.
"""

from __future__ import annotations

import os
import sys
import time


def skew_clock(seconds: float) -> None:
    """Make ``time.time`` run ``seconds`` ahead (negative: behind) of the true clock."""
    real = time.time

    def skewed() -> float:
        return real() + seconds

    time.time = skewed


def main() -> int:
    skew = float(os.environ.get("FLOWS_CHAOS_SKEW") or 0)
    if skew:
        skew_clock(skew)
    from scheduler.worker.__main__ import main as worker_main

    return worker_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
