"""Bundle the engine's Lua sources and call the engine.

The sources in ``lua/`` are joined into one script (``-- @include`` lines expanded once each, in
first-include order; a missing file or a cycle is refused; each command file's own code in a
``do ... end`` block of its own, its includes before it). The same text is wrapped two ways:

* :func:`qless_bundle` -- for ``EVAL``/``EVALSHA``, the qless calling convention and dialect
  (what any qless client loads: replies, events and semantics as qless-core's);
* :func:`native_bundle` -- the same for ``EVALSHA``, in our native dialect (what :class:`Engine`
  loads on a server without Functions);
* :func:`functions_library` -- a Redis Functions library (native), loaded once with
  ``FUNCTION LOAD``.

The library has two functions: the engine, and its read-only entry (flag ``no-writes``, called
with ``FCALL_RO``) for the commands of ``lua/include/reads.lua``, which the server runs even when
it refuses writes (at maxmemory, a replica, a read-only ACL user).

:class:`Engine` calls whichever the server supports, reloads after ``NOSCRIPT`` or a flushed
function (also inside pipelines), and turns error replies into :mod:`scheduler.engine.errors`
exceptions
(and the server's refusals into :mod:`scheduler.engine.faults` ones).

A library is called by name, and whoever may ``FUNCTION LOAD`` chooses a name's code: before its
first call an :class:`Engine` reads the code of the library it found under the engine's name
(``FUNCTION LIST ... WITHCODE``) and refuses it (:class:`ForeignEngine`) unless it is this
release's, byte for byte. A script is called by the SHA1 of its text, so ``EVALSHA`` needs no
such check. A long-running process calls :meth:`Engine.check_library` now and then: it reads
again only when someone loaded Functions on the server since it last did.
"""

from __future__ import annotations

import copy
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import redis

from scheduler.engine import faults, limits, server_support
from scheduler.engine.connections import (
    FAILOVER_WAIT,
    REPLAYABLE_WRITES,
    Durability,
    Failover,
    Route,
    as_cluster_error,
    needs_failover,
    not_run,
)
from scheduler.engine.direct_calls import DirectCalls, usable
from scheduler.engine.errors import (
    EngineError,
    FlowsError,
    ForeignEngine,
    InvalidArgument,
    shorten,
    translate,
)

_INCLUDE = re.compile(r"^--\s*@include\s+(\S+)\s*$")
ENTRY = "api"
COMMANDS = "commands/"
READS_FILE = "include/reads.lua"
_READS_BLOCK = re.compile(r"^local Reads = \{(.*?)^\}", re.DOTALL | re.MULTILINE)
#: Seconds between two looks of :meth:`Engine.check_library` (a long-running process's).
LIBRARY_CHECK_EVERY = 5.0
#: The same for a user the server does not let read its command statistics: each look then
#: reads the library's code (~530 KB), so less often.
LIBRARY_CHECK_WITHOUT_STATS = 60.0
#: The commands that put code under a library's name (``FUNCTION LOAD [REPLACE]``, ``FUNCTION
#: RESTORE``), whose counts of calls in ``INFO commandstats`` tell that one ran.
_CODE_WRITES = ("function|load", "function|restore")


class BundleError(FlowsError):
    """The Lua sources could not be bundled (missing include or include cycle)."""


def lua_dir() -> Path:
    """Where the Lua sources are: inside the installed wheel, else the source checkout."""
    package = Path(__file__).resolve().parents[1]  # scheduler/: the wheel puts them in _lua
    for candidate in (package / "_lua", package.parent / "lua"):
        if (candidate / f"{ENTRY}.lua").is_file():
            return candidate
    raise BundleError(f"the engine's Lua sources are missing (looked in {package / '_lua'})")


