"""``flows validate FILE...``: every finding of every file, then exit 0 (clean), 1 (errors).

Also the helpers the other flow-file commands share: print findings, and load a flow or stop.
Usage errors (no such file, bad option) exit 2, as click does.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import click
from rich.text import Text

from flows import gc_pause
from flows.cli import preview as preview_cli
from flows.cli.console import Console
from flows.cli.options import ExistingPath
from flows.cli.terminal import visible
from flows.flowfile.findings import Finding, Severity, has_errors
from flows.flowfile.model import Flow
from flows.validation.engine_checks import has_jobs
from flows.validation.validate import InvalidFlow, Validation, validate_file
from scheduler.engine.errors import counted

UNIMPORTED = "; job modules not imported (--check-imports)"
"""Ends the summary line of `flows validate` when a valid flow's Python steps went unchecked."""

_STYLES = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow"}


def register(group: click.Group) -> None:
    group.add_command(validate)


def print_findings(findings: Sequence[Finding], *, stderr: bool = False) -> None:
    """``file:line:col: severity: message`` and an indented hint; colored on a terminal.

    Every part is shown by :func:`visible`: a step id, a ``needs`` entry or a hint quotes the
    file as written, and a flow file from an untrusted pull request must not drive the CI log."""
    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    for finding in findings:
        line = Text.assemble(
            (f"{visible(finding.file)}:{finding.line}:{finding.col}: ", "bold"),
            (str(finding.severity), _STYLES[finding.severity]),
            f": {visible(finding.message)}",
        )
        console.print(line)
        if finding.hint:
            console.print(Text.assemble("    ", ("hint:", "cyan"), f" {visible(finding.hint)}"))


def checked_files(given: Iterable[str | Path], findings: Sequence[Finding]) -> list[str]:
    """The files read: those given, and the files (a sub-flow's) findings come from, once each."""
    return list(dict.fromkeys([*(str(path) for path in given), *(f.file for f in findings)]))


def summary(findings: Sequence[Finding], files: int, *, other_errors: int = 0) -> str:
    """``2 errors, 1 warning in 3 files`` (or ``no problems in 3 files``): the last line of
    every command that reports findings; ``other_errors`` counts errors said otherwise than
    as findings (a flow another file schedules already)."""
    found = sum(f.severity is Severity.ERROR for f in findings)
    warnings = len(findings) - found
    errors = found + other_errors
    parts = [counted(errors, "error")] if errors else []
    parts += [counted(warnings, "warning")] if warnings else []
    return f"{', '.join(parts) or 'no problems'} in {counted(files, 'file')}"


def load_or_exit(path: Path) -> Validation:
    """Validate ``path`` for a command that needs a valid flow: findings go to stderr, and
    errors end the command with status 1."""
    result = validate_file(path)
    if result.findings:
        print_findings(result.findings, stderr=True)
    if result.flow is None:
        click.echo(summary(result.findings, len(checked_files([path], result.findings))), err=True)
        sys.exit(1)
    return result


def _flow_files(paths: Sequence[Path]) -> list[Path]:
    """The files given, a folder standing for every flow file in it (as the scheduler service's
    --flows-dir reads it: *.yaml and *.yml, recursively, hidden ones and flow tests left out)."""
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        from scheduler.service.scanning import flow_files  # only for a folder: a quick start

        found = list(flow_files(path))
        if not found:
            raise click.BadParameter(
                f"no flow files (*.yaml, *.yml) in folder {path}", param_hint="'FILES...'"
            )
        files.extend(found)
    return list(dict.fromkeys(files))


