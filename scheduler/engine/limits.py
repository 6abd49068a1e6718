"""Size limits, the Python side: the same numbers and error classes as the engine's checks.

The engine enforces every limit itself (``lua/include/args.lua``, ``queue.lua``, ``runs.lua``):
nothing here is needed for safety. The client checks first so that a caller hears of a bad
argument before a round trip, with the exception class the engine would raise
(:class:`~scheduler.engine.errors.InvalidArgument` or :class:`~scheduler.engine.errors.TooLarge`),
and so that a
payload Python cannot even encode (NaN, a value nested 10,000 deep) gets the same clear error
instead of a ``ValueError`` or ``RecursionError`` from :mod:`json`, and one JSON readers would
read otherwise (an integer past a double's range) an error naming where it is.

=========================  ==========================================================
ids                        1..256 bytes (UTF-8), no white space or control character (C0,
                           DEL, C1): jids, queues, workers, klasses, groups, tags
names                      ids that become one URL or path segment: no ``/`` or ``\\``, not
                           ``.`` or ``..``: jids, queues, run ids, schedule and flow names
jids                       may not end in ``-history``, ``-dependencies``, ``-dependents``
payloads                   data, result, failure message: at most 512 KiB of JSON text;
                           data (and a run's record) at most 100 levels deep, a result (a
                           step's outputs, a signal's data) at most 64: what every reader
                           (the API, ``flows status --json``, the pages) reads back
tags                       at most 64 per job
priorities                 integers within +-1,000,000
retries, counts            integers within 0..100,000
delays                     finite numbers >= 0
flow submission            at most 100,000 jobs and 64 MiB of job specs in one call
bulk put (``put.many``)    at most 1,000 jobs in one call, each jid once
fan-out from an output     at most 10,000 items (``lua/include/fanout.lua``)
=========================  ==========================================================

Reading is the other side of the nesting limits: a value stored before they existed, or by a
path around them, may nest deeper than any reader handles. Every reader decodes what the engine
sends with :func:`read_json`, which shows :data:`MAX_SHOWN_DEPTH` levels and puts
:func:`nested_too_deep`'s marker in place of each part nested deeper, so that a job, a run, its
history and its logs read the same on every surface (the API, the command line, the pages,
the metrics). Only what acts on a value reads it whole: the worker a popped job's data, the
scheduler service the schedules it fires.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from scheduler.engine.errors import InvalidArgument, TooLarge
from scheduler.terminal import BIDI_CONTROLS

MAX_ID_BYTES = 256
MAX_PAYLOAD_BYTES = 512 * 1024
MAX_JSON_DEPTH = 100
"""How deeply a job's data (and a run's record) may nest (the engine's ``Arg.MAX_NESTING``)."""
MAX_RESULT_DEPTH = 64
"""How deeply a job's result may nest (``Arg.MAX_RESULT_NESTING``): a step's outputs, a signal's
data. Less than data: a result is read back a few levels down in what copies it (a downstream
step's data, a run's outputs, a sub-flow step's result)."""
MAX_SHOWN_DEPTH = 128
"""How many levels of a reply (a job, a run, a log page) a reader shows: more than the deepest
value the limits let in, with its place in the reply, and well below what the API's serializer
(about 250 levels) and Python's decoder (about 1,000) take. :func:`read_json` cuts deeper parts."""
DEEPER = "\u2026"
"""The one key of the marker shown in place of a part nested too deeply: ``{"…": "..."}``."""
MAX_TAGS = 64
MAX_PRIORITY = 1_000_000
MAX_COUNT = 100_000
MAX_FLOW_JOBS = 100_000
MAX_FLOW_BYTES = 64 * 1024 * 1024
MAX_SOURCE_BYTES = 4 * 1024 * 1024
"""A registered schedule's flow file text (the engine's ``Schedules.MAX_SOURCE_BYTES``)."""
MAX_PUT_MANY = 1000
MAX_FANOUT_ITEMS = 10_000
"""Items of a foreach over a step's output (the engine's ``Fanout.MAX_ITEMS``)."""
RESERVED_JID_SUFFIXES = ("-history", "-dependencies", "-dependents")
MAX_JSON_NUMBER = sys.float_info.max
"""The largest number JSON readers hold (a double's, about 1.8e308): past it, the engine's
cjson, JavaScript and Python's ``float`` read infinity, which the engine refuses."""
PAST_JSON_NUMBERS = (
    "past what JSON readers hold (a double: about 1.8e308 either way; beyond, they read infinity)"
)
# An integer this long may be past MAX_JSON_NUMBER (309 digits); a shorter one never is.
_LONG_DIGITS = re.compile(r"(?<!\d)\d{309}")  # tried at a run's start only: linear
#: The compact encoder of every payload, made once: ``json.dumps`` with options builds a new
#: encoder per call, which costs a put about as much as encoding a small payload.
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
#: The C encoder ``_COMPACT.encode`` ends in (None where the interpreter has none, or where
#: it is not made as :func:`_compact` makes it: see :func:`_probe_c_encoder`).
_C_MAKE_ENCODER: Callable[..., Callable[[Any, int], Sequence[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")

# White space and control characters (bytes 0-32 and 127, Lua's %s and %c in the C locale, the
# C1 controls U+0080..U+009F, and the bidirectional controls): what Lua's Arg.id refuses.
_FORBIDDEN_ID_CHARS = re.compile(f"[\\x00-\\x20\\x7f-\\x9f{BIDI_CONTROLS}]")
# What Lua's Arg.name refuses besides.
_FORBIDDEN_NAME_CHARS = re.compile(r"[/\\]")


def display(command: str) -> str:
    """The name the engine's messages start with: ``config.get`` -> ``ConfigGet``."""
    return "".join(part[:1].upper() + part[1:] for part in command.split("."))


def _invalid(command: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"{display(command)}(): {message}", command=command)


def _too_large(command: str, message: str) -> TooLarge:
    return TooLarge(f"{display(command)}(): {message}", command=command)


#: Ids found valid (a memo of a pure check: queues and klasses are checked on every put), and
#: how many it keeps before it starts again.
_VALID_IDS: set[str] = set()
_MAX_VALID_IDS = 1024


def check_id(command: str, name: str, value: Any) -> str:
    """An id: a non-empty string of at most 256 bytes without white space or control bytes."""
    if type(value) is str and value in _VALID_IDS:
        return value
    if value is None or value == "":
        raise _invalid(command, f'Arg "{name}" missing')
    if not isinstance(value, str):
        raise _invalid(command, f'Arg "{name}" is not text: {type(value).__name__}')
    size = len(value) if value.isascii() else len(_utf8(command, name, value))
    if size > MAX_ID_BYTES:
        raise _too_large(
            command, f'Arg "{name}" is {size} bytes, more than the limit of {MAX_ID_BYTES}'
        )
    if _FORBIDDEN_ID_CHARS.search(value):
        raise _invalid(
            command,
            f'Arg "{name}" contains white space or a control character: {value[:40]!r}',
        )
    if type(value) is str:
        if len(_VALID_IDS) >= _MAX_VALID_IDS:
            _VALID_IDS.clear()
        _VALID_IDS.add(value)
    return value


def check_klass(command: str, klass: Any) -> str:
    """A job's klass as the engine stores it: a dotted path as given, or a class's or a
    function's module and qualified name. A worker imports that path, so a lambda, a function
    defined inside another, or a callable with no name of its own (a ``functools.partial``) is
    refused here rather than failing every run of the job in ``import-error``."""
    if isinstance(klass, str) or not callable(klass):
        return check_id(command, "klass", klass)
    qualname = getattr(klass, "__qualname__", None)
    if not isinstance(qualname, str) or "<" in qualname:
        shown = qualname if isinstance(qualname, str) else type(klass).__name__
        raise _invalid(
            command,
            f'Arg "klass" {shown!r} has no dotted path a worker can import: define it at the'
            " top level of a module, or give its path as text ('module.function')",
        )
    return check_id(command, "klass", f"{klass.__module__}.{qualname}")


def id_from(text: str, default: str) -> str:
    """``text`` made an id the engine takes (a failure group named by a job's exception, say):
    white space and control characters become ``_``, and it is cut to the size limit on a
    character boundary; ``default`` when nothing is left."""
    made = _FORBIDDEN_ID_CHARS.sub("_", text).encode("utf-8", "replace")[:MAX_ID_BYTES]
    return made.decode("utf-8", "ignore") or default


def _utf8(command: str, name: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(
            command,
            f'Arg "{name}" is not valid UTF-8 text (it holds a lone surrogate): {text[:40]!r}',
        ) from None


def check_name(command: str, name: str, value: Any) -> str:
    """A name (a jid, queue, run id, schedule or flow name): an id that is always one URL or
    path segment: no ``/`` or ``\\``, and not ``.`` or ``..``."""
    check_id(command, name, value)
    if _FORBIDDEN_NAME_CHARS.search(value) or value in (".", ".."):
        raise _invalid(
            command, f'Arg "{name}" may not hold "/" or "\\" nor be "." or "..": {value[:40]!r}'
        )
    return str(value)


def check_jid(command: str, name: str, value: Any) -> str:
    """A job id: a name that does not end in a suffix the key layout reserves."""
    jid = check_name(command, name, value)
    for suffix in RESERVED_JID_SUFFIXES:
        if jid.endswith(suffix):
            raise _invalid(
                command,
                f'Arg "{name}" may not end in "{suffix}" (reserved by the key layout): {jid}',
            )
    return jid


def all_jids(values: Sequence[str]) -> bool:
    """Whether :func:`check_jid` takes every one of ``values`` (a run's jids), told at once:
    False when one may be refused, and then each is checked on its own to say which and why."""
    if not values:
        return True
    try:
        joined = "/".join(values) + "/"  # '/' is in no jid: each one ends where a '/' is
    except TypeError:  # one is not text
        return False
    if not joined.isascii() or _FORBIDDEN_ID_CHARS.search(joined) or "\\" in joined:
        return False
    if joined.count("/") != len(values) or "//" in joined or joined.startswith("/"):
        return False  # a '/' inside one, or one empty
    if any(joined.find(f"{suffix}/") >= 0 for suffix in RESERVED_JID_SUFFIXES):
        return False
    # ASCII: a character is a byte. Any ending in '.' is checked on its own ('.' and '..').
    return max(map(len, values), default=0) <= MAX_ID_BYTES and "./" not in joined


IdKind = Literal["id", "name", "jid"]
"""The rules a value must meet: :func:`check_id`'s, :func:`check_name`'s or :func:`check_jid`'s."""


def id_fault(value: str, kind: IdKind = "id") -> str | None:
    """What keeps ``value`` from being an id, a name or a jid (``kind``), by the rules of
    :func:`check_id`, :func:`check_name` and :func:`check_jid`, in words that follow the name
    of the value and leave the value out ("is empty", "contains white space or a control
    character", "is 300 bytes, more than the limit of 256 bytes"); None when the engine takes
    it. For a command's own message about a value it was given, before any engine call."""
    if value == "":
        return "is empty"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8 text (it holds a lone surrogate)"
    if size > MAX_ID_BYTES:
        return f"is {size} bytes, more than the limit of {MAX_ID_BYTES} bytes"
    if _FORBIDDEN_ID_CHARS.search(value):
        return "contains white space or a control character"
    if kind == "id":
        return None
    if _FORBIDDEN_NAME_CHARS.search(value) or value in (".", ".."):
        return 'may not hold "/" or "\\" nor be "." or ".."'
    if kind == "jid":
        for suffix in RESERVED_JID_SUFFIXES:
            if value.endswith(suffix):
                return f'may not end in "{suffix}" (reserved by the key layout)'
    return None


# What a short one-line text (who signals, a pause's note) may not hold: the C0 controls but
# tab, DEL, the C1 controls, and the line and paragraph separators: each would start another
# line, or move the cursor, wherever the text is shown.
_NOT_ONE_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def line_fault(value: str) -> str | None:
    """What keeps ``value`` from being one line of text, in words that follow the name of the
    value ("holds a control character (\\n): ..."), naming the first such character escaped;
    None when it is one line (a tab is allowed)."""
    found = _NOT_ONE_LINE.search(value)
    if found is None:
        return None
    shown = repr(found.group())[1:-1]
    return f"holds a control character ({shown}): one line of text is expected (a tab is allowed)"


def check_ids(command: str, name: str, values: Iterable[Any], *, jids: bool = False) -> list[str]:
    """Each of ``values`` as :func:`check_id` (or :func:`check_jid`); returns them as a list.

    One text is refused, not taken as the list of its characters (``tags="urgent"`` would
    tag the job ``u``, ``r``, ...)."""
    if isinstance(values, str):
        text = values[:40]
        raise _invalid(command, f'Arg "{name}" is one text, not a list: {text!r} (give [{text!r}])')
    if isinstance(values, bytes) or not isinstance(values, Iterable):
        raise _invalid(command, f'Arg "{name}" is not a list: {type(values).__name__}')
    check = check_jid if jids else check_id
    return [check(command, f"{name}[{i}]", value) for i, value in enumerate(values, 1)]


def check_spread(
    command: str, name: str, values: tuple[Any, ...], method: str, kind: IdKind = "id"
) -> list[str]:
    """Values given as separate arguments (``cancel("a", "b")``), each an id of ``kind``
    (:data:`IdKind`) named ``name[i]``. A list given as one of them is said to be one: it was
    meant spread (``cancel(*jids)``, ``method`` names the call)."""
    for i, value in enumerate(values, 1):
        if isinstance(value, list | tuple | set | frozenset):
            raise _invalid(
                command,
                f'Arg "{name}[{i}]" is a {type(value).__name__}, not one of the {name}: give them'
                f" as separate arguments ({method}(*{name}))",
            )
    check = _ID_CHECKS[kind]
    return [check(command, f"{name}[{i}]", value) for i, value in enumerate(values, 1)]


def check_tags(command: str, tags: Iterable[Any]) -> list[str]:
    """At most 64 distinct valid tags."""
    checked = check_ids(command, "tags", tags)
    distinct = len(set(checked))
    if distinct > MAX_TAGS:
        raise _too_large(
            command, f'Arg "tags" has {distinct} items, more than the limit of {MAX_TAGS}'
        )
    return checked


_ID_CHECKS: dict[IdKind, Callable[[str, str, Any], str]] = {
    "id": check_id,
    "name": check_name,
    "jid": check_jid,
}


def check_scalar(command: str, name: str, value: Any) -> str | int | float:
    """Text or a number (not a bool): what the engine takes as one value (a configuration
    option's)."""
    if value is None:
        raise _invalid(command, f'Arg "{name}" missing')
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _invalid(command, f'Arg "{name}" is not text or a number: {type(value).__name__}')
    return value


def check_number(command: str, name: str, value: Any, minimum: float | None = None) -> float:
    """A finite real number (not NaN, not infinite, not a bool), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(command, f'Arg "{name}" is not a finite number: {value!r}')
    if not math.isfinite(value):
        raise _invalid(command, f'Arg "{name}" is not a finite number: {value!r}')
    if minimum is not None and value < minimum:
        raise _invalid(command, f'Arg "{name}" must be at least {minimum:g}: {value!r}')
    return float(value)


def check_integer(command: str, name: str, value: Any, minimum: int, maximum: int) -> int:
    """An integer within ``[minimum, maximum]`` (a float with no fraction is accepted)."""
    number = check_number(command, name, value)
    if not number.is_integer():
        raise _invalid(command, f'Arg "{name}" is not an integer: {value!r}')
    if number < minimum:
        raise _invalid(command, f'Arg "{name}" must be at least {minimum}: {value!r}')
    if number > maximum:
        raise _invalid(command, f'Arg "{name}" must be at most {maximum}: {value!r}')
    return int(number)


def check_priority(command: str, value: Any) -> int:
    return check_integer(command, "priority", value, -MAX_PRIORITY, MAX_PRIORITY)


def check_retries(command: str, value: Any) -> int:
    return check_integer(command, "retries", value, 0, MAX_COUNT)


def check_delay(command: str, value: Any) -> float:
    return check_number(command, "delay", value, 0)


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply ``value`` nests (0 for a scalar), counting no further than ``limit + 1``.

    Iterative, so a value nested far deeper than Python's recursion limit is measured safely.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children)
    return deepest


def nested_too_deep(limit: int = MAX_SHOWN_DEPTH) -> dict[str, str]:
    """What a reader shows in place of a part of a value nested more than ``limit`` levels
    deep: ``{"…": "nested deeper than 128 levels"}``, the same on every surface."""
    return {DEEPER: f"nested deeper than {limit} levels"}


# A JSON string (escapes included: a quote inside one is escaped), or a run of opening or of
# closing brackets.
_JSON_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_JSON_TOKENS = re.compile(_JSON_STRING + r"|[\[{]+|[\]}]+")
# What a level of a decoded value is made of (json.loads makes no other arrays or objects).
_NESTS = frozenset((dict, list))


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether a decoded value nests more than ``limit`` levels deep: its arrays and objects
    taken a level at a time, without recursion, stopping past ``limit``."""
    level = [value] if type(value) in _NESTS else []
    for _ in range(limit):
        if not level:
            return False
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) in _NESTS
        ]
    return bool(level)


def _cut_text(text: str, limit: int) -> str:
    """``text`` with every array or object nested more than ``limit`` levels deep replaced by
    the marker's text. Linear, without recursion: the text may nest far deeper than Python's
    decoder goes."""
    marker = json.dumps(nested_too_deep(limit), separators=(",", ":"))
    pieces: list[str] = []
    depth = kept = cut_at = 0
    for token in _JSON_TOKENS.finditer(text):
        run, start = token.group(), token.start()
        if run[0] == '"':
            continue
        if run[0] in "[{":
            if depth <= limit < depth + len(run):  # it opens level limit + 1
                cut_at = start + limit - depth
            depth += len(run)
        else:
            if depth - len(run) <= limit < depth:  # it closes level limit + 1
                pieces += [text[kept:cut_at], marker]
                kept = start + depth - limit
            depth -= len(run)
    pieces.append(text[kept:])
    return "".join(pieces)


def read_json(text: str | bytes, limit: int = MAX_SHOWN_DEPTH) -> Any:
    """JSON text from the engine (a reply, a stored value) decoded as every reader shows it:
    whole to ``limit`` levels, each array or object nested deeper shown as
    :func:`nested_too_deep` (so at most ``limit + 1`` levels). Raises ``ValueError`` for text
    that is not JSON, as :func:`json.loads`."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        value = json.loads(text)
    except RecursionError:  # deeper than Python's decoder goes, so deeper than shown
        return json.loads(_cut_text(text, limit))
    # Each level opens a bracket: text with few cannot nest too deeply (the common case); else
    # the decoded value's arrays and objects tell (each a level at a time, faster than the text).
    if text.count("[") + text.count("{") > limit and _nests_deeper(value, limit):
        return json.loads(_cut_text(text, limit))
    return value


def check_text(command: str, name: str, value: Any, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    """Free text (a failure message): at most ``max_bytes`` bytes of UTF-8."""
    if not isinstance(value, str):
        raise _invalid(command, f'Arg "{name}" is not text: {type(value).__name__}')
    size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise _too_large(
            command, f'Arg "{name}" is {size} bytes, more than the limit of {max_bytes}'
        )
    return value


def check_message(command: str, name: str, value: Any) -> str:
    """Free text sent as it is (a failure message): :func:`check_text`, and UTF-8 (no lone
    surrogate)."""
    text = check_text(command, name, value)
    if not text.isascii():
        _utf8(command, name, text)
    return text


def encode_payload(
    command: str,
    name: str,
    value: Any,
    *,
    kind: str = "any",
    max_bytes: int = MAX_PAYLOAD_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> str:
    """``value`` as compact JSON text the engine will accept, or the engine's error.

    ``kind`` 'object' requires a mapping (job data). Refuses values nested more than
    ``max_depth`` levels (:data:`MAX_JSON_DEPTH`; a result: :data:`MAX_RESULT_DEPTH`), NaN
    and infinities (not JSON), values :mod:`json` cannot encode, values it would change (a key
    that is not a string: ``{1: 'a', '1': 'b'}`` would read back as ``{'1': 'b'}``; text with
    a lone surrogate, which is not UTF-8; an integer past a double's range, which readers
    take for infinity), and text over ``max_bytes``.
    """
    if kind == "object" and not isinstance(value, dict):
        raise _invalid(command, f'Arg "{name}" is not a JSON object: {type(value).__name__}')
    try:
        text = _compact(value)
    except (TypeError, ValueError, RecursionError) as error:
        _check_depth(command, name, value, max_depth)  # a cycle, or too deep: say so first
        if isinstance(error, RecursionError):  # deeper than this interpreter's encoder can go
            raise _invalid(command, f'Arg "{name}" nests too deeply to encode') from None
        if isinstance(error, ValueError):  # an integer too long even to write (4,300 digits)
            _check_numbers(command, name, value)
        raise _invalid(command, f'Arg "{name}" is not valid JSON: {error}') from None
    # Each level takes at least two characters: short text cannot nest too deeply.
    if len(text) > 2 * max_depth:
        _check_depth(command, name, value, max_depth)
    _check_faithful(command, name, value, surrogates="\\ud" in text)
    if len(text) >= 309 and _LONG_DIGITS.search(text):  # only then can an integer be too big
        _check_numbers(command, name, value)
    return check_text(command, name, text, max_bytes)


def _compact(value: Any) -> str:
    """``_COMPACT.encode(value)``: the same C encoder with the same options, made here rather
    than through ``encode`` and ``iterencode``, two Python calls that cost a put more than the
    encoding of a small payload. Its cycle marks are its own, as each ``encode`` call's are."""
    if _C_MAKE_ENCODER is None:
        return _COMPACT.encode(value)
    encoder = _C_MAKE_ENCODER(
        {},  # marks of the objects being encoded: a cycle raises ValueError, as encode's does
        _COMPACT.default,
        json.encoder.encode_basestring_ascii,
        None,
        _COMPACT.key_separator,
        _COMPACT.item_separator,
        _COMPACT.sort_keys,
        _COMPACT.skipkeys,
        _COMPACT.allow_nan,
    )
    return "".join(encoder(value, 0))


def _probe_c_encoder() -> None:
    """``c_make_encoder`` is the json module's own, not its public API: a Python whose encoder
    takes other arguments would turn every put's payload into a TypeError, read as a refusal.
    Tried once at import on a payload of every kind; anything but ``encode``'s text, and
    :func:`_compact` goes through ``encode``."""
    global _C_MAKE_ENCODER
    sample = {"s": "é\n", "i": -1, "f": 0.5, "l": [True, False, None], "o": {"k": []}}
    try:
        same = _compact(sample) == _COMPACT.encode(sample)
    except Exception:  # any failure means: not this way
        same = False
    if not same:
        _C_MAKE_ENCODER = None


_probe_c_encoder()


def json_place(path: Sequence[str | int]) -> str:
    """A place in a JSON value as a reader writes it: ``a.b[2]``, ``["a b"].c``; '' for the
    value itself."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:  # escaped: a key may hold quotes, control characters, a lone surrogate
            out += f"[{json.dumps(part[:40] + ('...' if len(part) > 40 else ''))}]"
    return out


def _integer_fault(item: Any) -> str | None:
    """Whether ``item`` is an integer JSON readers would read as infinity, in words."""
    if isinstance(item, bool) or not isinstance(item, int):
        return None
    try:
        float(item)  # rounds as JSON readers do: overflows exactly where theirs does
    except OverflowError:
        size = abs(item)
        exponent = math.floor(math.log10(size))  # a float's: off by one near a power of ten
        exponent += (10 ** (exponent + 1) <= size) - (10**exponent > size)
        order = f"{'-' if item < 0 else ''}1e{exponent}"
        return f"an integer of the order of {order}, {PAST_JSON_NUMBERS}; give it as text"
    return None


def _number_fault(item: Any) -> str | None:
    """What keeps the number ``item`` from reading back from JSON text as it is, if anything."""
    if isinstance(item, float):
        if math.isnan(item):
            return "NaN, which is no JSON number"
        return None if math.isfinite(item) else f"a number {PAST_JSON_NUMBERS}"
    return _integer_fault(item)


def _any_fault(item: Any) -> str | None:
    if isinstance(item, str):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            shown = json.dumps(item[:40])
            return f"text with a lone surrogate ({shown}), which is not UTF-8 text"
        return None
    return _number_fault(item)


def _find_fault(value: Any, fault: Callable[[Any], str | None]) -> tuple[str, str] | None:
    """The first place in ``value`` (as :func:`json_place` writes it) where ``fault`` finds
    something wrong with a key or a scalar, and what."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    what = f"a key that is not a string: {repr(key)[:40]} ({type(key).__name__})"
                    return json_place(path), what + "; JSON would turn it into text"
                found = fault(key)
                if found is not None:
                    return json_place(path), f"a key that is {found}"
            stack.extend((child, (*path, key)) for key, child in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(item))))
        else:
            found = fault(item)
            if found is not None:
                return json_place(path), found
    return None


def json_fault(value: Any) -> tuple[str, str] | None:
    """Where ``value`` holds what JSON text would not give back as it is, and what: a key that
    is not a string, text with a lone surrogate (not UTF-8), NaN, or a number past what JSON
    readers hold (an infinity; an integer past :data:`MAX_JSON_NUMBER`, which they read as
    one). The first such place, as :func:`json_place` writes it ('' for the value itself), and
    what it holds; None when there is none. It walks the whole value: for a value a person
    gave (a signal's data), said where it is; :func:`encode_payload` walks only where its text
    says it may find one."""
    return _find_fault(value, _any_fault)


def _check_numbers(command: str, name: str, value: Any) -> None:
    """Refuse an integer JSON readers would read as infinity (the engine then says so, as if
    the caller had given an infinity), naming where it is."""
    found = _find_fault(value, _integer_fault)
    if found is not None:
        place, what = found
        raise _invalid(command, f'Arg "{name}"{" at " + place if place else ""}: {what}')


def _check_faithful(command: str, name: str, value: Any, *, surrogates: bool) -> None:
    """Refuse what JSON text would not give back as it is: keys that are not strings, and (when
    the text has a surrogate escape at all) strings holding a lone surrogate."""
    walked: tuple[type, ...] = (dict, list, tuple, str) if surrogates else (dict, list, tuple)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise _invalid(
                        command,
                        f'Arg "{name}" has a key that is not a string: {repr(key)[:40]} '
                        f"({type(key).__name__}); JSON would turn it into text",
                    )
                if surrogates:
                    _utf8(command, name, key)
                if isinstance(child, walked):
                    stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(child for child in item if isinstance(child, walked))
        elif isinstance(item, str):
            _utf8(command, name, item)


def _check_depth(command: str, name: str, value: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    if json_depth(value, max_depth) > max_depth:
        raise _invalid(command, f'Arg "{name}" nests more than {max_depth} levels deep')


def check_payload_text(
    command: str, name: str, text: str, *, max_bytes: int = MAX_PAYLOAD_BYTES
) -> str:
    """JSON text already encoded: only its size is checked here (the engine parses it)."""
    return check_text(command, name, text, max_bytes)


def check_distinct_jids(command: str, jids: Iterable[str]) -> None:
    """A bulk put names each job once (the engine refuses a jid given twice in one call)."""
    seen: set[str] = set()
    for jid in jids:
        if jid in seen:
            raise _invalid(command, f"job {jid} appears twice")
        seen.add(jid)


def check_flow_submission(command: str, jobs: int, jobs_text: str) -> None:
    """A whole run in one call: at most 100,000 jobs and 64 MiB of job specs."""
    if jobs > MAX_FLOW_JOBS:
        raise _too_large(command, f"{jobs} jobs, more than the limit of {MAX_FLOW_JOBS}")
    check_text(command, "jobs", jobs_text, MAX_FLOW_BYTES)


__all__ = [
    "DEEPER",
    "MAX_COUNT",
    "MAX_FLOW_BYTES",
    "MAX_FLOW_JOBS",
    "MAX_ID_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NUMBER",
    "MAX_PAYLOAD_BYTES",
    "MAX_PRIORITY",
    "MAX_PUT_MANY",
    "MAX_RESULT_DEPTH",
    "MAX_SHOWN_DEPTH",
    "MAX_TAGS",
    "PAST_JSON_NUMBERS",
    "RESERVED_JID_SUFFIXES",
    "IdKind",
    "check_delay",
    "check_distinct_jids",
    "check_flow_submission",
    "check_id",
    "check_ids",
    "check_integer",
    "check_jid",
    "check_name",
    "check_number",
    "check_payload_text",
    "check_priority",
    "check_retries",
    "check_tags",
    "check_text",
    "encode_payload",
    "id_fault",
    "id_from",
    "json_depth",
    "json_fault",
    "json_place",
    "nested_too_deep",
    "read_json",
]