def join_includes(root: Path, entry: str = ENTRY) -> str:
    """Return ``entry`` with every ``-- @include`` expanded once, depth first."""
    seen: set[str] = set()
    out: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in stack:
            raise BundleError("include cycle: " + " -> ".join((*stack, name)))
        if name in seen:
            return
        path = root / f"{name}.lua" if "/" in name else root / "include" / f"{name}.lua"
        if name == entry:
            path = root / f"{name}.lua"
        if not path.is_file():
            where = f" (included from {stack[-1]})" if stack else ""
            raise BundleError(f"missing Lua include {name!r}{where}: no file {path}")
        seen.add(name)
        # A command's own lines stand in a `do ... end` block: its local helpers end with it, so
        # the joined main chunk stays under Lua's 200 active locals however many commands there
        # are. What it includes (shared code, used by later commands too) is emitted before it.
        command = name.startswith(COMMANDS)
        body: list[str] = [] if command else out
        for line in path.read_text().splitlines():
            match = _INCLUDE.match(line)
            if match:
                visit(match.group(1), (*stack, name))
            else:
                body.append(line)
        if command:
            out.extend([f"do -- {name}", *body, f"end -- {name}"])

    visit(entry, ())
    return "\n".join(out) + "\n"


@cache
def engine_source() -> str:
    """The joined engine, without the EVAL or Functions wrapper."""
    return join_includes(lua_dir())


@cache
def source_hash() -> str:
    # Cached: every engine call names the versioned function, and hashing ~200 KB costs ~90 µs.
    return hashlib.sha1(engine_source().encode()).hexdigest()[:12]


@cache
def read_commands() -> frozenset[str]:
    """The engine commands that only read, as ``lua/include/reads.lua`` lists them."""
    match = _READS_BLOCK.search((lua_dir() / READS_FILE).read_text())
    if match is None:
        raise BundleError(f"no list of read-only commands in {lua_dir() / READS_FILE}")
    return frozenset(re.findall(r"\['([a-z.]+)'\]", match.group(1)))


def qless_bundle() -> str:
    """The qless-compatible script: ``EVALSHA <sha> <0|1> [<prefix>] <command> <now> <args...>``."""
    return engine_source() + "return Engine.dispatch(KEYS, ARGV)\n"


def native_bundle() -> str:
    """The same engine for ``EVALSHA`` in the native dialect: its own text, so its own SHA."""
    return engine_source() + "return Engine.dispatch(KEYS, ARGV, true)\n"


@cache
def function_name() -> str:
    """Versioned, so clients of two releases can share one server without replacing each other.
    Cached as :func:`source_hash` is: every engine call names it."""
    return f"qless_{source_hash()}"


@cache
def read_function_name() -> str:
    """The read-only entry (``no-writes``): only the commands of :func:`read_commands`."""
    return f"qless_ro_{source_hash()}"


def library_name() -> str:
    return f"flows_{source_hash()}"


def functions_library() -> str:
    """The same engine as a Redis Functions library: :func:`function_name` and its read-only
    entry :func:`read_function_name`."""
    header, trailer = _library_frame()
    return header + engine_source() + trailer


def _library_frame() -> tuple[str, str]:
    """What :func:`functions_library` puts before and after the engine's source."""
    return (
        f"#!lua name={library_name()}\n",
        f"redis.register_function('{function_name()}', "
        "function(keys, args) return Engine.dispatch(keys, args, true) end)\n"
        + f"redis.register_function{{function_name='{read_function_name()}', "
        "callback=function(keys, args) return Engine.dispatch_read(keys, args) end, "
        "flags={'no-writes'}}\n",
    )


def is_functions_library(code: object) -> bool:
    """Whether ``code`` is exactly :func:`functions_library`, compared in place (building the
    ~530 KB text to compare costs about a millisecond, this some microseconds)."""
    if not isinstance(code, str):
        return False
    header, trailer = _library_frame()
    source = engine_source()
    return (
        len(code) == len(header) + len(source) + len(trailer)
        and code.startswith(header)
        and code.startswith(source, len(header))
        and code.endswith(trailer)
    )


def _is_missing_script(error: BaseException) -> bool:
    text = str(error)
    return isinstance(error, redis.exceptions.NoScriptError) or "Function not found" in text


def _fields(entry: Any) -> dict[str, Any]:
    """One FUNCTION LIST entry (a library, or one of its functions) as a dict: RESP2 sends a
    flat list of names and values, RESP3 a map."""
    if isinstance(entry, dict):
        pairs = entry
    else:
        items = list(entry)
        pairs = dict(zip(items[::2], items[1::2], strict=False))
    return {_text(name): value for name, value in pairs.items()}


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _library_of(entry: Any) -> str | None:
    """The library name in one FUNCTION LIST entry."""
    name: str | None = _text(_fields(entry).get("library_name"))
    return name


