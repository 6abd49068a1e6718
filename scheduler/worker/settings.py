"""A worker's settings, declared once: the table ``flows worker``, ``python -m scheduler.worker``
(one pool child) and :class:`~scheduler.worker.pool.WorkerPool` all read.

Each field of :class:`WorkerSettings` carries a :class:`Setting`: its flag, help text, kind and
range (its default is the field's). A child parses its command line with
:meth:`WorkerSettings.from_argv`, the pool writes one with :meth:`WorkerSettings.to_argv`, and
``flows worker`` builds its click options from :func:`table` (in ``flows/cli``: this module
imports no click). Settings marked ``cli=False`` are not offered by ``flows worker``: the pool
sets them for its children. Adding a setting is one field here, plus the code that uses it.
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from scheduler.engine.errors import Given, given_as, given_now
from scheduler.engine.limits import MAX_ID_BYTES, id_fault

if TYPE_CHECKING:
    from scheduler.worker.fetching import Strategy
    from scheduler.worker.runner import Prepare

Kind = Literal["flag", "int", "float", "choice", "text", "names", "folders"]
"""How a setting is written on a command line: ``flag`` (present or not), ``int``, ``float``
(finite), ``choice`` (one of ``choices``), ``text``, ``names`` (a tuple written comma-separated,
``-q etl,emails``) or ``folders`` (a tuple, its flag repeated)."""

_KEY = "setting"  # the key of a field's metadata holding its Setting


class SettingError(ValueError):
    """A value refused for a setting: ``setting`` names it, ``problem`` says why. The message
    names the setting as it was given: the Python API's argument (``queues``), or on a command
    line (:func:`~scheduler.engine.errors.given_as`) its flag (``--queues``)."""

    def __init__(self, setting: Setting, problem: str) -> None:
        super().__init__(f"{setting.called(given_now())}: {problem}")
        self.setting = setting
        self.problem = problem


@dataclass(frozen=True)
class Setting:
    """How one worker setting is given on a command line, and which values it takes."""

    flags: tuple[str, ...]
    help: str
    kind: Kind = "text"
    minimum: float | None = None
    #: The minimum itself is refused (a poll interval must be more than 0).
    above: bool = False
    choices: tuple[str, ...] = ()
    #: Text as typed -> the value (log levels: upper case), for ``text`` settings.
    normalize: Callable[[str], str] | None = None
    #: A further rule: the problem with a value, or None.
    rule: Callable[[Any], str | None] | None = None
    #: Offered by ``flows worker`` (else the pool's to set for its children).
    cli: bool = True
    #: Left out of ``flows worker --help``.
    hidden: bool = False
    # Filled in by table() from the field.
    name: str = ""
    default: Any = None

    @property
    def flag(self) -> str:
        """The long flag (``--threads``)."""
        return self.flags[-1]

    def called(self, given: Given) -> str:
        """The setting's name as it was ``given``: its flag, else its argument's name."""
        return self.flag if given == "flag" else self.name

    @property
    def required(self) -> bool:
        return self.default is MISSING

    def parse(self, text: str) -> Any:
        """One value as typed on a command line (one folder of ``folders``) -> the value.

        Raises ValueError saying what was expected.
        """
        if self.kind == "int":
            try:
                return int(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a whole number") from None
        if self.kind == "float":
            try:
                return float(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a number") from None
        if self.kind == "names":
            return tuple(name.strip() for name in text.split(",") if name.strip())
        return self.normalize(text) if self.normalize else text

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this setting, or None when it is fine."""
        problem = self._kind_problem(value)
        if problem is None and self.rule is not None:
            problem = self.rule(value)
        return problem

    def _kind_problem(self, value: Any) -> str | None:
        if self.kind == "flag":
            return None if isinstance(value, bool) else f"{value!r} is not true or false"
        if self.kind in ("int", "float"):
            number = int if self.kind == "int" else (int, float)
            if isinstance(value, bool) or not isinstance(value, number):
                return f"{value!r} is not a {'whole ' if self.kind == 'int' else ''}number"
            if not math.isfinite(value):
                return f"{value!r} is not a finite number"
            if self.minimum is not None and (
                value < self.minimum or (self.above and value == self.minimum)
            ):
                bound = "more than" if self.above else "at least"
                return f"{value!r} is not {bound} {self.minimum:g}"
            return None
        if self.kind == "choice":
            if value not in self.choices:
                return f"{value!r} is not one of {', '.join(self.choices)}"
            return None
        if self.kind == "text":
            return None if value is None or isinstance(value, str) else f"{value!r} is not text"
        return self._list_problem(value)

    def _list_problem(self, value: Any) -> str | None:
        if isinstance(value, str):
            return f"{value!r} is one text, not a list (give [{value!r}])"
        if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
            return f"{value!r} is not a list of texts"
        if self.kind == "names":
            # Written comma-separated and read back stripped: anything else would change.
            bad = [name for name in value if not name or "," in name or name != name.strip()]
            if bad:
                return f"{bad[0]!r} is not a name (no commas, no surrounding white space)"
        return None

    def argv(self, value: Any) -> list[str]:
        """``value`` on a command line (``--flag=value``: a value starting with ``-`` stays one)."""
        if self.kind == "flag":  # a flag on by default is turned off with --no-<flag>
            if self.default is True:
                return [] if value else [f"--no-{self.flag[2:]}"]
            return [self.flag] if value else []
        if self.kind == "folders":
            return [f"{self.flag}={folder}" for folder in value]
        if self.kind == "names":
            return [f"{self.flag}={','.join(value)}"]
        # str() of a float is its shortest repr, which reads back as the same float.
        return [f"{self.flag}={value}"]


