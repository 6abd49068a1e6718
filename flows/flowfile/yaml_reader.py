"""Safe YAML loading that remembers where every value came from.

The document is built straight from the safe parser's event stream (libyaml when available),
with an explicit stack instead of recursion: nesting depth and alias expansion are bounded before
they can exhaust memory or the C stack, and every value's line and column (1-based) is recorded
in a :class:`SourceMap` under its data path. Only plain data is produced: mappings, lists,
strings, numbers, booleans and null. Timestamps stay text (the model decides what a date is).

Refused, each as a finding with its position: syntax errors, duplicate keys, non-string keys,
tags other than the YAML core ones (``!!python/...``), alias bombs, empty files, several
documents, a top level that is not a mapping, non-finite floats.

Positions are recorded as the document loads, as the parser's marks in a tree shaped like the
data (:class:`SourceMap`): a data path is turned into a line and column only when a finding asks
for it, so a file without findings pays little for them, and one with findings is parsed once.

YAML 1.1 traps (``2:00`` read as 120, ``0200`` as 128, ``on``/``no`` as booleans) are not errors
by themselves: they are recorded as :class:`Trap` entries, and validation reports them where the
model shows the author meant text (see :mod:`flows.validation.model_errors`).
"""

from __future__ import annotations

import bisect
import json
import math
import re
import stat
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from yaml.constructor import SafeConstructor

from flows.flowfile.findings import DataPath, Finding, Severity, path_text
from flows.flowfile.templates import OPEN
from flows.gc_pause import gc_paused
from scheduler.engine.limits import PAST_JSON_NUMBERS, json_fault

MAX_FILE_BYTES: Final = 10 * 1024 * 1024
MAX_DEPTH: Final = 64
"""Deepest nesting of mappings and lists; flow files need far fewer than this."""
_SHORT_INTEGER: Final = 300
"""Characters of an integer that JSON readers always hold (a double's range is about 1.8e308)."""
_MAX_INTEGER_DIGITS: Final = 1100
"""Significant digits past which an integer is past a double's range in any base (2**1100)."""
MAX_NODES: Final = 2_000_000
"""Values in the document once every alias is expanded (the alias-bomb bound)."""

_CORE = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_CORE + t for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP, _MERGE, _MAP, _SEQ = (_CORE + t for t in ("timestamp", "merge", "map", "seq"))

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALARS = SafeConstructor()  # reused for YAML 1.1 int, float and bool spellings
_LINE_BREAK = re.compile(r"\r\n|[\r\n\x85\u2028\u2029]")  # YAML's, which its marks count


@dataclass(frozen=True, slots=True)
class Trap:
    """A plain scalar YAML 1.1 read as something its author probably did not mean."""

    kind: Literal["sexagesimal", "octal", "boolean"]
    text: str
    value: object

    @property
    def message(self) -> str:
        """What the text became, e.g. ``2:00 is read as the number 120 (YAML 1.1 base 60)``."""
        if self.kind == "boolean":
            return f"{self.text} is read as the boolean {str(self.value).lower()} (YAML 1.1)"
        how = "base 60" if self.kind == "sexagesimal" else "octal"
        return f"{self.text} is read as the number {self.value} (YAML 1.1 {how})"

    @property
    def hint(self) -> str:
        """How to say what was meant."""
        return f"quote it: '{self.text}'"


Position = tuple[int, int]
"""Line and column, 1-based."""