def _listed_library(listed: Any) -> dict[str, Any] | None:
    """The entry of :func:`library_name` in a FUNCTION LIST reply (a pattern lists more)."""
    for entry in listed or []:
        if _library_of(entry) == library_name():
            return _fields(entry)
    return None


def _owner_of_functions(listed: Any) -> tuple[str, str] | None:
    """(library, function) of the first library in a whole FUNCTION LIST reply that registers
    one of the engine's function names."""
    for entry in listed or []:
        fields = _fields(entry)
        names = {_text(_fields(f).get("name")) for f in fields.get("functions") or []}
        for name in (function_name(), read_function_name()):
            if name in names:
                return str(_text(fields.get("library_name"))), name
    return None


def _code_writes(target: redis.Redis) -> int | None:
    """How many times the server ran a command of :data:`_CODE_WRITES` since it started or its
    statistics were reset (``INFO commandstats``, under 1 KB); None when this user may not ask."""
    try:
        stats = target.info("commandstats")
    except redis.ResponseError:
        return None
    return sum(int((stats.get(f"cmdstat_{name}") or {}).get("calls", 0)) for name in _CODE_WRITES)


def _is_refused(error: redis.ResponseError) -> bool:
    return isinstance(error, redis.exceptions.NoPermissionError) or str(error).startswith("NOPERM")