def setting(*flags: str, help: str, **how: Any) -> dict[str, Setting]:
    """The metadata of a field of :class:`WorkerSettings`: its :class:`Setting` (``how``: the
    Setting's other keywords)."""
    return {_KEY: Setting(flags, help, **how)}


def _some_queues(queues: tuple[str, ...]) -> str | None:
    """At least one queue, each a name the engine takes: refused at start, not retried at
    every fetch."""
    if not queues:
        return "give at least one queue"
    for queue in queues:
        fault = id_fault(queue)
        if fault is not None:  # the name shown, unless its size is what is wrong
            size = len(queue.encode("utf-8", "surrogatepass"))
            shown = f": {queue[:40]!r}" if 0 < size <= MAX_ID_BYTES else ""
            return f"a queue name {fault}{shown}"
    return None


def _worker_name(name: str | None) -> str | None:
    """A name the engine takes as a worker's (or none: the default): refused at start, not by
    the engine once a pool's processes register."""
    fault = id_fault(name) if name else None
    if name is None or fault is None:
        return None
    size = len(name.encode("utf-8", "surrogatepass"))
    return f"worker name {name[:40]!r} {fault}" if size <= MAX_ID_BYTES else f"worker name {fault}"


def _hook(spec: str | None) -> str | None:
    """A hook named as ``module:function`` (or none): its form refused at start, not by a pool's
    processes; one that does not import stops the pool (exit 78)."""
    from scheduler.worker.imports import hook_form_problem

    return hook_form_problem(spec) if spec else None  # "" as none: no hook


def _log_level(level: Any) -> str | None:
    if isinstance(level, str) and level in logging.getLevelNamesMapping():
        return None
    return f"{level!r} is not a log level (DEBUG, INFO, WARNING or ERROR)"


