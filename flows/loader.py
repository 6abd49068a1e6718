"""Safe YAML loading that remembers where every value came from.

The document is built straight from the safe parser's event stream (libyaml when available),
with an explicit stack instead of recursion: nesting depth and alias expansion are bounded before
they can exhaust memory or the C stack, and every value's line and column (1-based) is recorded
in a :class:`SourceMap` under its data path. Only plain data is produced: mappings, lists,
strings, numbers, booleans and null. Timestamps stay text (the model decides what a date is).

Refused, each as a finding with its position: syntax errors, duplicate keys, non-string keys,
tags other than the YAML core ones (``!!python/...``), alias bombs, empty files, several
documents, a top level that is not a mapping, non-finite floats.

Positions are worked out only when something asks for one (:class:`SourceMap`), by loading the
text a second time with them recorded: a file without findings never needs them, and recording
the position of every value costs about a fifth of loading a large file.

YAML 1.1 traps (``2:00`` read as 120, ``0200`` as 128, ``on``/``no`` as booleans) are not errors
by themselves: they are recorded as :class:`Trap` entries, and validation reports them where the
model shows the author meant text (see :mod:`flows.model_errors`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from yaml.constructor import SafeConstructor

from flows.findings import DataPath, Finding, Severity

MAX_FILE_BYTES: Final = 10 * 1024 * 1024
MAX_DEPTH: Final = 64
"""Deepest nesting of mappings and lists; flow files need far fewer than this."""
MAX_NODES: Final = 2_000_000
"""Values in the document once every alias is expanded (the alias-bomb bound)."""

_CORE = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_CORE + t for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP, _MERGE, _MAP, _SEQ = (_CORE + t for t in ("timestamp", "merge", "map", "seq"))

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALARS = SafeConstructor()  # reused for YAML 1.1 int, float and bool spellings


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

    Worked out on first use from ``text`` (see the module doc); empty without a text.
    """

    def __init__(self, text: str = "") -> None:
        self._text = text

    @cached_property
    def _recorded(self) -> _Builder:
        return _load(self._text, "<positions>", record_positions=True)

    @property
    def values(self) -> dict[DataPath, Position]:
        return self._recorded.values

    @property
    def keys(self) -> dict[DataPath, Position]:
        return self._recorded.keys

    def locate(self, path: DataPath, at_key: bool = False) -> Position:
        """Position of ``path``; of its nearest recorded ancestor when it has none of its own.

        Values reached through an alias are located at the alias.
        """
        return self._recorded.locate(path, at_key)


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
    """A mapping or list whose end event has not come yet."""

    value: dict[Any, Any] | list[Any]
    path: DataPath
    anchor: str | None
    is_map: bool
    size: int = 1
    key: Any = None
    key_pending: bool = False
    explicit: dict[Any, int] = field(default_factory=dict)  # key -> line, for duplicate reports
    merging: bool = False
    discarding: bool = False  # the pending key repeats an earlier one: its value is dropped


_NO_VALUE: Final = object()
_MERGE_KEY: Final = object()  # the `<<` key, until its value arrives


