"""``flows test [PATH...]``: run flow tests (``*.test.yaml``, a flow's ``tests:``) on a virtual
clock."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from flows.cli.common import open_client, user_errors
from flows.cli.logs import format_line
from flows.cli.options import connection, misspelt_path_hint
from flows.cli.terminal import visible
from flows.cli.validate import checked_files, print_findings, summary
from flows.flowfile.durations import spelled
from flows.testing.files import (
    SUFFIXES,
    Reading,
    exists,
    find_test_files,
    missing_case,
    split_case_id,
)
from flows.testing.session import (
    CaseReport,
    private_server,
    read_files,
    run_readings,
    sigterm_as_ctrl_c,
)
from scheduler.worker.imports import import_path


def register(group: click.Group) -> None:
    group.add_command(test)


_PATHS_HINT = "'[PATH | FILE::NAME]...'"


def _case_ids(args: tuple[str, ...]) -> tuple[list[Path], dict[Path, set[str]]]:
    """The paths named, and for each file named by case ids (``FILE::NAME``) the names of the
    cases to run (a file also named alone, or in a folder named, runs every case)."""
    paths: list[Path] = []
    names: dict[Path, set[str]] = {}
    whole: set[Path] = set()
    for arg in args:
        path, name = split_case_id(arg)
        if not exists(path):
            hint = misspelt_path_hint(path)
            said = f"Path {str(path)!r} does not exist" + (f" ({hint})" if hint else ".")
            raise click.BadParameter(visible(said), param_hint=_PATHS_HINT)
        if name is None:
            whole.add(path)
        elif not path.is_file():
            raise click.BadParameter(
                visible(f"{arg!r}: a case id is FILE::NAME, and {str(path)!r} is not a file"),
                param_hint=_PATHS_HINT,
            )
        else:
            names.setdefault(path, set()).add(name)
        paths.append(path)
    every = set(find_test_files(sorted(whole)))
    return paths, {path: wanted for path, wanted in names.items() if path not in every}


def _read(files: list[Path], names: dict[Path, set[str]]) -> dict[Path, Reading]:
    """The files read, before a server starts: a case misnamed is said before anything runs."""
    readings = read_files(files)
    for path, wanted in names.items():
        wrong = missing_case(readings[path], wanted)
        if wrong is not None:
            raise click.BadParameter(visible(wrong), param_hint=_PATHS_HINT)
    return readings


def _line(report: CaseReport, verbose: bool) -> None:
    word = click.style("PASSED", fg="green") if report.passed else click.style("FAILED", fg="red")
    timing = ""
    if verbose and report.observed is not None:
        timing = (
            f" ({report.observed.seconds:.2f}s, {spelled(round(report.observed.virtual_seconds))}"
            " virtual)"
        )
    click.echo(f"{visible(report.nodeid)} {word}{timing}")
    if verbose and report.passed:
        _output(report)


def _output(report: CaseReport) -> None:
    """What the case's real steps wrote (their step logs, as `flows logs` shows them): kept
    apart from the case lines, shown with a failure, or with -v."""
    if report.observed is None or not report.observed.output:
        return
    click.echo("    captured output:")
    for item in report.observed.output:
        click.echo(f"      {format_line(item)}")


def _failure(report: CaseReport) -> None:
    """A failed case, pytest-style: its mismatches, how its jobs failed, what they wrote."""
    click.echo("")
    click.echo(click.style(f"_____ {visible(report.nodeid)} _____", fg="red", bold=True))
    click.echo(visible(f"{report.file}:{report.line}: case {report.case!r}"))
    for line in report.failure:  # values and messages from jobs: as text, never escapes
        click.echo(f"    {visible(line)}" if line else "")
    if report.observed is not None and report.observed.output:
        click.echo("")
        _output(report)


@click.command()
@click.argument("paths", nargs=-1, metavar="[PATH | FILE::NAME]...")
@click.option(
    "-k", "select", help="Only cases whose name contains this text (in any case of letters)."
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Wall and virtual time of each case, and what its real steps wrote.",
)
@connection
def test(
    paths: tuple[str, ...],
    select: str | None,
    verbose: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Run the flow tests in PATHS: test files (*.test.yaml, *.test.yml) and flow files with a
    tests: section, named or found in the folders named (default: .). FILE::NAME, a case's id
    as it is printed (and as pytest takes it), runs that case of FILE alone.

    Each case runs the flow against the real engine on a virtual clock, in a namespace of its
    own that is removed afterwards: on a private embedded server started for the session, or
    on --redis / $FLOWS_REDIS_URL when given. Exit code 0 when every case passed, 1 when one
    failed or a test file has a mistake (printed as file:line:col findings), 2 when -k selects
    no case or FILE::NAME names a case FILE does not have, 130 after Ctrl-C and 143 after
    SIGTERM (either stops a real step's commands and cleans up as the end does: the case's
    namespace, the private server).
    """
    named, names = _case_ids(paths)
    files = find_test_files(named or [Path(".")])
    if not files:
        raise click.ClickException(
            f"no test files ({', '.join('*' + suffix for suffix in SUFFIXES)}) or flow files "
            "with tests: in "
            f"{' '.join(map(str, named)) or '.'}: write NAME.test.yaml beside NAME.yaml, with "
            "flow: NAME.yaml and cases: (see Flow tests in the docs)"
        )
    import_path()  # job modules beside where it was started, as a worker finds them
    readings = _read(files, names)

    def show(case: CaseReport) -> None:
        _line(case, verbose)

    terminated: list[int] = []
    try:
        with user_errors(), sigterm_as_ctrl_c(terminated):
            if redis_url or os.environ.get("FLOWS_REDIS_URL"):
                session = run_readings(
                    open_client(redis_url, namespace).redis, readings, show, select, names
                )
            else:
                with private_server() as server:
                    session = run_readings(server, readings, show, select, names)
    except KeyboardInterrupt:
        if not terminated:
            raise  # Ctrl-C: `interrupted`, exit code 130, as every command ends
        click.echo("terminated", err=True)
        raise click.exceptions.Exit(128 + signal.SIGTERM) from None
    if session.findings:
        print_findings(session.findings, stderr=True)
    if select is not None and not session.cases and session.passed:
        # As pytest's -k: a selection of nothing is a mistake, not a pass.
        raise click.BadParameter(
            f"no case name contains {select!r} (in {len(files)} file(s); without -k every "
            "case runs)",
            param_hint="'-k'",
        )
    failed = [c for c in session.cases if not c.passed]
    for report in failed:
        _failure(report)
    passed = len(session.cases) - len(failed)
    counts = f"{passed} passed, {len(failed)} failed"
    if session.findings:  # worded as `flows validate` words them
        counts += f", {summary(session.findings, len(checked_files(files, session.findings)))}"
    click.echo(click.style(counts, fg="green" if session.passed else "red"), err=False)
    if not session.passed:
        raise click.exceptions.Exit(1)