class SourceMap:
    """Line and column of every value, and of every mapping key, by data path.

    Filled as the document loads (``root``: the mark of a scalar document, or the
    :class:`_Collection` of its top mapping or list); empty when nothing loaded.
    """

    def __init__(self) -> None:
        self.root: Any = None
        self.text = ""  # the document, set by the loader
        # Where each string holding a template ends, by where it starts: a finding about one
        # template of it is placed at that template (:meth:`locate_in`).
        self.ends: dict[Position, Position] = {}
        self._line_starts: list[int] | None = None

    @property
    def values(self) -> dict[DataPath, Position]:
        """The position of every value recorded, by data path (built at each access; findings
        use :meth:`locate`, which walks only the path asked for)."""
        values: dict[DataPath, Position] = {}
        if self.root is not None:
            _flatten(self.root, (), values, {})
        return values

    @property
    def keys(self) -> dict[DataPath, Position]:
        """The position of every mapping key recorded, by the data path of its value."""
        keys: dict[DataPath, Position] = {}
        if self.root is not None:
            _flatten(self.root, (), {}, keys)
        return keys

    def locate(self, path: DataPath, at_key: bool = False) -> Position:
        """Position of ``path``; of its nearest recorded ancestor when it has none of its own.

        Values reached through an alias are located at the alias.
        """
        if self.root is None:
            return (1, 1)
        if at_key and path:
            parent = self.root
            for part in path[:-1]:
                parent = _inner(parent, part)
            if isinstance(parent, _Collection) and path[-1] in parent.keys:
                return _position(parent.keys[path[-1]])
        found = self.root
        for part in path:
            inner = _inner(found, part)
            if inner is None:
                break
            found = inner
        return _position(found.mark if isinstance(found, _Collection) else found)

    def locate_in(self, path: DataPath, needle: str, occurrence: int = 0) -> Position | None:
        """Position of the ``occurrence``-th (0-based) ``needle`` in the source of the string
        at ``path``: a template of it, say. None when it is not there as written (an escape in
        a quoted string, a folded line) or nothing is recorded for ``path`` itself."""
        found = self.root
        for part in path:
            found = _inner(found, part)
            if found is None:
                return None
        if isinstance(found, _Collection):
            return None
        start = _position(found)
        end = self.ends.get(start)
        if end is None:
            return None
        begin, stop = self._offset(start), self._offset(end)
        at = begin - 1
        for _ in range(occurrence + 1):
            at = self.text.find(needle, at + 1, stop)
            if at < 0:
                return None
        return self._position_of(at)

    def _offset(self, position: Position) -> int:
        line, col = position
        return self._starts()[min(line, len(self._starts())) - 1] + col - 1

    def _position_of(self, offset: int) -> Position:
        starts = self._starts()
        line = bisect.bisect_right(starts, offset) - 1
        return line + 1, offset - starts[line] + 1

    def _starts(self) -> list[int]:
        """Where each line of the text starts (built at the first template finding)."""
        if self._line_starts is None:
            self._line_starts = [0, *(m.end() for m in _LINE_BREAK.finditer(self.text))]
        return self._line_starts


def _inner(place: Any, part: str | int) -> Any:
    """What is recorded for ``part`` inside ``place`` (None when nothing is)."""
    if not isinstance(place, _Collection):
        return None  # a scalar or an alias: nothing recorded inside
    values = place.marks
    if isinstance(values, dict):
        return values.get(part)
    if isinstance(part, int) and 0 <= part < len(values):
        return values[part]
    return None


def _flatten(
    place: Any, path: DataPath, values: dict[DataPath, Position], keys: dict[DataPath, Position]
) -> None:
    if not isinstance(place, _Collection):
        values[path] = _position(place)
        return
    values[path] = _position(place.mark)
    for key, mark in place.keys.items():
        keys[(*path, key)] = _position(mark)
    items = place.marks.items() if isinstance(place.marks, dict) else enumerate(place.marks)
    for part, inner in items:
        _flatten(inner, (*path, part), values, keys)


YAML_SUFFIXES: Final = (".yaml", ".yml")
"""What a flow file's (and a flow test file's) name ends with."""
NOT_A_FLOW: Final = (
    "not a flow file: a flow file is a YAML mapping with steps: (version, name, steps...)"
)


@dataclass(frozen=True)
class LoadedYaml:
    """A loaded document: ``data`` is None when it is unusable (see ``findings``)."""

    file: str
    data: dict[str, Any] | None
    source_map: SourceMap
    traps: Mapping[DataPath, Trap]
    findings: list[Finding]


class _Stop(Exception):
    """Loading cannot go on; the finding has been recorded."""


@dataclass(slots=True)
class _Collection:
    """A mapping or list while it loads; afterwards, where it and its contents are.

    ``mark`` is where it starts; ``marks`` where each value starts, by key or index (a parser
    mark, or the :class:`_Collection` of a mapping or list); ``keys`` where each key of a
    mapping is, once (a repeated key is reported).
    """

    value: dict[Any, Any] | list[Any]
    anchor: str | None
    is_map: bool
    mark: Any
    marks: dict[Any, Any] | list[Any]
    keys: dict[Any, Any] = field(default_factory=dict)
    size: int = 1
    key: Any = None
    key_pending: bool = False
    merging: bool = False
    discarding: bool = False  # the pending key repeats an earlier one: its value is dropped

    @property
    def slot(self) -> str | int:
        """Where the next value goes: the list index, the pending key, or '<<' (a merge)."""
        if not self.is_map:
            return len(self.value)
        return "<<" if self.merging else self.key


_NO_VALUE: Final = object()
_MERGE_KEY: Final = object()  # the `<<` key, until its value arrives