class _Builder:
    """Turns parser events into plain data, traps and findings; with ``record_positions``, also
    into the position of every value (``values``) and mapping key (``keys``) by data path.

    Recording changes nothing else, so both kinds of load of one text agree on everything.
    """

    def __init__(self, file: str, parser: Any, text: str, record_positions: bool) -> None:
        self.file = file
        self.parser = parser  # also the implicit-tag resolver
        self.record_positions = record_positions
        self.values: dict[DataPath, Position] = {}  # recorded positions (record_positions)
        self.keys: dict[DataPath, Position] = {}
        # The loaded document's positions, worked out when first asked (see locate).
        self.source_map = SourceMap(text)
        self.traps: dict[DataPath, Trap] = {}
        self.findings: list[Finding] = []
        self.anchors: dict[str, tuple[Any, int]] = {}  # name -> (value, expanded size)
        self.stack: list[_Collection] = []
        self.nodes = 0
        self.root: Any = _NO_VALUE
        self.documents = 0
        # Tags by (text, implicit): flow files repeat the same keys and values many times over.
        self.implicit_tags: dict[tuple[str, Any], str] = {}
        self.handlers: dict[type, Callable[[Any], None]] = {
            yaml.ScalarEvent: self.on_scalar,
            yaml.AliasEvent: self.alias,
            yaml.MappingStartEvent: self.open,
            yaml.SequenceStartEvent: self.open,
            yaml.MappingEndEvent: self.close,
            yaml.SequenceEndEvent: self.close,
            yaml.DocumentStartEvent: self.document,
        }

    def locate(self, path: DataPath, at_key: bool = False) -> Position:
        """See :meth:`SourceMap.locate`; a recording builder answers from what it recorded."""
        if not self.record_positions:
            return self.source_map.locate(path, at_key)
        if at_key and path in self.keys:
            return self.keys[path]
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            if prefix in self.values:
                return self.values[prefix]
        return (1, 1)

    def fail(self, mark: Any, code: str, message: str, hint: str = "") -> None:
        self.report(_position(mark), code, message, hint)

    def report(self, position: Position, code: str, message: str, hint: str = "") -> None:
        line, col = position
        self.findings.append(Finding(self.file, line, col, Severity.ERROR, code, message, hint))

    # -- events -------------------------------------------------------------------------------

    def feed(self, parser: Any) -> None:
        # Dispatch on the event's exact class: this loop runs once per value of the file.
        handlers = self.handlers
        for event in iter(parser.get_event, None):  # None once the stream has ended
            handler = handlers.get(type(event))
            if handler is not None:
                handler(event)

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
        path = self.child_path()
        if self.record_positions:
            self.values[path] = _position(event.start_mark)
        self.stack.append(_Collection({} if is_map else [], path, event.anchor, is_map))

    def close(self, event: Any) -> None:
        done = self.stack.pop()
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
        if self.record_positions:
            self.values.setdefault(self.child_path(), _position(event.start_mark))
        self.attach(value, size)

    def on_scalar(self, event: Any) -> None:
        """A mapping's next key, or a value to attach."""
        value = self.scalar(event)
        if self.stack and self.stack[-1].is_map and not self.stack[-1].key_pending:
            self.take_key(self.stack[-1], value, event)
            return
        if self.record_positions:
            self.values[self.child_path()] = _position(event.start_mark)
        if value is not None and type(value) is not str:  # text is never a trap
            trap = _trap(event, value)
            if trap is not None:
                self.traps[self.child_path()] = trap
        self.attach(value, 1)

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
            key = self.bad_key(key, event, top.path)
        top.key_pending = True
        if key in top.explicit:
            position = _position(event.start_mark)
            self.report(
                position,
                "yaml-duplicate-key",
                f"duplicate key '{key}' (first at line {top.explicit[key]}); "
                "YAML would silently keep only the last one",
                "rename or remove one of them",
            )
            # Keep the first: the positions recorded for it stay true.
            top.key, top.discarding = f"{key}\x00duplicate@{position[0]}", True
            return
        top.explicit[key] = event.start_mark.line + 1
        top.key = key
        if self.record_positions:
            self.keys[(*top.path, key)] = _position(event.start_mark)

    def bad_key(self, key: Any, event: Any, parent: DataPath) -> str:
        """Report a key that is not a string and carry on with its text."""
        text = str(event.value)
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
                    self.locate(top.path),
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
        if tag == "!":
            return event.value  # the non-specific tag means "a string"
        if tag is None:
            tag = self.implicit_tag(event)
        if tag in (_STR, _TIMESTAMP):
            return event.value
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
                f"{event.value} is not a finite number and cannot be stored as JSON",
                f"quote it ('{event.value}') or use a number",
            )
        return value

    def implicit_tag(self, event: Any) -> str:
        """The tag YAML 1.1 gives an untagged scalar; it depends on the text only."""
        key = (event.value, event.implicit)
        tag = self.implicit_tags.get(key)
        if tag is None:
            tag = self.parser.resolve(yaml.ScalarNode, event.value, event.implicit)
            self.implicit_tags[key] = tag
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

    def child_path(self) -> DataPath:
        """The data path of the next value to be attached."""
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.value, list):
            return (*top.path, len(top.value))
        if top.merging:
            return (*top.path, "<<")
        return (*top.path, top.key) if top.key_pending else top.path


def _position(mark: Any) -> Position:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


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
    """Load one flow document from ``text``; ``file`` is the name used in findings."""
    return _result(_load(text, file, record_positions=False))


def _load(text: str, file: str, record_positions: bool) -> _Builder:
    parser = _Parser(text)
    builder = _Builder(file, parser, text, record_positions)
    try:
        builder.feed(parser)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        builder.fail(mark, "yaml-syntax", _syntax_message(error), _syntax_hint(error, text, mark))
    except yaml.YAMLError as error:  # reader errors: control characters and the like
        builder.report((1, 1), "yaml-syntax", str(error).splitlines()[0])
    except _Stop:
        pass
    finally:
        parser.dispose()
    return builder


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
                f"the top level must be a mapping of keys (version, name, steps...), found {kind}",
                "start the file with 'version: 1' on its own line",
            )
        else:
            data = root
    elif isinstance(builder.root, dict):
        data = builder.root  # problems inside, but the model can still report more
    return LoadedYaml(builder.file, data, builder.source_map, builder.traps, builder.findings)


def load_file(path: Path, display_name: str | None = None) -> LoadedYaml:
    """Read and load ``path``; refuses files over :data:`MAX_FILE_BYTES` or not UTF-8."""
    name = display_name or str(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return _refused(name, f"the file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        return _refused(name, f"the file is not UTF-8 text (byte {error.start})", line)
    return load_yaml(text, name)


def _refused(file: str, message: str, line: int = 1) -> LoadedYaml:
    finding = Finding(file, line, 1, Severity.ERROR, "yaml-file", message)
    return LoadedYaml(file, None, SourceMap(), {}, [finding])


_SYNTAX_HINTS = (
    ("tab", "indent with spaces, not tabs"),
    ("mapping values are not allowed", "quote a value that contains ': ', or fix the indentation"),
    ("could not find expected ':'", "a key needs ': ' after it; check this line and the one above"),
    ("did not find expected key", "check the indentation of this line against the lines above"),
    ("found undefined alias", "define the anchor (&name) before the alias (*name)"),
    ("did not find expected ',' or", "close the list or mapping with ']' or '}'"),
    ("found unexpected end of stream", "a quote or bracket is not closed"),
)


def _syntax_message(error: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (error.problem, error.context) if p]
    return "YAML syntax: " + ("; ".join(parts) if parts else "cannot parse")


def _syntax_hint(error: yaml.MarkedYAMLError, source: str, mark: Any) -> str:
    if mark is not None and source[mark.index : mark.index + 1] == "\t":
        return "indent with spaces, not tabs"
    text = f"{error.problem} {error.context}"
    return next((hint for needle, hint in _SYNTAX_HINTS if needle in text), "")
