"""Run chaos scenarios outside pytest and print one table:

    python tests/chaos/run_chaos.py                 # every scenario, short
    python tests/chaos/run_chaos.py --long          # every scenario, full size
    python tests/chaos/run_chaos.py kill-server --keep   # one, keeping its folder and logs

Exit status 1 when any scenario broke an invariant.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chaos_harness import table
from chaos_scenarios import SCENARIOS, run_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_chaos.py")
    parser.add_argument("scenarios", nargs="*", choices=[[], *SCENARIOS], default=[])
    parser.add_argument("--long", action="store_true", help="full size (FLOWS_CHAOS=long)")
    parser.add_argument("--keep", action="store_true", help="keep each scenario's folder")
    args = parser.parse_args(argv)
    mode = "long" if args.long else "short"
    started = time.monotonic()
    reports = []
    for name in args.scenarios or list(SCENARIOS):
        report = run_scenario(name, mode, keep=args.keep)
        reports.append(report)
        print(table([report]), flush=True)
    print(f"\n[{mode}] all scenarios, {time.monotonic() - started:.0f}s in total")
    print(table(reports))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