class _Builder:
    """Turns parser events into plain data, traps and findings, and records where each value
    and mapping key is (``source_map``)."""

    def __init__(self, file: str, parser: Any) -> None:
        self.file = file
        self.parser = parser  # also the implicit-tag resolver
        self.source_map = SourceMap()
        self.traps: dict[DataPath, Trap] = {}
        self.findings: list[Finding] = []
        self.anchors: dict[str, tuple[Any, int]] = {}  # name -> (value, expanded size)
        self.stack: list[_Collection] = []
        self.nodes = 0
        self.root: Any = _NO_VALUE
        self.documents = 0
        # Tags of plain scalars by text: flow files repeat the same keys and values many times.
        self.implicit_tags: dict[str, str] = {}
        self.typed_starts = _typed_starts(parser)

    def locate(self, path: DataPath, at_key: bool = False) -> Position:
        """See :meth:`SourceMap.locate` (of what has loaded so far)."""
        return self.source_map.locate(path, at_key)

    def fail(self, mark: Any, code: str, message: str, hint: str = "") -> None:
        self.report(_position(mark), code, message, hint)

    def report(self, position: Position, code: str, message: str, hint: str = "") -> None:
        line, col = position
        self.findings.append(Finding(self.file, line, col, Severity.ERROR, code, message, hint))

    # -- events -------------------------------------------------------------------------------

    def feed(self, parser: Any) -> None:
        # Dispatch on the event's exact class: this loop runs once per value of the file. (Not
        # kept on self: a builder holding its own bound methods would be freed only by the
        # cyclic collector, and the whole document with it.)
        handlers: dict[type, Callable[[Any], None]] = {
            yaml.ScalarEvent: self.on_scalar,
            yaml.AliasEvent: self.alias,
            yaml.MappingStartEvent: self.open,
            yaml.SequenceStartEvent: self.open,
            yaml.MappingEndEvent: self.close,
            yaml.SequenceEndEvent: self.close,
            yaml.DocumentStartEvent: self.document,
        }
        scalar, stack, typed_starts = yaml.ScalarEvent, self.stack, self.typed_starts
        for event in iter(parser.get_event, None):  # None once the stream has ended
            # A key or value of a flow, as most events are, taken here with few calls: a text
            # key of a mapping; text or a decimal integer as a value under its key or an item
            # of a list. The rest (an anchor, a tag, a repeated key, a merge...) goes the long
            # way, through on_scalar.
            if type(event) is scalar and stack and event.tag is None and event.anchor is None:
                text = event.value
                value = text  # quoted or block text, or plain text no type starts so
                # Plain text that may be another type: text, a decimal integer, else the long way.
                if event.implicit[0] and text[:1] in typed_starts:
                    value = self.plain_value(text, event.implicit)
                top = stack[-1]
                if top.is_map and not top.key_pending:
                    if value is text and text not in top.keys:
                        top.keys[text] = event.start_mark
                        top.key, top.key_pending, top.merging = text, True, False
                        continue
                elif value is not _NO_VALUE and not top.merging and self.nodes < MAX_NODES:
                    self.take_value(top, event, value)
                    continue
            handler = handlers.get(type(event))
            if handler is not None:
                handler(event)

    def plain_value(self, text: str, implicit: Any) -> Any:
        """A plain scalar as :meth:`scalar` reads it when it is text or a decimal integer (no
        trap is spelled so); else :data:`_NO_VALUE`, for :meth:`on_scalar`."""
        tag = self.implicit_tags.get(text)
        if tag is None and _is_decimal(text) and len(text) <= _SHORT_INTEGER:
            return int(text)
        if (tag or self.implicit_tag(text, implicit)) == _STR:
            return text
        return _NO_VALUE

    def take_value(self, top: _Collection, event: Any, value: Any) -> None:
        """:meth:`place` and :meth:`attach` of the usual value (:meth:`plain_value`, or
        quoted text) into a list, or under a mapping's key, within :data:`MAX_NODES`."""
        self.nodes += 1
        top.size += 1
        if value is event.value and OPEN in value:
            self.source_map.ends[_position(event.start_mark)] = _position(event.end_mark)
        if top.is_map:
            top.marks[top.key] = event.start_mark
            if not top.discarding:
                top.value[top.key] = value
            top.key_pending = top.discarding = False
        else:
            top.marks.append(event.start_mark)  # type: ignore[union-attr]
            top.value.append(value)  # type: ignore[union-attr]

    def document(self, event: Any) -> None:
        self.documents += 1
        if self.documents > 1:
            self.fail(
                event.start_mark,
                "yaml-documents",
                "several YAML documents in one file",
                "keep one flow per file; remove the '---' separator",
            )
            raise _Stop

    def open(self, event: Any) -> None:
        is_map = type(event) is yaml.MappingStartEvent
        stack = self.stack
        top = stack[-1] if stack else None
        # The usual list or mapping, a value inside another: placed here with few calls.
        if (
            top is not None
            and event.tag is None
            and len(stack) < MAX_DEPTH
            and (top.key_pending or not top.is_map)
            and not top.merging
        ):
            collection = (
                _Collection({}, event.anchor, True, event.start_mark, {})
                if is_map
                else _Collection([], event.anchor, False, event.start_mark, [])
            )
            if top.is_map:
                top.marks[top.key] = collection
            else:
                top.marks.append(collection)  # type: ignore[union-attr]
            stack.append(collection)
            return
        self.open_checked(event, is_map)

    def open_checked(self, event: Any, is_map: bool) -> None:
        """:meth:`open` of the top level, or of a list or mapping that may be refused."""
        tag = event.tag
        if tag not in (None, "!", _MAP if is_map else _SEQ):
            self.unsafe_tag(event.start_mark, tag)
            raise _Stop
        if len(self.stack) >= MAX_DEPTH:
            self.fail(
                event.start_mark,
                "yaml-too-deep",
                f"nesting deeper than {MAX_DEPTH} levels",
                "flatten the data",
            )
            raise _Stop
        if self.stack and self.stack[-1].is_map and not self.stack[-1].key_pending:
            self.fail(event.start_mark, "yaml-key-type", "a mapping key must be a plain string")
            raise _Stop
        collection = (
            _Collection({}, event.anchor, True, event.start_mark, {})
            if is_map
            else _Collection([], event.anchor, False, event.start_mark, [])
        )
        self.place(collection)
        self.stack.append(collection)

    def close(self, _event: Any) -> None:
        stack = self.stack
        done = stack.pop()
        top = stack[-1] if stack else None
        # The usual list or mapping, a value inside another: attached here with few calls.
        if top is not None and done.anchor is None and not top.merging and self.nodes < MAX_NODES:
            self.nodes += 1  # its contents were counted as they came
            top.size += done.size
            if top.is_map:
                if not top.discarding:
                    top.value[top.key] = done.value
                top.key_pending = top.discarding = False
            else:
                top.value.append(done.value)  # type: ignore[union-attr]
            return
        if done.anchor is not None:
            self.anchors[done.anchor] = (done.value, done.size)
        self.attach(done.value, done.size, new=1)  # its contents were counted as they came

    def alias(self, event: Any) -> None:
        if event.anchor not in self.anchors:
            self.fail(
                event.start_mark,
                "yaml-alias",
                f"alias *{event.anchor} refers to no complete anchor &{event.anchor}",
                "define the anchor before using it; an anchor cannot contain itself",
            )
            raise _Stop
        value, size = self.anchors[event.anchor]
        if self.stack and self.stack[-1].is_map and not self.stack[-1].key_pending:
            self.fail(event.start_mark, "yaml-key-type", "a mapping key must be a plain string")
            raise _Stop
        self.place(event.start_mark, keep_first=True)
        self.attach(value, size)

    def on_scalar(self, event: Any) -> None:
        """A mapping's next key, or a value to attach (text :meth:`feed` has not taken)."""
        stack = self.stack
        value = self.scalar(event)
        if event.anchor is not None:  # `&name value`: an alias may repeat a single value too
            self.anchors[event.anchor] = (value, 1)
        if stack:
            top = stack[-1]
            if top.is_map and not top.key_pending:
                self.take_key(top, value, event)
                return
        if value is _MERGE_KEY:  # `<<` merges only as a key: as a value it is no data at all
            self.fail(
                event.start_mark,
                "yaml-merge",
                "'<<' is YAML's merge key, which means something only as a key",
                "quote it ('<<') for the text",
            )
            value = event.value
        self.place(event.start_mark)
        if type(value) is str and OPEN in value:
            self.source_map.ends[_position(event.start_mark)] = _position(event.end_mark)
        if value is not None and type(value) is not str:  # text is never a trap
            trap = _trap(event, value)
            if trap is not None:
                self.traps[self.child_path()] = trap
        self.attach(value, 1)

    def place(self, where: Any, keep_first: bool = False) -> None:
        """Record where the next value is: its mark, or the collection it is."""
        if not self.stack:
            self.source_map.root = where
            return
        top = self.stack[-1]
        marks = top.marks
        if isinstance(marks, list):
            marks.append(where)
        elif keep_first:
            marks.setdefault(top.slot, where)
        else:
            marks[top.slot] = where

    def attach(self, value: Any, size: int, new: int | None = None) -> None:
        """Add ``value`` (``size`` values once expanded, ``new`` of them not yet counted)."""
        self.nodes += size if new is None else new
        if self.nodes > MAX_NODES:
            self.report(
                self.locate(self.child_path()),
                "yaml-alias-bomb",
                f"the document expands to more than {MAX_NODES:,} values through aliases",
                "use fewer nested aliases (this looks like an alias bomb)",
            )
            raise _Stop
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
        elif top.merging:
            self.merge(top, value)
        else:
            if not top.discarding:
                top.value[top.key] = value
            top.key_pending = top.discarding = False

    # -- mappings -----------------------------------------------------------------------------

    def take_key(self, top: _Collection, key: Any, event: Any) -> None:
        top.merging = key is _MERGE_KEY
        if top.merging:
            top.key_pending = True
            return
        if not isinstance(key, str):
            key = self.bad_key(key, event)
        top.key_pending = True
        if key in top.keys:
            position = _position(event.start_mark)
            self.report(
                position,
                "yaml-duplicate-key",
                f"duplicate key '{key}' (first at line {top.keys[key].line + 1}); "
                "YAML would silently keep only the last one",
                "rename or remove one of them",
            )
            # Keep the first: the positions recorded for it stay true.
            top.key, top.discarding = f"{key}\x00duplicate@{position[0]}", True
            return
        top.keys[key] = event.start_mark
        top.key = key

    def bad_key(self, key: Any, event: Any) -> str:
        """Report a key that is not a string and carry on with its text."""
        text = str(event.value)
        if text == "on" and not event.style:
            return text  # a key named on (`notify: - on: [failure]`), as GitHub Actions reads it
        trap = _trap(event, key)
        if trap is not None:
            self.fail(event.start_mark, "yaml-trap", f"key {trap.message}", trap.hint)
        else:
            shown = "null" if key is None else f"the {type(key).__name__} {text}"
            self.fail(
                event.start_mark,
                "yaml-key-type",
                f"keys must be strings, found {shown}",
                f"quote it: '{text}'",
            )
        return text

    def merge(self, top: _Collection, value: Any) -> None:
        """``<<: *defaults`` (or a list of them): copy keys not given explicitly."""
        sources = value if isinstance(value, list) else [value]
        assert isinstance(top.value, dict)
        for source in sources:
            if not isinstance(source, dict):
                self.report(
                    self.locate(self.open_path()),
                    "yaml-merge",
                    "'<<' must be followed by a mapping or a list of mappings",
                )
                continue
            for key, item in source.items():
                top.value.setdefault(key, item)
        top.merging = top.key_pending = False

    # -- scalars ------------------------------------------------------------------------------

    def scalar(self, event: Any) -> Any:
        tag = event.tag
        if tag is None:
            if not event.implicit[0]:
                return event.value  # quoted or block text: YAML 1.1 resolves plain scalars only
            tag = self.implicit_tag(event.value, event.implicit)
        elif tag == "!":
            return event.value  # the non-specific tag means "a string"
        if tag in (_STR, _TIMESTAMP):
            return event.value
        if tag == _INT and len(event.value) > _SHORT_INTEGER:
            return self.long_integer(event)
        if tag == _INT and _is_decimal(event.value):
            return int(event.value)  # the usual number, without the YAML 1.1 constructor
        if tag == _NULL:
            return None
        if tag == _MERGE:
            return _MERGE_KEY
        if tag not in (_INT, _FLOAT, _BOOL):
            self.unsafe_tag(event.start_mark, tag)
            raise _Stop
        node = yaml.ScalarNode(tag, event.value)
        constructor = {_INT: _SCALARS.construct_yaml_int, _FLOAT: _SCALARS.construct_yaml_float}
        try:
            value = constructor.get(tag, _SCALARS.construct_yaml_bool)(node)
        except (ValueError, KeyError):  # an explicit tag on text that is not of its kind
            shown = tag.replace(_CORE, "!!")
            self.fail(
                event.start_mark,
                "yaml-tag",
                f"{event.value!r} is not a valid {shown} value",
                "remove the tag, or write a value of its kind",
            )
            raise _Stop from None
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(
                event.start_mark,
                "yaml-not-json",
                f"{self.named(event.value)} is not a finite number and cannot be stored as JSON",
                f"quote it ('{event.value}') or use a number",
            )
        return value

    def long_integer(self, event: Any) -> Any:
        """An integer written with many characters: refused where JSON readers would read
        infinity (past 4,300 digits Python's int() refuses it too), and kept as its text then."""
        text: str = event.value
        digits = text.lstrip("+-").replace("_", "").lower()
        digits = digits[2:] if digits[:2] in ("0x", "0o", "0b") else digits
        what = f"an integer {PAST_JSON_NUMBERS}"  # past 2**1100 in any base
        if len(digits.lstrip("0")) <= _MAX_INTEGER_DIGITS:
            value = _SCALARS.construct_yaml_int(yaml.ScalarNode(_INT, text))
            fault = json_fault(value)
            if fault is None:
                return value
            what = fault[1].removesuffix("; give it as text")
        shown = self.named(f"{text[:12]}... ({len(text):,} characters)")
        self.fail(
            event.start_mark, "yaml-not-json", f"{shown} is {what}", "quote it to keep it as text"
        )
        return text

    def named(self, text: str) -> str:
        """``text`` after the data path of the value it is (``steps.a.priority: .nan``)."""
        path = self.child_path()
        return f"{path_text(path)}: {text}" if path else text

    def implicit_tag(self, text: str, implicit: Any) -> str:
        """The tag YAML 1.1 gives an untagged plain scalar; it depends on the text only."""
        if _is_decimal(text):
            return _INT  # without asking (or remembering): numbers are seldom repeated
        tag = self.implicit_tags.get(text)
        if tag is None:
            tag = self.parser.resolve(yaml.ScalarNode, text, implicit)
            self.implicit_tags[text] = tag
        return tag

    def unsafe_tag(self, mark: Any, tag: str) -> None:
        shown = tag.replace(_CORE, "!!")
        kind = "unsafe" if "python/" in tag else "unsupported"
        self.fail(
            mark,
            "yaml-tag",
            f"{kind} tag {shown}: flow files hold plain data only",
            "remove the tag; write the value as plain text, numbers, lists and mappings",
        )

    def open_path(self) -> DataPath:
        """The data path of the innermost open list or mapping (worked out when asked: few
        values ever need theirs)."""
        return tuple(outer.slot for outer in self.stack[:-1])

    def child_path(self) -> DataPath:
        """The data path of the next value to be attached."""
        if not self.stack:
            return ()
        top = self.stack[-1]
        if top.is_map and not top.key_pending and not top.merging:
            return self.open_path()
        return (*self.open_path(), top.slot)