class Engine:
    """Calls the engine in one namespace over a redis-py client (``decode_responses=True``).

    ``prefix`` is the key prefix (``ql:`` when None, the qless layout). ``use_functions`` picks the
    Functions library (None: whenever the server has ``FUNCTION``).

    On a Redis Cluster (a ``RedisCluster`` client) the prefix must carry a hash tag, and each
    call goes straight to the node owning its slot. On a cluster or a Sentinel-managed master,
    calls ride out a failover for up to ``failover_wait`` seconds
    (:class:`scheduler.engine.connections.Failover`).
    ``durability``: after each write, wait for replicas to acknowledge it (``WAIT``).
    """

    def __init__(
        self,
        client: redis.Redis,
        prefix: str | None = None,
        use_functions: bool | None = None,
        *,
        durability: Durability | None = None,
        failover_wait: float = FAILOVER_WAIT,
    ) -> None:
        self.redis = client
        self.prefix = prefix
        self._keys: list[str] = [] if prefix is None else [prefix]
        self._use_functions = use_functions
        self._sha: str | None = None
        self._loaded = False
        self._reads = read_commands()
        self._replayable = self._reads | REPLAYABLE_WRITES
        self.route = Route(client, prefix)
        self.failover = Failover(self.route, failover_wait) if needs_failover(client) else None
        self.durability = durability
        # Calls on a single server go straight over kept connections (engine/direct_calls.py).
        self._direct = DirectCalls(client) if self.failover is None and usable(client) else None
        # check_library: when to look next (monotonic), and the code writes its last look saw.
        self._look_at = 0.0
        self._code_writes_seen: tuple[int | None, ...] | None = None
        self._looking = threading.Lock()
        # The refusal of the library last read (ForeignEngine), when it was made, and the code
        # writes seen then: it stands for the calls after it until those move.
        self._refusal: tuple[ForeignEngine, float, tuple[int | None, ...]] | None = None

    @property
    def uses_functions(self) -> bool | None:
        """Whether the engine is called as a Functions library (None: not known before a load)."""
        return self._use_functions

    @property
    def script_sha(self) -> str | None:
        """The SHA1 the engine's script is called by where the server has no Functions."""
        return self._sha

    @property
    def key_prefix(self) -> str:
        """The prefix of the namespace's keys (qless's ``ql:`` when none was given)."""
        return "ql:" if self.prefix is None else self.prefix

    # -- loading ---------------------------------------------------------------------------

    def _listed(self, target: redis.Redis) -> Any:
        """The server's entry of the engine's library with its code (FUNCTION LIST ... WITHCODE),
        in one round trip that also tells whether Functions are used: None when they are not
        (the server has none, or the user may not list them: the script is used instead)."""
        if self._use_functions is False:
            return None
        command = ("FUNCTION", "LIST", "LIBRARYNAME", library_name(), "WITHCODE")
        try:
            listed = target.execute_command(*command)  # type: ignore[no-untyped-call]
        except redis.ResponseError:
            if self._use_functions:
                raise
            self._use_functions = False
            return None
        self._use_functions = True
        return listed or []

    def _check_code(self, target: redis.Redis, library: dict[str, Any]) -> None:
        """Refuse the library found under the engine's name unless its code is the engine's."""
        if not is_functions_library(_text(library.get("library_code"))):
            raise ForeignEngine(
                f"{faults.where(target, self.prefix)}: the Functions library {library_name()}"
                " there is not this release's engine (its code differs), so it was not run and"
                " nothing was done. A Redis user allowed FUNCTION LOAD put it there: find out"
                f" who, then an operator deletes it (FUNCTION DELETE {library_name()}) and runs"
                " `flows engine load`"
            )

    def _foreign_functions(self, target: redis.Redis) -> ForeignEngine | None:
        """The refusal when another library registers one of the engine's function names."""
        owner = _owner_of_functions(target.execute_command("FUNCTION", "LIST"))  # type: ignore[no-untyped-call]
        if owner is None:
            return None
        library, function = owner
        return ForeignEngine(
            f"{faults.where(target, self.prefix)}: the function {function}, by which this"
            f" release's engine is called, belongs to the Functions library {shorten(library, 80)}"
            f" there, not to the engine ({library_name()}), so it was not run and nothing was"
            " done. A Redis user allowed FUNCTION LOAD put it there: find out who, then an"
            f" operator deletes it (FUNCTION DELETE {shorten(library, 80)}) and runs"
            " `flows engine load`"
        )

    def _not_loadable(self, target: redis.Redis) -> Exception:
        """FUNCTION LOAD refused to this user (no ``function|load``: docs/pages/acl.md)."""
        at = faults.where(target, self.prefix)
        return faults.PermissionDenied(
            f"{at}: this release's engine (the Functions library {library_name()}) is not"
            f" loaded there, and ACL user {faults.user_of(target)!r} may not load it (Redis"
            " command 'function|load'): an operator loads it once per release with `flows"
            ' engine load` (see "Least-privilege Redis users" in the docs)',
            where=at,
            command="function|load",
        )

    def load(self) -> bool:
        """Make sure the server has this version of the engine (idempotent, cheap after once),
        and that the library under its name is exactly it (:class:`ForeignEngine` if not).
        True if this call loaded it (on some master), False if it was there already.

        On a cluster, every master gets it (a replica copies its master's). Once refused, the
        refusal stands without reading the code again (~530 KB) for :data:`LIBRARY_CHECK_EVERY`
        seconds, or until the server's counts of code writes move (someone loaded Functions:
        one look a call, under 1 KB) where this user may read them."""
        self._raise_standing_refusal()
        try:
            if self.failover is None:
                loaded = self._load_on(self.redis)
            else:
                # Loading twice is harmless (an existing library is kept): a lost reply is resent.
                loaded = self.failover.run("load", self._load_everywhere, replayable=True)
        except ForeignEngine as refusal:
            # Counted after the read, not before, which would cost every first call a round
            # trip: a load in between is seen when the refusal expires.
            try:
                writes = self._code_writes_now()
            except redis.RedisError:  # the refusal is what to say: stands as if not counted
                writes = (None,)
            self._refusal = (refusal, time.monotonic(), writes)
            raise
        self._refusal = None
        self._loaded = True
        return loaded

    def _code_writes_now(self) -> tuple[int | None, ...]:
        targets = [self.redis] if self.failover is None else self.route.primaries()
        return tuple(_code_writes(target) for target in targets)

    def _raise_standing_refusal(self) -> None:
        if self._refusal is None:
            return
        refusal, made, writes = self._refusal
        if time.monotonic() - made < LIBRARY_CHECK_EVERY and (
            None in writes or self._code_writes_now() == writes
        ):
            raise ForeignEngine(*refusal.args)

    def check_library(self) -> None:
        """Check again, in a long-running process, that the library under the engine's name is
        this release's (:class:`ForeignEngine` if not): someone allowed ``FUNCTION LOAD`` may
        have swapped it since the first call checked it (``FUNCTION LOAD REPLACE``).

        Does nothing but every :data:`LIBRARY_CHECK_EVERY` seconds, and then reads the
        server's counts of code writes (``INFO commandstats``, well under 1 KB); only when they
        changed since the last look (someone loaded or restored Functions, the server
        restarted, a failover) is the library's code read and compared again, as before the
        first call. Once it is refused, every call of this engine is (each reads it again), so
        none runs it. Without the right to ``INFO`` the code is read every
        :data:`LIBRARY_CHECK_WITHOUT_STATS` seconds. Thread-safe: a look in progress in
        another thread is not waited for."""
        if not self._use_functions or time.monotonic() < self._look_at:
            return
        if not self._looking.acquire(blocking=False):
            return
        try:
            if time.monotonic() < self._look_at:
                return
            try:
                seen = self._code_writes_now()
                if None in seen or seen != self._code_writes_seen:
                    self._loaded = False  # meanwhile, a call in another thread checks it too
                    self.load()
                    self._code_writes_seen = seen
            except redis.RedisError as error:  # worded as an engine call's fault is
                fault = self.fault(error)
                if fault is error:
                    raise
                raise fault from error
            every = LIBRARY_CHECK_WITHOUT_STATS if None in seen else LIBRARY_CHECK_EVERY
            self._look_at = time.monotonic() + every
        finally:
            self._looking.release()

    def _load_everywhere(self) -> bool:
        return any([self._load_on(target) for target in self.route.primaries()])

    def _load_on(self, target: redis.Redis) -> bool:
        listed = self._listed(target)
        if listed is None:
            try:
                self._sha = target.script_load(native_bundle())
            except redis.ResponseError as error:
                if server_support.is_unknown_command(error):
                    raise server_support.no_loader(target) from None
                raise
            return False  # content-addressed: the SHA names this text and no other
        # Looked at first so that a user allowed FCALL but not FUNCTION LOAD (a read-only
        # viewer, see docs/pages/acl.md) can use a library an operator loaded.
        library = _listed_library(listed)
        if library is not None:
            self._check_code(target, library)
            return False
        try:
            target.execute_command("FUNCTION", "LOAD", functions_library())  # type: ignore[no-untyped-call]
        except redis.ResponseError as error:
            if _is_refused(error):
                raise self._not_loadable(target) from None
            if "already exists" not in str(error):
                raise
            # Another client loaded it meanwhile, or another library holds one of its
            # function names (which FCALL would then run): look again before any call.
            library = _listed_library(self._listed(target))
            if library is None:
                raise self._foreign_functions(target) or error from None
            self._check_code(target, library)
            return False
        return True

    def _args(self, command: str, args: Sequence[Any], now: float | str) -> list[Any]:
        return [len(self._keys), *self._keys, command, now, *args]

    def _call_args(self, command: str, argv: list[Any]) -> tuple[Any, ...]:
        if self._use_functions:
            if command in self._reads:  # runs where writes are refused (full server, replica)
                return ("FCALL_RO", read_function_name(), *argv)
            return ("FCALL", function_name(), *argv)
        return ("EVALSHA", self._sha, *argv)

    def fault(self, error: redis.RedisError, command: str | None = None) -> Exception:
        """``error`` as a :mod:`scheduler.engine.faults` class where it is a fault of the server or
        the connection (naming the server and namespace), else as it is."""
        return faults.translate(error, self.redis, self.key_prefix, command) or error

    def server_time(self) -> float:
        """The server's clock (``TIME``) in epoch seconds: every process agrees on it."""
        try:
            seconds, micros = self.redis.time()
        except redis.RedisError as error:
            fault = self.fault(error, "time")
            if fault is error:
                raise
            raise fault from error
        return float(seconds) + float(micros) / 1_000_000

    def command(self, *args: Any, writes: bool = False) -> Any:
        """A plain Redis command (not an engine call) on this engine's server, sent as engine
        calls are (over a kept connection where it can: engine/direct_calls.py); redis-py's
        exceptions as ``execute_command`` raises them. Our worker waits on its inbox this way.

        ``writes``: the command changes data (``BLPOP``), so with ``durability`` it is followed
        by ``WAIT`` as an engine write is, and raises :class:`NotReplicated` when too few
        replicas have it: a job taken from an inbox on a master cut off from its replicas is not
        run (the engine gives it back once the worker's lease says it does not hold it)."""
        if writes and self.durability is not None:
            pipe = self.route.target().pipeline(transaction=False)
            pipe.execute_command(*args)  # type: ignore[no-untyped-call]
            wait = ("WAIT", self.durability.replicas, int(self.durability.timeout * 1000))
            pipe.execute_command(*wait)  # type: ignore[no-untyped-call]
            reply, acknowledged = pipe.execute(raise_on_error=False)
            if isinstance(reply, Exception):
                raise reply
            if reply is not None:  # nothing taken, nothing to lose
                self.durability.check(acknowledged, str(args[0]))
            return reply
        if self._direct is not None:
            try:
                return self._direct.call(*args)
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # sent again below, with redis-py's retry policy, as it would resend it
        return self.redis.execute_command(*args)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Give back the connections kept for direct calls (the client stays usable)."""
        if self._direct is not None:
            self._direct.close()

    # -- calling ---------------------------------------------------------------------------

    def call(self, command: str, *args: Any, now: float | str = "") -> Any:
        """Run one engine command and return its reply; engine errors raise their exception,
        faults of the server or the connection a :mod:`scheduler.engine.faults` class."""
        try:
            return self._call(command, args, now)
        except redis.RedisError as error:
            if isinstance(error, redis.DataError):
                _check_encodable(command, args, now)
            fault = self.fault(error, command)
            if fault is error:
                raise
            raise fault from error
        except (TypeError, UnicodeEncodeError):
            _check_encodable(command, args, now)
            raise

    def _call(self, command: str, args: Sequence[Any], now: float | str) -> Any:
        if not self._loaded:
            self.load()
        argv = self._args(command, args, now)
        if self.failover is None:
            return self._call_once(command, argv)
        return self.failover.run(
            command,
            lambda: self._call_once(command, argv),
            replayable=command in self._replayable,
        )

    def _call_once(self, command: str, argv: list[Any]) -> Any:
        try:
            return self._send_once(command, argv)
        except redis.ResponseError as error:
            if _is_missing_script(error):
                self.load()
                try:
                    return self._send_once(command, argv)
                except redis.ResponseError as again:
                    error = again
            if not_run(error):
                raise  # MOVED, CLUSTERDOWN, READONLY...: Failover retries it
            engine_error = translate(error, command)
            # An engine bug (INTERNAL) or a bare server error may be a command it lacks.
            bare = engine_error is None or type(engine_error) is EngineError
            if bare and server_support.is_unknown_command(error):
                raise self._lacking(command, error) from None
            if engine_error is None:
                raise
            raise engine_error from None

    def _lacking(self, command: str, error: redis.ResponseError) -> FlowsError:
        """The server answered "unknown command" to a command the engine sent or its Lua
        called: which one it lacks, named with the server's version."""
        sent = server_support.sent_command(error)
        used = {sent} if sent else server_support.engine_commands(engine_source())
        return server_support.lacking(self.route.target(), used, command)

    def _send_once(self, command: str, argv: list[Any]) -> Any:
        target = self.route.target()
        if self.durability is not None and command not in self._reads:
            return self._send_durably(target, command, argv, self.durability)
        call = self._call_args(command, argv)
        if self._direct is not None and target is self.redis:
            try:
                return self._direct.call(*call)
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # sent again below, with redis-py's retry policy, as it would resend it
        return target.execute_command(*call)  # type: ignore[no-untyped-call]

    def _send_durably(
        self, target: redis.Redis, command: str, argv: list[Any], durability: Durability
    ) -> Any:
        """The call and ``WAIT`` in one round trip on one connection (WAIT counts the writes
        of its own connection). When too few replicas acknowledge it in time, ``WAIT`` is
        asked again on the same connection for up to ``durability.reconcile`` seconds: a
        replica that lagged, or a partition healed before any failover, lets the write be
        acknowledged after all, so the caller learns it happened instead of being told it may
        not have (and seeing it run later). A connection cut meanwhile (Sentinel announced a
        new master) ends the wait: the outcome stays unknown."""
        pool = target.connection_pool
        connection: Any = pool.get_connection()  # redis-py's Connection is untyped
        wait = ("WAIT", durability.replicas, int(durability.timeout * 1000))
        try:
            connection.send_packed_command(
                connection.pack_commands([self._call_args(command, argv), wait])
            )
            reply: Any
            try:
                reply = connection.read_response()
            except redis.ResponseError as error:
                reply = error
            acknowledged = _read_acknowledged(connection)
            deadline = time.monotonic() + durability.reconcile
            while (
                not isinstance(reply, Exception)
                and not isinstance(acknowledged, Exception)
                and int(acknowledged) < durability.replicas
                and time.monotonic() < deadline
            ):
                connection.send_command(*wait)
                acknowledged = _read_acknowledged(connection)
        except BaseException:
            connection.disconnect()
            raise
        finally:
            pool.release(connection)
        if isinstance(reply, Exception):
            raise reply
        durability.check(acknowledged, command)
        return reply

    def with_durability(self, durability: Durability) -> Engine:
        """This engine (same server, namespace and loaded scripts) waiting for replicas after
        each write."""
        durable = copy.copy(self)
        durable.durability = durability
        return durable

    def pipeline(self) -> EnginePipeline:
        """Batch many engine calls in one round trip (not a transaction)."""
        if not self._loaded:
            try:
                self.load()
            except redis.RedisError as error:
                raise faults.translate(error, self.redis, self.key_prefix) or error from error
        return EnginePipeline(self)


