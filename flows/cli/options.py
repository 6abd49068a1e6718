"""Options shared by many commands, declared once."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # the flow model and the settings' dataclasses: only where a command needs them
    from flows.flowfile.params import ParamError
    from scheduler.engine.limits import IdKind
    from scheduler.worker.settings import Setting

F = TypeVar("F", bound=Callable[..., Any])

redis_url = click.option(
    "--redis",
    "redis_url",
    envvar="FLOWS_REDIS_URL",
    metavar="URL",
    default=None,
    help="Redis URL (redis://, rediss://, unix://, redis+cluster://, redis+sentinel://). "
    "Default: $FLOWS_REDIS_URL, else the embedded server.",
)

namespace = click.option(
    "--namespace",
    envvar="FLOWS_NAMESPACE",
    default=None,
    metavar="PREFIX",
    help="Namespace: a name (billing: keys under '{billing}:') or a key prefix ending in ':'. "
    "Default: $FLOWS_NAMESPACE, else 'ql:' (a Redis Cluster needs one).",
)


class FiniteFloat(click.FloatRange):
    """A float range that also refuses NaN and infinities (``click.FloatRange`` lets NaN through:
    every comparison with NaN is false)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        result = super().convert(value, param, ctx)
        if not math.isfinite(result):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return result


class ExistingPath(click.Path):
    """``click.Path(exists=True)`` that answers a path that does not exist with the one beside
    it likely meant: ``File 'pipline.yaml' does not exist (did you mean 'pipeline.yaml'?)``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(exists=True, path_type=Path, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as error:
            hint = misspelt_path_hint(Path(value))
            if not hint:
                raise
            said = f"{error.message.rstrip('.')} ({hint})"
            raise click.BadParameter(said, ctx=ctx, param=param) from None


def misspelt_path_hint(path: Path) -> str:
    """``did you mean 'pipelines/pipeline.yaml'?`` for a path that does not exist, naming the
    entry of its folder closest to it; empty when there is none (or the folder is missing)."""
    from flows.cli.terminal import visible
    from flows.flowfile.findings import path_meant

    meant = path_meant(path)
    return f"did you mean {visible(meant)!r}?" if meant else ""


class FlowFile(ExistingPath):
    """A flow file that exists and is not a flow test file (``etl.test.yaml``), which would
    be read as a flow missing every key."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from flows.cli.terminal import visible
        from flows.testing.files import SUFFIXES

        path = super().convert(value, param, ctx)
        if path.name.endswith(SUFFIXES):
            self.fail(
                visible(
                    f"{str(path)!r} is a flow test file, not a flow: run its cases with "
                    f"flows test {path}"
                ),
                param,
                ctx,
            )
        return path


flow_file = FlowFile()

as_json = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")


def connection(func: F) -> F:
    """Add --redis and --namespace to a command."""
    return redis_url(namespace(func))


# `flows plan` and `flows run` describe a run the same way.
param = click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A param of the run (repeatable). Text is converted to the param's type: an array as "
    "a,b,c or a JSON list, an object as JSON, a bool as true/false.",
)
logical_time = click.option(
    "--logical-time",
    type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]),
    default=None,
    help="The moment the run stands for (${{ run.logical_date }}; UTC unless an offset is "
    "given). Default: now.",
)


SHOWN_ID_CHARS = 40
"""Characters of a refused id a message quotes."""