def _position(mark: Any) -> Position:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


class _Anything:
    def __contains__(self, _: object) -> bool:
        return True


def _typed_starts(resolver: Any) -> Container[str]:
    """First characters of the plain scalars the resolver may read as something but text.

    Every other plain scalar is text without asking it: most values of a flow file are.
    """
    table = resolver.yaml_implicit_resolvers
    if None in table or resolver.yaml_path_resolvers:  # resolvers for any text: always ask
        return _Anything()
    return frozenset(table)


def _is_decimal(text: str) -> bool:
    """Digits without a sign, '_' or leading zero: the YAML 1.1 int that is plainly int(text)."""
    return text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1)


def _trap(event: Any, value: object) -> Trap | None:
    """A trap when a plain scalar's text reads as a YAML 1.1 surprise."""
    if event.style or event.tag is not None:
        return None
    text: str = event.value
    if isinstance(value, bool):
        return None if text.lower() in ("true", "false") else Trap("boolean", text, value)
    if isinstance(value, int | float) and ":" in text:
        return Trap("sexagesimal", text, value)
    digits = text.lstrip("+-")
    if isinstance(value, int) and len(digits) > 1 and digits.startswith("0") and digits.isdigit():
        return Trap("octal", text, value)
    return None


def load_yaml(text: str, file: str = "<string>") -> LoadedYaml:
    """Load one flow document from ``text``; ``file`` is the name used in findings. A text
    over :data:`MAX_FILE_BYTES` is refused as a file that large is (:func:`read_text`)."""
    if len(text) * 4 > MAX_FILE_BYTES:  # else fewer bytes than that whatever its characters
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_FILE_BYTES:
            return LoadedYaml(file, None, SourceMap(), {}, [_too_large(file, size)])
    with gc_paused():
        return _result(_load(text, file))