def _read_acknowledged(connection: Any) -> Any:
    """WAIT's reply: the count, or the error that took its place (WAIT refused or unblocked:
    the server became a replica, fenced or demoted; :meth:`Durability.check` counts it 0)."""
    try:
        return connection.read_response()
    except redis.ResponseError as error:
        return error


def _check_encodable(command: str, args: Sequence[Any], now: Any) -> None:
    """Raise :class:`InvalidArgument` naming the first of a call's arguments that Redis cannot
    carry (None, a list, a dict, a bool; text with a lone surrogate, which is not UTF-8): what
    a caller gave where text or a number belongs, which redis-py refuses with a ``TypeError``,
    ``DataError`` or ``UnicodeEncodeError`` that names neither the command nor the value.
    Nothing was sent. Called only once such an error was raised."""
    for position, value in [("now", now), *enumerate(args, 1)]:
        where = "now" if position == "now" else f"argument {position}"
        if isinstance(value, bool) or not isinstance(value, str | bytes | int | float):
            raise InvalidArgument(
                f"{limits.display(command)}(): {where} is not text or a number:"
                f" {type(value).__name__} {shorten(repr(value), 60)}",
                command=command,
            )
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidArgument(
                    f"{limits.display(command)}(): {where} is not valid UTF-8 text (it holds a"
                    f" lone surrogate): {shorten(repr(value), 60)}",
                    command=command,
                ) from None