class WorkerOptions(TypedDict):
    """The keyword arguments of :class:`~scheduler.worker.worker.Worker` a setting gives."""

    strategy: Strategy
    threads: int
    prefetch: int
    burst: bool
    poll_interval: float
    shutdown_grace: float
    exit_on_stuck: bool
    prepare: Prepare | None


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker process does: its queues, threads, prefetch, hooks and stopping.

    Values are checked when the object is made (:class:`SettingError` names the setting);
    ``queues`` and ``paths`` may be given as any sequence and are kept as tuples.
    """

    queues: tuple[str, ...] = field(
        metadata=setting(
            "-q",
            "--queues",
            help="Comma-separated queues, e.g. etl,emails.",
            kind="names",
            rule=_some_queues,
        )
    )
    # The choices are fetching.Strategy's values.
    strategy: Strategy = field(
        default="ordered",
        metadata=setting(
            "--strategy",
            kind="choice",
            choices=("ordered", "round-robin"),
            help="ordered: drain the first queue before the next; round-robin: one from each "
            "in turn.",
        ),
    )
    threads: int = field(
        default=1,
        metadata=setting("--threads", kind="int", minimum=1, help="Jobs at once per process."),
    )
    prefetch: int = field(
        default=64,
        metadata=setting(
            "--prefetch",
            kind="int",
            minimum=0,
            help="At most this many jobs popped ahead of the free threads while jobs finish within "
            "milliseconds (fewer for slower jobs, none for jobs of 20 ms or more); 0: never.",
        ),
    )
    burst: bool = field(
        default=False,
        metadata=setting(
            "--burst",
            kind="flag",
            help="Exit 0 once no job is ready and none runs (jobs due later, a retry waiting"
            " out its backoff too, are left).",
        ),
    )
    name: str | None = field(
        default=None,
        metadata=setting("--name", rule=_worker_name, help="Worker name (default <host>-<pid>)."),
    )
    shutdown_grace: float = field(
        default=30.0,
        metadata=setting(
            "--shutdown-grace",
            kind="float",
            minimum=0,
            help="Seconds running jobs get to finish after SIGTERM/SIGINT before they are handed "
            "back.",
        ),
    )
    prepare: str | None = field(
        default=None,
        metadata=setting(
            "--prepare",
            hidden=True,
            rule=_hook,
            help="module:function run before each job (flows worker: resolve flow steps' upstream "
            "outputs).",
        ),
    )
    paths: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            "--path",
            kind="folders",
            help="Also import job modules from this folder (repeatable); the working directory "
            "always comes first.",
        ),
    )
    log_level: str = field(
        default="INFO",
        metadata=setting(
            "--log-level",
            normalize=str.upper,
            rule=_log_level,
            help="DEBUG, INFO, WARNING or ERROR.",
        ),
    )
    poll_interval: float = field(
        default=1.0,
        metadata=setting(
            "--poll-interval",
            kind="float",
            minimum=0,
            above=True,
            cli=False,
            help="Seconds an idle worker waits for a job before it asks again.",
        ),
    )
    exit_on_stuck: bool = field(
        default=False,
        metadata=setting(
            "--exit-on-stuck",
            kind="flag",
            cli=False,
            help="Exit after abandoning a job stuck past kill_after (a pool then starts a clean "
            "process).",
        ),
    )

    kill_after: float = field(
        default=10.0,
        metadata=setting(
            "--kill-after",
            kind="float",
            minimum=0,
            cli=False,
            help="Seconds a stopped job's thread gets to return before it is given up on.",
        ),
    )
    lease_seconds: float = field(
        default=5.0,
        metadata=setting(
            "--lease-seconds",
            kind="float",
            minimum=0,
            cli=False,
            help="Length of the worker's liveness lease: the jobs of a worker that died go back "
            "this long after its last renewal (0: no lease; they come back when their locks "
            "expire).",
        ),
    )
    capture_logs: bool = field(
        default=True,
        metadata=setting(
            "--capture-logs",
            kind="flag",
            cli=False,
            help="Store what each job writes as its step log.",
        ),
    )
    wait_for_server: bool = field(
        default=False,
        metadata=setting(
            "--wait-for-server",
            kind="flag",
            cli=False,
            help="At start, wait for a server that is away instead of exiting.",
        ),
    )

    def __post_init__(self) -> None:
        for each in table():
            value = getattr(self, each.name)
            if each.kind in ("names", "folders") and _sequence(value):
                value = tuple(value)
                object.__setattr__(self, each.name, value)  # frozen: only here, while made
            problem = each.problem(value)
            if problem is not None:
                raise SettingError(each, problem)

    def process_name(self, index: int, processes: int) -> str | None:
        """The name of process ``index`` of a pool of ``processes``: this name, with
        ``.<index>`` when there are several (none: each process's default)."""
        return f"{self.name}.{index}" if self.name and processes > 1 else self.name

    def check_processes(self, processes: int) -> None:
        """Refuse (:class:`SettingError`, naming ``--name``) a name the engine takes, but not
        with the ``.<index>`` suffix the last of ``processes`` processes adds to it."""
        last = max(1, processes) - 1
        problem = _worker_name(self.process_name(last, processes))
        if problem is not None:
            name = next(each for each in table() if each.name == "name")
            suffix = f"(with the '.{last}' the last of {processes} processes adds)"
            raise SettingError(name, f"{problem} {suffix}")

    def to_argv(self) -> list[str]:
        """These settings as ``python -m scheduler.worker`` arguments (those not at their default).

        :meth:`from_argv` reads them back equal.
        """
        argv: list[str] = []
        for each in table():
            value = getattr(self, each.name)
            if each.required or value != each.default:
                argv += each.argv(value)
        return argv

    @classmethod
    def from_argv(
        cls, argv: Sequence[str] | None = None, prog: str = "python -m scheduler.worker"
    ) -> WorkerSettings:
        """Parse a command line (default ``sys.argv[1:]``); a bad one exits 2 with the usage."""
        parser = argparse.ArgumentParser(prog=prog, description="Run one worker process.")
        for each in table():
            parser.add_argument(*each.flags, **_argparse_options(each))
        values = vars(parser.parse_args(argv))
        for each in table():
            if each.kind == "folders" and values[each.name] is None:
                values[each.name] = ()
        try:
            with given_as("flag"):
                return cls(**values)
        except SettingError as error:
            parser.error(str(error))

    def worker_options(self) -> WorkerOptions:
        """The :class:`~scheduler.worker.worker.Worker` keywords these settings give (a
        worker also takes the settings themselves: ``Worker(client, settings=settings)``).

        ``prepare`` is imported here: call it after :func:`~scheduler.worker.imports.import_path`
        with ``paths``.
        """
        from scheduler.worker.imports import load_object

        return WorkerOptions(
            strategy=self.strategy,
            threads=self.threads,
            prefetch=self.prefetch,
            burst=self.burst,
            poll_interval=self.poll_interval,
            shutdown_grace=self.shutdown_grace,
            exit_on_stuck=self.exit_on_stuck,
            prepare=load_object(self.prepare) if self.prepare else None,
        )


# The fields a Worker also takes as keywords, overriding its settings' (its `prepare` is a
# function; the others are the process's).
OVERRIDES = frozenset(each.name for each in fields(WorkerSettings)) - {
    "queues",
    "prepare",
    "name",
    "paths",
    "log_level",
}


def overridden(
    settings: WorkerSettings | None, queues: Sequence[str], given: dict[str, Any]
) -> WorkerSettings:
    """``settings`` (default: the defaults, on ``queues``) with ``queues`` and the values of
    ``given`` that are not None instead of their own."""
    values = {name: value for name, value in given.items() if value is not None}
    if queues:
        # One text stays one value, for the settings to refuse ("is not a list of texts"),
        # rather than a queue per character.
        values["queues"] = queues if isinstance(queues, str | bytes) else tuple(queues)
    if settings is None:
        if not queues:
            raise ValueError("a worker needs at least one queue")
        return WorkerSettings(**values)
    return replace(settings, **values) if values else settings


@functools.cache
def table() -> tuple[Setting, ...]:
    """Every setting of :class:`WorkerSettings`, in field order, with its name and default."""
    return tuple(
        replace(each.metadata[_KEY], name=each.name, default=each.default)
        for each in fields(WorkerSettings)
    )


def _sequence(value: Any) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, str | bytes | tuple)


def _argparse_options(each: Setting) -> dict[str, Any]:
    shown = each.default not in (None, False, (), MISSING)
    options: dict[str, Any] = {
        "dest": each.name,
        "help": f"{each.help} (default: {each.default})" if shown else each.help,
    }
    if each.kind == "flag":
        if each.default is True:
            return {**options, "action": argparse.BooleanOptionalAction, "default": True}
        return {**options, "action": "store_true"}

    def convert(text: str) -> Any:
        try:
            value = each.parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        problem = None if each.kind == "folders" else each.problem(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    options["type"] = convert
    if each.choices:
        options["choices"] = each.choices
    if each.kind == "folders":
        options["action"] = "append"  # starts from None: argparse appends to a copy of a list
        options["metavar"] = "DIR"
    elif each.required:
        options["required"] = True
    else:
        options["default"] = each.default
    return options