def _load(text: str, file: str, parser_class: Any = _Parser) -> _Builder:
    parser = parser_class(text)
    builder = _Builder(file, parser)
    builder.source_map.text = text
    try:
        builder.feed(parser)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        if parser_class is not yaml.SafeLoader and mark is not None:
            ours = _own_finding_before(text[: mark.index], file)
            if ours is not None:
                return ours
        message, hint = _syntax_message(error), _syntax_hint(error, text, mark)
        quote = _unclosed_quote(error, text)
        if quote:  # YAML gave up at the end of the file: the mistake is where the string opens
            mark = error.context_mark
            message = f"a string opened with {quote} is never closed"
            inside = '\\"' if quote == '"' else "''"
            hint = f"close it with {quote} (a {quote} inside it is written {inside})"
        alias = _unquoted_star(error, text)
        if alias:  # a cron's `*/5 * * * *`, unquoted: say what YAML read, not its scanner's words
            mark = error.context_mark
            message = "a value that starts with * is read as a YAML alias (*name)"
            hint = "quote it: '" + alias.replace("'", "''") + "'"
        holder = _template_in_flow(error, text, mark)
        if holder:  # {run: echo ${{ params.x }}}: the template's braces end the mapping
            message = "a ${{ }} template inside {...} or [...] needs its value quoted"
            hint = f"quote it: {json.dumps(holder, ensure_ascii=False)}"
        bracket = _unclosed_bracket(builder, text, mark)
        if bracket is not None:  # the same: the mistake is where the list or mapping opens
            mark, opened = bracket
            what, closing = ("list", "]") if opened == "[" else ("mapping", "}")
            message, hint = (
                f"a {what} opened with {opened} is never closed",
                f"close it with {closing}",
            )
        key = _long_plain_key(error, text, mark)
        if key:
            message = f"a plain key is {key:,} characters; YAML allows at most {MAX_PLAIN_KEY:,}"
            hint = "use a shorter key (a step id is at most 64 characters)"
        builder.fail(mark, "yaml-syntax", message, hint)
    except yaml.reader.ReaderError as error:  # a character YAML does not allow
        builder.report(*_reader_finding(error, text))
    except yaml.YAMLError as error:
        builder.report((1, 1), "yaml-syntax", str(error).splitlines()[0])
    except _Stop:
        pass
    finally:
        parser.dispose()
    return builder