@click.command()
@click.argument("files", nargs=-1, required=True, type=ExistingPath())
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help=(
        "json: one object with every finding, for tools and editors (imports_checked: whether"
        " --check-imports was given)."
    ),
)
@click.option(
    "--check-imports",
    is_flag=True,
    help=(
        "Also import the module of every 'job' (this runs the modules' top-level code; "
        "without it, a success line says they were not imported)."
    ),
)
@preview_cli.options
def validate(
    files: tuple[Path, ...],
    output_format: str,
    check_imports: bool,
    preview: int | None = None,
    outage: tuple[float, float] | None = None,
) -> None:
    """Check flow files: YAML, schema, graph, templates, schedule. Exit 1 on any error.

    A folder stands for every flow file in it, as `flows scheduler --flows-dir` reads it
    (*.yaml and *.yml, recursively; hidden ones and *.test.yaml left out). With --preview N or
    --after-outage FROM/TO, also print what each valid flow's schedule will do (with --format
    json, as `previews`)."""
    gc_pause.enable()  # a short single-threaded command: see flows.gc_pause
    files = tuple(_flow_files(files))
    if check_imports:
        from scheduler.worker.imports import import_path

        import_path()  # modules beside where it was started, as `flows run` and workers find them
    # A sub-flow's findings come with its parent's (flows.validation.subflow_checks): a file given
    # too, or named by two parents, is reported once.
    validated = [_validated(path, check_imports) for path in files]
    findings = list(dict.fromkeys(finding for found, _ in validated for finding in found))
    # A module that does not import passes unless imported: a success says it was not.
    unimported = (
        not check_imports
        and not has_errors(findings)
        and any(flow and has_jobs(flow) for _, flow in validated)
    )
    # The files checked: those given, and the sub-flow files their findings come from.
    checked = checked_files(files, findings)
    flows = [flow for _, flow in validated]
    previews = _previews(files, flows, preview, outage) if preview or outage else []
    if output_format == "json":
        errors = sum(f.severity is Severity.ERROR for f in findings)
        report: dict[str, object] = {
            "files": checked,
            "errors": errors,
            "warnings": len(findings) - errors,
            # Whether job modules were imported: a clean report without it says less.
            "imports_checked": check_imports,
            "findings": [finding.to_dict() for finding in findings],
        }
        if preview or outage:
            # One entry per valid flow file with a schedule: its flow, file and previews.
            report["previews"] = [
                {"flow": p.definition.name, "file": p.definition.file, **p.to_json()}
                for p in previews
                if not isinstance(p, Path)
            ]
        click.echo(json.dumps(report, indent=2))
    else:
        print_findings(findings)
        click.echo(summary(findings, len(checked)) + (UNIMPORTED if unimported else ""))
        for shown in previews:
            if isinstance(shown, Path):
                click.echo(f"{shown}: no schedule to preview")
            else:
                preview_cli.print_preview(shown)
    sys.exit(1 if has_errors(findings) else 0)


def _validated(path: Path, check_imports: bool) -> tuple[list[Finding], Flow | None]:
    """A flow file's findings, and its flow when it has no error; a test file named on the
    command line (``*.test.yaml``) is checked as `flows test` reads it, not as a flow."""
    from flows.testing.files import SUFFIXES, read_test_file

    if path.name.endswith(SUFFIXES):
        return list(read_test_file(path).findings), None
    result = validate_file(path, check_imports=check_imports, expand=True)
    return result.findings, result.flow


def _previews(
    files: Sequence[Path],
    flows: Sequence[Flow | None],
    count: int | None,
    outage: tuple[float, float] | None,
) -> list[preview_cli.SchedulePreview | Path]:
    """The preview of each valid flow file's schedule (``flows``: each file's flow, None for
    one with errors or a test file); a file without one: its path."""
    from flows.runs.build import validated_flow_file
    from flows.runs.service_source import definition_of

    now = time.time()
    out: list[preview_cli.SchedulePreview | Path] = []
    for path, flow in zip(files, flows, strict=True):
        if flow is None:
            continue  # its findings are printed above; a test file has no schedule of its own
        if flow.schedule is None:
            out.append(path)
            continue
        try:
            flow_file = validated_flow_file(flow, path)
        except InvalidFlow:
            continue  # gone since it was validated
        out.append(preview_cli.build(definition_of(flow_file), now, count, outage))
    return out
