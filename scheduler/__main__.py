"""``python -m scheduler``: the scheduler service, the same command as ``flows scheduler``.

The command lives with the flows command line (the service loads flow files through
:mod:`flows.runs.service_source`); it is imported only when this module runs, so importing the
``scheduler`` package never imports ``flows``.
"""

from __future__ import annotations


def main() -> None:
    from flows.cli.scheduler import scheduler_command

    scheduler_command(prog_name="python -m scheduler")


if __name__ == "__main__":
    main()