def _reader_finding(error: yaml.reader.ReaderError, text: str) -> tuple[Position, str, str]:
    """Where the character YAML refused is (its line and column), and what it is, by name: an
    escape or a bidirectional control is invisible in an editor."""
    before = text[: error.position]
    line = before.count("\n") + 1
    col = error.position - (before.rfind("\n") + 1) + 1
    code = error.character if isinstance(error.character, int) else ord(error.character)
    message = f"the character U+{code:04X} is not allowed in YAML ({error.reason})"
    return (line, col), "yaml-syntax", message


def _own_finding_before(prefix: str, file: str) -> _Builder | None:
    """The loader's own finding (nesting depth, alias bomb, ...) in the text before a parser
    error, when there is one: libyaml refuses some inputs with limits of its own (such as its
    nesting depth) that vary by version, and such a file must be reported the same whatever the
    parser. The pure-Python parser has no such limits; only the text up to the error is read."""
    builder = _load(prefix, file, yaml.SafeLoader)
    if any(finding.code != "yaml-syntax" for finding in builder.findings):
        return builder
    return None


def _result(builder: _Builder) -> LoadedYaml:
    data: dict[str, Any] | None = None
    if not builder.findings:
        root = builder.root
        if root is _NO_VALUE or root is None:
            builder.report(
                (1, 1),
                "yaml-empty",
                "the file is empty",
                "a flow starts with 'version: 1', 'name:' and 'steps:'",
            )
        elif not isinstance(root, dict):
            kind = "a list" if isinstance(root, list) else f"the {type(root).__name__} {root!r}"
            builder.report(
                builder.locate(()),
                "yaml-top-level",
                f"{NOT_A_FLOW}, found {kind}",
                "start the file with 'version: 1' on its own line",
            )
        else:
            data = root
    elif isinstance(builder.root, dict):
        data = builder.root  # problems inside, but the model can still report more
    return LoadedYaml(builder.file, data, builder.source_map, builder.traps, builder.findings)