def id_refusal(what: str, value: str, kind: IdKind = "name") -> str | None:
    """Why the engine would refuse ``value`` as ``what`` (a run id, a job id: ``kind`` says
    by which rules, :func:`scheduler.engine.limits.id_fault`), in the command's words: "run id
    'a b' contains white space or a control character"; None when it would take it. The value
    is quoted with its control characters escaped and cut short, and left out when it is empty
    or too long (its size is the fault)."""
    from scheduler.engine.limits import MAX_ID_BYTES, id_fault

    fault = id_fault(value, kind)
    if fault is None:
        return None
    if value == "" or len(value.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        return f"{what} {fault}"
    cut = value if len(value) <= SHOWN_ID_CHARS else value[:SHOWN_ID_CHARS] + "…"
    return f"{what} {cut!r} {fault}"


def one_line(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A callback that refuses, as a usage error (exit code 2) before anything is sent, a short
    text (a pause's note) that is not one line, as the API refuses it
    (:func:`scheduler.engine.limits.line_fault`)."""
    from scheduler.engine.limits import line_fault

    fault = None if value is None else line_fault(value)
    if fault is not None:
        raise click.BadParameter(fault, ctx, param)
    return value


def _checked_ids(
    what: str, kind: IdKind, labels: bool = False
) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A callback that refuses, as a usage error (exit code 2) before anything is sent, an
    argument's value (one, or each of ``nargs=-1``) the engine would refuse as ``what``; with
    ``labels``, each part of ``RUN:step/child-step`` (a child run's step as `flows status`
    labels it: :func:`flows.runs.labels.labelled_jid`)."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        for one in value if isinstance(value, tuple) else (value,):
            refusal = None if one is None else _id_or_label_refusal(what, one, kind, labels)
            if refusal is not None:
                raise click.UsageError(refusal, ctx)
        return value

    return check


def _id_or_label_refusal(what: str, value: str, kind: IdKind, labels: bool) -> str | None:
    head, slash, rest = value.partition("/")
    if not (labels and slash and ":" in head):
        return id_refusal(what, value, kind)
    parts = (head, *rest.split("/"))
    return next((r for r in (id_refusal(what, part, kind) for part in parts) if r), None)


def id_argument(
    name: str, what: str, kind: IdKind = "name", labels: bool = False, **attrs: Any
) -> Callable[[F], F]:
    """A positional argument naming a run or a job (``what``: "run id", "job id", "run or job
    id"), checked by the engine's rules for ``kind`` (a run id is a name, a jid has reserved
    suffixes besides) before the command runs; with ``labels``, ``RUN:step/child-step`` too."""
    return click.argument(name, callback=_checked_ids(what, kind, labels), **attrs)


def id_option(
    *decls: str, what: str, kind: IdKind = "jid", labels: bool = False, **attrs: Any
) -> Callable[[F], F]:
    """An option naming a job (or a run), checked as :func:`id_argument` checks an argument."""
    return click.option(*decls, callback=_checked_ids(what, kind, labels), **attrs)


def checked_value(what: str, kind: IdKind = "name") -> Callable[..., str | None]:
    """A callback that refuses, as a usage error naming the option, a value the engine would
    refuse as ``what`` (``--run-id``, a service's ``--id``), said before anything is sent."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        refusal = None if value is None else id_refusal(what, value, kind)
        if refusal is not None:
            raise click.BadParameter(refusal, ctx, param)
        return value

    return check


def run_id(default: str) -> Callable[[F], F]:
    """``--run-id``, whose default ``default`` describes."""
    return click.option(
        "--run-id",
        default=None,
        metavar="ID",
        callback=checked_value("run id"),
        help=f"The run's id (its jobs are ID:<step>). Default: {default}.",
    )


def setting_option(setting: Setting, default: Any) -> Callable[[F], F]:
    """The click option of a worker setting (:mod:`scheduler.worker.settings`): its flags, help,
    range or choices from the table, ``default`` as given, and the table's checks on the value."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return None
        if setting.kind in ("text", "names"):
            value = setting.parse(value)
        elif setting.kind == "folders":
            value = tuple(value)
        problem = setting.problem(value)
        if problem is not None:
            raise click.BadParameter(problem, ctx, param)
        return value

    how: dict[str, Any] = {
        "help": setting.help,
        "hidden": setting.hidden,
        "callback": check,
        "show_default": default not in (None, False, ()),
    }
    if setting.required:
        how["required"] = True
    else:
        how["default"] = default
    if setting.kind == "flag":
        how["is_flag"] = True
    elif setting.kind == "int":
        low = None if setting.minimum is None else int(setting.minimum)
        how["type"] = click.IntRange(min=low, min_open=setting.above)
    elif setting.kind == "float":
        how["type"] = FiniteFloat(min=setting.minimum, min_open=setting.above)
    elif setting.kind == "choice":
        how["type"] = click.Choice(setting.choices)
    elif setting.kind == "folders":
        how["type"] = click.Path(file_okay=False)
        how["multiple"] = True
    return click.option(*setting.flags, setting.name, **how)


def log_level_option(func: F) -> F:
    """``--log-level`` of a service (``flows ui``, ``flows scheduler``) as ``flows worker``
    takes it (:mod:`scheduler.worker.settings`): a level :mod:`logging` does not know is a
    usage error, said before anything starts."""
    from scheduler.worker.settings import table

    setting = next(each for each in table() if each.name == "log_level")
    return setting_option(setting, setting.default)(func)


def bad_params(error: ParamError) -> click.BadParameter:
    """The usage error every command that takes ``-p`` gives for params it cannot use (the
    same exit code, 2, and the same words from `flows plan` and `flows run`), saying how to
    give the required params missing."""
    text = "; ".join(error.problems)
    if error.missing:
        them = "it" if len(error.missing) == 1 else "them"
        text += f" (give {them} with " + " ".join(f"-p {n}=..." for n in error.missing) + ")"
    return click.BadParameter(text, param_hint="'-p'")
