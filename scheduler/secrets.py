"""Secrets by name, resolved where they are used (a worker, the notifications' sender), never
stored in Redis.

A name is looked up, in order, in an env file given to the process (``--env-file``: ``NAME=value``
lines), the process's environment, and the secrets folders: ``$FLOWS_SECRETS_DIR`` (when set) and
``/run/secrets`` (where Docker and Kubernetes mount them), a file named after the secret whose
text, without its final newline, is the value.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, quote_plus

NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_DIR: Final = Path("/run/secrets")
MASK: Final = "***"
MIN_VALUE: Final = 3
"""A shorter value is not masked: it would mask everything."""
MIN_PIECE: Final = 8
"""A piece of a value (a line of it, its base64 text at an offset) is masked from this length."""
MAX_BYTES: Final = 64 * 1024


class MissingSecret(LookupError):
    """A secret a flow names is found nowhere: the message says where it was looked for."""


class EnvFileError(ValueError):
    """An env file that cannot be read; the message names the file and the line."""


def read_env_file(path: Path) -> dict[str, str]:
    """``NAME=value`` lines (``#`` comments, blank lines, ``export NAME=...``, quoted values)."""
    try:
        content = path.read_bytes()
    except OSError as error:
        raise EnvFileError(f"cannot read env file {path}: {error.strerror or error}") from None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as error:  # said as a line's problem, not in the codec's words
        at = content.count(b"\n", 0, error.start) + 1
        raise EnvFileError(f"{path}:{at}: not UTF-8 text (byte {error.start})") from None
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not NAME.match(name):
            raise EnvFileError(f"{path}:{number}: expected NAME=value")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def default_dirs(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    environ = os.environ if environ is None else environ
    configured = environ.get("FLOWS_SECRETS_DIR")
    return (Path(configured), DEFAULT_DIR) if configured else (DEFAULT_DIR,)


log = logging.getLogger("flows.secrets")


def file_stamp(path: Path) -> tuple[int, int] | None:
    """What tells that a file changed: its modification time and size (None: unreadable)."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


class Secrets:
    """Where this process finds secrets: ``values`` (an env file's), the environment, folders.

    Made from an env file (:meth:`from_env_file`), it reads the file again when it changes, so
    a rotated secret is used without a restart (as the secrets folders' files are read at each
    look); a changed file that no longer reads keeps the values read last, with a warning."""

    def __init__(
        self,
        values: Mapping[str, str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        dirs: Sequence[Path] | None = None,
        env_file: Path | None = None,
    ) -> None:
        self.values = dict(values or {})
        self.environ = os.environ if environ is None else environ
        self.dirs = tuple(dirs) if dirs is not None else default_dirs(self.environ)
        self.env_file = env_file
        self._read_at = file_stamp(env_file) if env_file is not None else None
        self._reading = threading.Lock()

    @classmethod
    def from_env_file(cls, path: Path | None) -> Secrets:
        """The secrets of ``path`` (checked now: a bad file is an :class:`EnvFileError`), the
        environment and the folders."""
        if path is None:
            return cls()
        return cls(read_env_file(path), env_file=path)

    def _reread(self) -> None:
        """Read the env file again if it changed since it was read (a stat per look)."""
        if self.env_file is None:
            return
        stamp = file_stamp(self.env_file)
        if stamp == self._read_at or stamp is None:
            return  # unchanged, or gone for a moment (a rotation's rename): keep what was read
        with self._reading:
            if stamp == self._read_at:
                return
            self._read_at = stamp
            try:
                self.values = read_env_file(self.env_file)
            except EnvFileError as error:
                log.warning("%s; the values read before are kept", error)

    def get(self, name: str) -> str | None:
        if not NAME.match(name):
            return None
        self._reread()
        if name in self.values:
            return self.values[name]
        if name in self.environ:
            return self.environ[name]
        for folder in self.dirs:
            path = folder / name
            try:
                if path.is_file():
                    data = path.read_bytes()[:MAX_BYTES].decode("utf-8", "replace")
                    return data[:-1] if data.endswith("\n") else data
            except OSError:
                continue
        return None

    def resolve(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise MissingSecret(f"secret {name} not found: not in {self.places()}")
        return value

    def places(self) -> str:
        """Where a name is looked for, in order, in words: the env file this process was given
        (by its path; none given, none named), its environment, the secrets folders."""
        places = []
        if self.env_file is not None:
            places.append(f"the env file {self.env_file}")
        elif self.values:
            places.append("the values given")
        places.append("the environment")
        places.extend(str(folder) for folder in self.dirs)
        return ", ".join(places[:-1]) + " or " + places[-1] if len(places) > 1 else places[0]

    def resolve_all(self, names: Iterable[str]) -> dict[str, str]:
        return {name: self.resolve(name) for name in names}


def mask(text: str, values: Iterable[str]) -> str:
    """``text`` with every secret value replaced by ``***`` (longest first, so a value containing
    another is masked whole; values under 3 characters are left: they would mask everything)."""
    for value in sorted({v for v in values if len(v) >= MIN_VALUE}, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


# -- this process's secrets: where they come from, and the values to mask ------------------------

ENV_FILE_VARIABLE: Final = "FLOWS_ENV_FILE"
"""The env file of this process and its children (``flows worker --env-file`` sets it)."""

_lock = threading.Lock()
_store: Secrets | None = None
# The index below is only added to, in place, under _lock (readers, on every line, read it
# without: a form half indexed for a moment is one of a value not handed to a step yet).
_known: tuple[str, ...] = ()  # every form of every value remembered, the longest first
_values: set[str] = set()  # the values remembered
_indexed: set[str] = set()  # the forms remembered
# Every MIN_PIECE characters of a form longer than that: a line whose start or end is none of
# them holds no part of a split value, which one set lookup tells (masking is on every line).
_grams: set[str] = set()
# Where a line break may split a value (or a form) of MIN_PIECE characters or more into a part
# shorter than that and the rest (where both parts are longer, _split_masked masks each alone):
# the MIN_PIECE - 1 breaks after its first characters and the MIN_PIECE - 1 before its last,
# as (the form, where in it the break is). Keyed by the first KEY characters of the part after
# the break (one lookup on the next line's start), or, when that part is shorter than KEY, by
# the last KEY characters of the part before it (one on the line before's end).
KEY: Final = 4
_rests: dict[str, tuple[tuple[str, int], ...]] = {}
_heads: dict[str, tuple[tuple[str, int], ...]] = {}
# A line of a value of several lines that is shorter than MIN_PIECE -> the lines of that
# value just before it.
_after: dict[str, frozenset[str]] = {}
MIN_HOLD: Final = MIN_VALUE
"""A line is held back (:class:`Lines`) when it ends with the start of a value (or a form) of
this many characters up to MIN_PIECE - 1: shorter, a start would hold every line that ends like
ordinary text does (each value has a dozen forms, each with its own start), and a value of
fewer characters is not masked either."""
# Those starts, and their last MIN_HOLD characters.
_starts: set[str] = set()
_start_ends: set[str] = set()


def store() -> Secrets:
    """This process's sources: ``$FLOWS_ENV_FILE``, the environment, the secrets folders."""
    global _store
    with _lock:
        if _store is None:
            path = os.environ.get(ENV_FILE_VARIABLE)
            _store = Secrets.from_env_file(Path(path) if path else None)
        return _store


def use_env_file(path: Path | None) -> None:
    """Read secrets from ``path`` (None: ``$FLOWS_ENV_FILE``, when set) in this process and the
    worker processes it starts; checked now: a bad file is an :class:`EnvFileError`."""
    global _store
    if path is None and os.environ.get(ENV_FILE_VARIABLE):
        path = Path(os.environ[ENV_FILE_VARIABLE])
    secrets = Secrets.from_env_file(path)
    with _lock:
        _store = secrets
        if path is not None:
            os.environ[ENV_FILE_VARIABLE] = str(path.resolve())


def _base64_forms(raw: bytes) -> set[str]:
    """The base64 texts of ``raw`` (standard and URL-safe): its whole encoding, padded and not,
    and the part of a longer text's encoding that ``raw`` alone decides, at each of the three
    offsets (mod 3) it can start at there (the characters that also hold bits of the bytes
    around it dropped)."""
    found: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        found.update((whole, whole.rstrip("=")))
        for offset, dropped in enumerate((0, 2, 3)):
            text = encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
            end = len(text) - (1 if (offset + len(raw)) % 3 else 0)
            piece = text[dropped:end]
            if len(piece) >= MIN_PIECE:
                found.add(piece)
    return found


def _base64_twice(raw: bytes) -> set[str]:
    """The base64 of the base64 of ``raw`` (``base64 | base64``, standard, padded and not), and
    the part of it that the first base64 alone decides when a newline follows it (as the
    ``base64`` command ends its text)."""
    inner = base64.b64encode(raw)
    whole = base64.b64encode(inner).decode("ascii")
    decided = base64.b64encode(inner[: len(inner) - len(inner) % 3]).decode("ascii")
    return {whole, whole.rstrip("="), decided} if len(decided) >= MIN_PIECE else {whole}


def forms(value: str) -> set[str]:
    """What masking looks for of one secret: the value, each line of a value of several lines
    (from :data:`MIN_PIECE` characters), and the forms a step most often prints it in: base64
    (:func:`_base64_forms`), base64 of its base64, hex (lower and upper case), URL-encoded
    (``%XX``, ``+`` for a space, ``/`` kept or not), JSON-escaped (``json.dumps``, with and
    without ``\\uXXXX`` for non-ASCII, ``\\/`` for ``/``) and Python's ``repr``. Computed once
    per value, when it is resolved; none under :data:`MIN_VALUE` characters."""
    if len(value) < MIN_VALUE:
        return set()
    found = {value}
    found.update(line.strip() for line in value.splitlines() if len(line.strip()) >= MIN_PIECE)
    raw = _utf8(value)
    found |= _base64_forms(raw)
    found |= _base64_twice(raw)
    found.update((raw.hex(), raw.hex().upper()))
    found.update((quote(value, safe=""), quote(value), quote_plus(value, safe="")))
    escaped = json.dumps(value)[1:-1]
    found.update((escaped, escaped.replace("/", "\\/")))
    found.add(json.dumps(value, ensure_ascii=False)[1:-1])
    found.add(repr(value)[1:-1])
    return {form for form in found if len(form) >= MIN_VALUE}


def _utf8(value: str) -> bytes:
    """The bytes a step prints for ``value``: a value read from the environment may hold bytes
    that are no UTF-8, kept as surrogates."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def _breaks(form: str) -> Iterable[tuple[str, int]]:
    """Where a line break may split ``form`` into a part under :data:`MIN_PIECE` characters
    and the rest: (its key in :data:`_rests` or :data:`_heads`, where)."""
    size = len(form)
    for at in sorted({*range(1, MIN_PIECE), *range(size - MIN_PIECE + 1, size)}):
        if 0 < at < size:
            yield (form[at : at + KEY], at) if size - at >= KEY else (form[at - KEY : at], at)


def remember(values: Iterable[str]) -> None:
    """Mask these values from now on, in each of their :func:`forms` (worked out once, and
    indexed in place: remembering one more value costs its own forms only)."""
    global _known
    new = {value for value in values if value not in _values}
    if not new:
        return
    found = set().union(*(forms(value) for value in new)) - _indexed
    grams = {
        form[i : i + MIN_PIECE]
        for form in found
        if len(form) > MIN_PIECE
        for i in range(len(form) - MIN_PIECE + 1)
    }
    after = {
        (line, before)
        for value in new
        for before, line in itertools.pairwise(line.strip() for line in value.splitlines())
        if line and len(line) < MIN_PIECE and len(before) + len(line) >= MIN_PIECE
    }
    with _lock:
        found -= _indexed  # another thread may have remembered some meanwhile
        for form in found:
            if len(form) < MIN_PIECE or "\n" in form:
                continue
            for key, at in _breaks(form):
                index = _rests if len(form) - at >= KEY else _heads
                index[key] = (*index.get(key, ()), (form, at))
            _start_ends.update(form[size - MIN_HOLD : size] for size in range(MIN_HOLD, MIN_PIECE))
            _starts.update(form[:size] for size in range(MIN_HOLD, MIN_PIECE))
        for line, before in after:
            _after[line] = _after.get(line, frozenset()) | {before}
        _grams.update(grams)
        _indexed.update(found)
        _values.update(new)
        _known = tuple(sorted(_indexed, key=len, reverse=True))


def resolve(names: Iterable[str]) -> dict[str, str]:
    """The values of ``names`` from this process's sources, remembered for masking; raises
    :class:`MissingSecret` naming the first one found nowhere."""
    values = store().resolve_all(names)
    remember(values.values())
    return values


def secret(name: str) -> str:
    """One secret's value, for a Python job: ``from scheduler.secrets import secret``."""
    return resolve([name])[name]


def masking() -> bool:
    """Whether this process has resolved a secret to mask."""
    return bool(_known)


def remembered() -> int:
    """How many values this process masks. It only grows: the same count later means the
    same masking (what was masked ahead of time is masked alike now)."""
    return len(_values)


def masked(text: str) -> str:
    """``text`` with every secret this process resolved replaced by ``***``, in each of its
    :func:`forms`, and on each line the part of one that a line break split
    (:func:`_split_masked`)."""
    if not _known:
        return text
    if "\n" not in text:
        return _split_masked(_replaced(text))
    for form in _known:  # a value of several lines printed whole
        if "\n" in form and form in text:
            text = text.replace(form, MASK)
    lines = text.splitlines(keepends=True)
    bodies = [line.rstrip("\r\n") for line in lines]
    heads = [0] * len(lines)
    tails = [0] * len(lines)
    for i in range(1, len(lines)):
        tails[i - 1], heads[i] = _joined(bodies[i - 1], bodies[i])
    return "".join(
        _covered(body, heads[i], tails[i], _line_masked) + line[len(body) :]
        for i, (line, body) in enumerate(zip(lines, bodies, strict=True))
    )


def _replaced(text: str) -> str:
    for form in _known:  # the longest first: a value that contains another is masked whole
        if form in text:
            text = text.replace(form, MASK)
    return text


def _line_masked(line: str) -> str:
    return _split_masked(_replaced(line))


def _joined(before: str, line: str) -> tuple[int, int]:
    """Where ``before`` and the ``line`` after it hold together a value (or a form) of
    :data:`MIN_PIECE` characters or more that the line break split into a part shorter than
    that and the rest: the characters at the end of ``before`` and at the start of ``line`` it
    is made of; or a line of a value of several lines, shorter than that, after the line of it
    before it: (0, all of ``line``). (0, 0): none."""
    if not before or not line:
        return 0, 0
    best = 0, 0
    for form, at in (*_rests.get(line[:KEY], ()), *_heads.get(before[-KEY:], ())):
        size = len(form)
        if (
            size > best[0] + best[1]
            and at <= len(before)
            and size - at <= len(line)
            and (
                before.endswith(form[:at]) and line.startswith(form[at:])
                if at < MIN_PIECE  # the short part first: the other may be long
                else line.startswith(form[at:]) and before.endswith(form[:at])
            )
        ):
            best = at, size - at
    if best == (0, 0) and _after and line.strip() in _after:
        tail = before.rstrip()
        if any(tail.endswith(one) for one in _after[line.strip()]):
            return 0, len(line)
    return best


def _covered(body: str, head: int, tail: int, masking: Callable[[str], str]) -> str:
    """``body`` masked by ``masking``, its first ``head`` and last ``tail`` characters (the
    parts of a value a line break split) replaced by ``***``."""
    if not head and not tail:
        return masking(body)
    if head + tail >= len(body):
        return MASK
    middle = masking(body[head : len(body) - tail])
    return (MASK if head else "") + middle + (MASK if tail else "")


def may_start(line: str) -> bool:
    """Whether ``line`` ends with the start of a value (or a form) too short to be masked
    alone, of :data:`MIN_HOLD` characters or more: the next line shows whether it is one
    (:class:`Lines` holds it till then)."""
    if line[-MIN_HOLD:] not in _start_ends:  # one lookup for nearly every line
        return False
    starts = _starts
    end = line[1 - MIN_PIECE :]  # each size spelled out (MIN_HOLD to MIN_PIECE - 1)
    return (
        end[-3:] in starts
        or end[-4:] in starts
        or end[-5:] in starts
        or end[-6:] in starts
        or end[-7:] in starts
    )


class Lines:
    """The lines of one stream masked as they are written, the line before in view, so that a
    value a line break split is masked on both sides (:func:`_joined`), however short the part
    after the break, and the part before it from :data:`MIN_HOLD` characters: a line whose end
    may be the start of one is held back (:func:`may_start`) until the next line comes, or
    :meth:`release`. A line's final ``"\\r"`` (a ``"\\r\\n"`` line end) is
    left out of that and kept. Not thread-safe: its owner serializes the calls."""

    __slots__ = ("_before", "_held")

    def __init__(self) -> None:
        self._before = ""  # the line before, as written, without a final "\r"
        # A line held back (without its final "\r"), its head to mask, and that "\r" if any.
        self._held: tuple[str, int, str] | None = None

    @property
    def holding(self) -> bool:
        return self._held is not None

    def add(self, line: str, hold: bool = True) -> list[str]:
        """The lines to show now, masked, in order: the one held back (if any), then ``line``
        unless it is held back in turn (never when ``hold`` is false)."""
        return self._add(line, hold, masked)

    def add_cut(self, line: str) -> list[str]:
        """:meth:`add` for a line whose end was cut off: joined with the line before as any
        other, masked at the cut too (:func:`masked_cut`), never held, and no line after it
        joins it."""
        shown = self._add(line, False, masked_cut)
        self._before = ""
        return shown

    def _add(self, line: str, hold: bool, masking: Callable[[str], str]) -> list[str]:
        if not _known:
            self._before = ""
            return [*self.release(), line]
        body, ending = (line[:-1], "\r") if line.endswith("\r") else (line, "")
        tail, head = _joined(self._before, body)
        shown = []
        if self._held is not None:
            held, held_head, held_ending = self._held
            self._held = None
            shown.append(_covered(held, held_head, tail, masked) + held_ending)
        self._before = body
        if hold and may_start(body):
            self._held = (body, head, ending)
        else:
            shown.append(_covered(body, head, 0, masking) + ending)
        return shown

    def release(self) -> list[str]:
        """The line held back, masked as it is (no next line came in time): its end shows
        when it was the start of a value."""
        if self._held is None:
            return []
        held, head, ending = self._held
        self._held = None
        return [_covered(held, head, 0, masked) + ending]


def _split_masked(line: str) -> str:
    """A line that holds part of a secret printed over two lines or more: its end when that is
    the start of a form (:data:`MIN_PIECE` characters or more), its start when that is the end
    of one, the whole line when it is a piece of one. Each line is masked alone, as it is
    written, so a part shorter than that shows."""
    body = line.rstrip("\r\n")
    whole = body.strip()
    grams = _grams
    if len(whole) < MIN_PIECE or (
        body[:MIN_PIECE] not in grams
        and body[-MIN_PIECE:] not in grams
        and whole[:MIN_PIECE] not in grams
    ):
        return line  # no part of a form at either end: the common case, decided here
    ending = line[len(body) :]
    for form in _known:
        if len(form) <= MIN_PIECE:
            break  # the longest first: no shorter form has a part of MIN_PIECE left to split
        if len(whole) >= MIN_PIECE and whole in form:
            return body.replace(whole, MASK) + ending
        if body[-MIN_PIECE:] in form:
            for size in range(min(len(form) - 1, len(body)), MIN_PIECE - 1, -1):
                if body.endswith(form[:size]):
                    body = body[:-size] + MASK
                    break
        if body[:MIN_PIECE] in form:
            for size in range(min(len(form) - 1, len(body)), MIN_PIECE - 1, -1):
                if body.startswith(form[-size:]):
                    body = MASK + body[size:]
                    break
        if len(body) < MIN_PIECE:
            break
    return body + ending


def masked_cut(text: str) -> str:
    """:func:`masked` for a line cut short: its end too is masked when it is the start of a
    secret (3 characters or more), which the cut went through."""
    text = masked(text)
    for value in _known:
        for size in range(min(len(value) - 1, len(text)), 2, -1):
            if text.endswith(value[:size]):
                return text[:-size] + MASK
    return text


def masked_value(value: Any) -> Any:
    """A JSON-like value with :func:`masked` applied to every string in it (keys too). A key
    that is not text is kept as it is: whoever encodes the value decides what it becomes (JSON
    writes ``None`` as ``"null"``) or refuses it, alike whether a secret is known or not."""
    if not _known:
        return value
    if isinstance(value, str):
        return masked(value)
    if isinstance(value, Mapping):
        return {masked(k) if isinstance(k, str) else k: masked_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [masked_value(v) for v in value]
    return value


# -- shown data: environment values named like credentials ----------------------------------------

SENSITIVE_NAME: Final = re.compile(
    r"PASS(WORD|WD)?|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|CREDENTIAL|AUTH|COOKIE|SESSION",
    re.IGNORECASE,
)
"""An environment variable name that says its value is a credential."""


def sensitive_name(name: str) -> bool:
    return bool(SENSITIVE_NAME.search(name))


def shown_data(data: Any) -> Any:
    """A job's data as it is shown (CLI, API, dashboard): a shell step's ``env`` values named like
    credentials replaced by ``***`` (they are stored as given: declare them in ``secrets:`` to
    keep them out of Redis)."""
    if not isinstance(data, Mapping):
        return data
    env = data.get("env")
    if not isinstance(env, Mapping) or not any(sensitive_name(str(k)) for k in env):
        return data
    hidden = {k: (MASK if sensitive_name(str(k)) else v) for k, v in env.items()}
    return {**data, "env": hidden}