class RefusedFile(Exception):
    """A file refused before YAML reads it (not a regular file, too large, not UTF-8):
    ``finding`` says why."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def read_text(path: Path, display_name: str | None = None) -> str:
    """The text of the flow (or flow test) file at ``path``: UTF-8, a byte order mark dropped.

    Every reader of a user's file goes through here, so that one that is a pipe or a device,
    too large or not UTF-8 is refused alike everywhere (:class:`RefusedFile`, its finding
    naming the file ``display_name``, default ``path``); OSError as ``Path.open`` raises it."""
    name = display_name or str(path)
    status = path.stat()
    if not stat.S_ISREG(status.st_mode):  # a pipe would block the read, /dev/zero never end it
        raise RefusedFile(_refusal(name, "the file is not a regular file (a pipe, a device...)"))
    if status.st_size > MAX_FILE_BYTES:
        raise RefusedFile(_too_large(name, status.st_size))
    with path.open("rb") as file:  # no further than the limit, should it grow meanwhile
        raw = file.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise RefusedFile(_too_large(name, len(raw)))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line_start = raw.rfind(b"\n", 0, error.start) + 1
        line = raw.count(b"\n", 0, error.start) + 1
        col = len(raw[line_start : error.start].decode("utf-8", "replace")) + 1
        message = f"the file is not UTF-8 text (byte {error.start})"
        raise RefusedFile(_refusal(name, message, line, col)) from None


def load_file(path: Path, display_name: str | None = None) -> LoadedYaml:
    """Read (:func:`read_text`) and load ``path``."""
    name = display_name or str(path)
    try:
        text = read_text(path, name)
    except RefusedFile as refused:
        return LoadedYaml(name, None, SourceMap(), {}, [refused.finding])
    return load_yaml(text, name)


def _too_large(file: str, size: int) -> Finding:
    return _refusal(file, f"the file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")


def _refusal(file: str, message: str, line: int = 1, col: int = 1) -> Finding:
    return Finding(file, line, col, Severity.ERROR, "yaml-file", message)


_SYNTAX_HINTS = (
    ("tab", "indent with spaces, not tabs"),
    ("mapping values are not allowed", "quote a value that contains ': ', or fix the indentation"),
    ("could not find expected ':'", "a key needs ': ' after it; check this line and the one above"),
    ("did not find expected key", "check the indentation of this line against the lines above"),
    ("found undefined alias", "define the anchor (&name) before the alias (*name)"),
    ("did not find expected ',' or", "close the list or mapping with ']' or '}'"),
    ("found unexpected end of stream", "a quote or bracket is not closed"),
    ("found character that cannot start any token", "quote a value that starts with @, ` or %"),
    (
        "found unknown escape character",
        "in double quotes \\ starts an escape (\\n, \\t, \\\\): write \\\\ for a backslash, "
        "or use single quotes",
    ),
)


# YAML reads a plain (not `? `) key of more characters as no key at all.
MAX_PLAIN_KEY: Final = 1024


def _long_plain_key(error: yaml.MarkedYAMLError, source: str, mark: Any) -> int:
    """The length of the plain key before ``mark`` when it is what YAML refused, else 0."""
    if mark is None or "mapping values are not allowed" not in str(error.problem):
        return 0
    start = source.rfind("\n", 0, mark.index) + 1
    key = source[start : mark.index].strip().removeprefix("- ")
    return len(key) if len(key) > MAX_PLAIN_KEY else 0


def _unclosed_quote(error: yaml.MarkedYAMLError, source: str) -> str:
    """The quote of a quoted string YAML reached the end of the file in, if that is the error."""
    mark = error.context_mark
    if mark is None or error.context != "while scanning a quoted scalar":
        return ""
    if "end of stream" not in str(error.problem):
        return ""
    quote = source[mark.index : mark.index + 1]
    return quote if quote in ("'", '"') else ""


def _unquoted_star(error: yaml.MarkedYAMLError, source: str) -> str:
    """The value from its ``*`` to its end when YAML refused it as an alias without a name
    (``*/5 * * * *``), else empty. In a flow mapping or list the value ends at ``,``, ``}``
    or ``]``; anywhere it ends before a comment."""
    mark = error.context_mark
    if mark is None or error.context != "while scanning an alias":
        return ""
    line_start = source.rfind("\n", 0, mark.index) + 1
    line_end = source.find("\n", mark.index)
    value = source[mark.index : len(source) if line_end < 0 else line_end].split(" #")[0]
    if any(opened in source[line_start : mark.index] for opened in "[{"):
        value = re.split(r",\s|[]}]", value)[0]
    return value.strip()


def _template_in_flow(error: yaml.MarkedYAMLError, source: str, mark: Any) -> str:
    """The plain value holding a ``${{ }}`` template whose braces YAML took for the end of the
    ``{...}`` or ``[...]`` around it (``{run: echo ${{ params.x }}}``), else empty."""
    at = -1 if mark is None else mark.index
    if "while parsing a flow" not in str(error.context) or source[at - 1 : at + 2] != "${{":
        return ""
    line_start = source.rfind("\n", 0, at) + 1
    before = source[line_start : at - 1]
    start = max(before.rfind(": ") + 2, *(before.rfind(sign) + 1 for sign in "[{,"))
    closed = source.find("}}", at)
    if closed < 0:
        return ""
    after = source[closed + 2 :]
    stop = closed + 2 + next((i for i, char in enumerate(after) if char in ",}]\n"), len(after))
    return source[line_start + start : stop].strip()


def _unclosed_bracket(builder: _Builder, source: str, mark: Any) -> tuple[Any, str] | None:
    """Where the innermost ``[`` or ``{`` still open starts, and which, when YAML gave up at the
    end of the file (nothing but white space after ``mark``)."""
    if mark is None or source[mark.index :].strip():
        return None
    for collection in reversed(builder.stack):
        opened = source[collection.mark.index : collection.mark.index + 1]
        if opened in ("[", "{"):
            return collection.mark, opened
    return None


def _syntax_message(error: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (error.problem, error.context) if p]
    return "YAML syntax: " + ("; ".join(parts) if parts else "cannot parse")


def _syntax_hint(error: yaml.MarkedYAMLError, source: str, mark: Any) -> str:
    if mark is not None and source[mark.index : mark.index + 1] == "\t":
        return "indent with spaces, not tabs"
    text = f"{error.problem} {error.context}"
    return next((hint for needle, hint in _SYNTAX_HINTS if needle in text), "")