class EnginePipeline:
    """Queues engine calls; :meth:`execute` sends them in one round trip.

    Results come back in order; a refused call's slot holds its exception instead of raising,
    so one bad job in a batch does not hide the others' results.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._calls: list[tuple[str, list[Any]]] = []
        self.meanwhile: Callable[[], None] | None = None
        """Work to do while the server runs the next batch, once, between its send and its
        replies. It must not raise, and may not run at all (only the direct path has that gap):
        work done ahead on a guess, such as the next tick's run."""

    def call(self, command: str, *args: Any, now: float | str = "") -> EnginePipeline:
        """Queue one engine command (as :meth:`Engine.call` takes it); returns the pipeline."""
        self._calls.append((command, self.engine._args(command, args, now)))
        return self

    def read(self, *args: Any) -> EnginePipeline:
        """A plain Redis read (of the namespace's keys, say) in the same round trip, after the
        calls queued before it; its slot holds redis-py's reply."""
        self._calls.append(("", list(args)))
        return self

    def __len__(self) -> int:
        return len(self._calls)

    def _run(self, calls: Iterable[tuple[str, list[Any]]]) -> list[Any]:
        engine = self.engine
        calls = list(calls)
        target = engine.route.target()
        if engine._direct is not None and target is engine.redis and engine.durability is None:
            # One round trip without redis-py's pipeline machinery (engine.direct_calls), which
            # costs a small batch several times its own round trip.
            batch = [engine._call_args(c, argv) if c else tuple(argv) for c, argv in calls]
            meanwhile, self.meanwhile = self.meanwhile, None
            try:
                return engine._direct.call_many(batch, meanwhile)
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # sent again below: redis-py's retry policy resends a whole pipeline too
        pipe = target.pipeline(transaction=False)
        names = []
        for command, argv in calls:
            if command:
                pipe.execute_command(*engine._call_args(command, argv))  # type: ignore[no-untyped-call]
                names.append(command)
            else:
                pipe.execute_command(*argv)  # type: ignore[no-untyped-call]
        durability = engine.durability
        if durability is not None and not all(name in engine._reads for name in names):
            wait = ("WAIT", durability.replicas, int(durability.timeout * 1000))
            pipe.execute_command(*wait)  # type: ignore[no-untyped-call]
            *results, acknowledged = pipe.execute(raise_on_error=False)
            if isinstance(acknowledged, Exception):
                # WAIT refused or unblocked: the server became a replica (fenced or demoted).
                # Calls it refused say so (READONLY: a failover follows it); calls that ran
                # are acknowledged by no replica (NotReplicated).
                refused = [r for r in results if isinstance(r, redis.ReadOnlyError)]
                if refused:
                    raise refused[0]
            durability.check(acknowledged, names[0] if len(set(names)) == 1 else "pipeline")
            return results
        return list(pipe.execute(raise_on_error=False))

    def _run_through_failover(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        """Run the batch; calls a failover refused (they did not run) go again until it ends."""
        failover = self.engine.failover
        if failover is None:
            return self._run(calls)
        label = calls[0][0] if len({c for c, _ in calls}) == 1 else "pipeline"
        replayable = all(command in self.engine._replayable for command, _ in calls)
        results = failover.run(label, lambda: self._run(calls), replayable=replayable)
        deadline = time.monotonic() + failover.wait
        pause = 0.05
        while True:
            refused = [i for i, r in enumerate(results) if isinstance(r, Exception) and not_run(r)]
            if not refused or time.monotonic() >= deadline:
                return results
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
            self.engine.route.refresh()
            again = [calls[i] for i in refused]
            rerun = failover.run(label, lambda: self._run(again), replayable=replayable)  # noqa: B023
            for i, result in zip(refused, rerun, strict=True):
                results[i] = result

    def execute(self) -> list[Any]:
        """Send the queued calls in one round trip: their replies in order, a refused call's
        exception in its place; faults of the server or the connection are raised."""
        try:
            return self._execute()
        except redis.RedisError as error:
            fault = self.engine.fault(error)
            if fault is error:
                raise
            raise fault from error

    def _execute(self) -> list[Any]:
        calls, self._calls = self._calls, []
        if not calls:
            return []
        results = self._run_through_failover(calls)
        missing = [
            i for i, r in enumerate(results) if isinstance(r, Exception) and _is_missing_script(r)
        ]
        if missing:
            # Those calls never ran (the script was gone), so sending them again is safe; the
            # plain reads after the first of them go again too, to see what those calls wrote.
            self.engine.load()
            again = sorted(
                {*missing, *(i for i, c in enumerate(calls) if not c[0] and i > missing[0])}
            )
            for i, result in zip(again, self._run(calls[i] for i in again), strict=True):
                results[i] = result
        out: list[Any] = []
        for (command, _), result in zip(calls, results, strict=True):
            if command and isinstance(result, redis.ResponseError):
                if not_run(result):  # a failover that outlasted the wait
                    result = as_cluster_error(result, command)
                else:
                    result = translate(result, command) or self.engine.fault(result, command)
            out.append(result)
        return out


__all__ = [
    "BundleError",
    "Engine",
    "EngineError",
    "EnginePipeline",
    "ForeignEngine",
    "engine_source",
    "functions_library",
    "native_bundle",
    "qless_bundle",
    "read_commands",
    "read_function_name",
]
