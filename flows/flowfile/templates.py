"""Template references such as ``${{ params.date }}`` and ``${{ steps.load.outputs.rows }}``.

The one place that knows the syntax. A template is a dotted path between ``${{`` and ``}}``;
nothing is ever evaluated, so it cannot collide with shell ``${VAR}`` or run code.

Rendering rule, the same at expansion and in the worker: a string that is exactly one template
becomes the referenced value with its type (a list stays a list); a template inside a longer
string is replaced by the value as text (see :func:`to_text`). Rendering is a single pass: text
that a value brings in is never scanned for templates again.

Roots: ``params``, ``run`` and the foreach variable are resolved at expansion; ``steps`` only
when the job starts (:mod:`flows.flowfile.job_data`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, NamedTuple

from flows.flowfile.findings import DataPath, Within, describe

OPEN: Final = "${{"
CLOSE: Final = "}}"
SEGMENT_PATTERN: Final = r"[A-Za-z_][A-Za-z0-9_-]*"
_TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_EXPRESSION = re.compile(rf"{SEGMENT_PATTERN}(?:\.{SEGMENT_PATTERN})*")
_WHOLE = re.compile(r"\s*\$\{\{((?:(?!\}\}).)*)\}\}\s*", re.DOTALL)
# The usual text, one template of a dotted path: what _WHOLE and _parse would find, in one match
# (\s is what str.strip() takes away, and no piece of the path holds '}}').
_WHOLE_PATH = re.compile(
    rf"\s*(\$\{{\{{\s*({SEGMENT_PATTERN}(?:\.{SEGMENT_PATTERN})*)\s*\}}\}})\s*"
)
WHOLE_TEMPLATE_PATTERN: Final = r"^\s*\$\{\{[^}]*\}\}\s*$"
"""For the JSON Schema: a string that is a single template."""

# Roots a reference can start with; the foreach variable is the one other root.
PARAMS: Final = "params"
RUN: Final = "run"
STEPS: Final = "steps"
MATRIX: Final = "matrix"
"""The root of a matrix step's values: ``${{ matrix.<axis> }}``."""
RUN_FIELDS: Final = ("id", "flow", "logical_date", "logical_time")
"""``run.id``; ``run.flow`` (the flow's name); ``run.logical_date`` (YYYY-MM-DD) and
``run.logical_time`` (ISO 8601), the moment the run stands for (a schedule's fire time)."""
STEP_FIELDS: Final = ("outputs", "status")

KEEP: Final = object()
"""Returned by a lookup to leave a template exactly as written (resolved later)."""


class TemplateSyntaxError(ValueError):
    """A ``${{`` that is not closed or holds something other than a dotted path."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A parsed template: ``${{ steps.load.outputs.rows }}`` has path (steps, load, ...)."""

    path: tuple[str, ...]

    @property
    def root(self) -> str:
        return self.path[0]

    def __str__(self) -> str:
        return ".".join(self.path)


def _parse(expression: str) -> Reference:
    stripped = expression.strip()
    if not _EXPRESSION.fullmatch(stripped):
        raise TemplateSyntaxError(
            f"'${{{{{expression}}}}}' is not a reference: a template holds a dotted path such "
            "as params.date or steps.extract.outputs.uri, nothing else"
        )
    return Reference(tuple(stripped.split(".")))


class _Parsed(NamedTuple):
    """A text holding templates, parsed: ``texts`` are the pieces around the templates (one
    more than ``references``), ``written`` each template as written."""

    texts: tuple[str, ...]
    references: tuple[Reference, ...]
    written: tuple[str, ...]
    whole: Reference | None  # the text is exactly this one template
    closed: bool  # no '${{' is left without its '}}'


_PARSED_TEXTS: Final = 16_384
"""Texts whose parse is kept: validation parses each template, expansion and the worker parse
it again; the same text is then found here (a flow of 10,000 steps has about as many)."""
_PARSED_LENGTH: Final = 1024
"""Longer texts are parsed each time, so that the kept ones stay small."""


def _parsed(text: str) -> _Parsed | None:
    """``text`` parsed, or None when a template in it does not parse (the callers then take the
    long way, which raises at the moment it always did)."""
    return _parse_text(text) if len(text) > _PARSED_LENGTH else _parse_kept(text)


def _parse_text(text: str) -> _Parsed | None:
    usual = _WHOLE_PATH.fullmatch(text)
    if usual is not None:
        start, end = usual.span(1)
        reference = Reference(tuple(usual.group(2).split(".")))
        return _Parsed((text[:start], text[end:]), (reference,), (usual.group(1),), reference, True)
    try:
        whole = _WHOLE.fullmatch(text)
        if whole is not None:  # one template with any expression, white space around it
            start, end = whole.start(1) - len(OPEN), whole.end(1) + len(CLOSE)
            reference = _parse(whole.group(1))
            written = text[start:end]
            return _Parsed((text[:start], text[end:]), (reference,), (written,), reference, True)
        matches = list(_TEMPLATE.finditer(text))
        found = tuple(_parse(match.group(1)) for match in matches)
    except TemplateSyntaxError:
        return None
    bounds = [0, *(i for match in matches for i in match.span()), len(text)]
    texts = tuple(text[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2))
    closed = OPEN not in "".join(texts)
    return _Parsed(texts, found, tuple(match.group(0) for match in matches), None, closed)


_parse_kept = lru_cache(maxsize=_PARSED_TEXTS)(_parse_text)


def forget_kept_parses() -> None:
    """Empty the kept parses, so that what comes next parses every text as a new process would
    (the benchmarks time each round of a big flow so)."""
    _parse_kept.cache_clear()


def references(text: str) -> list[Reference]:
    """Every reference in ``text``, in order; raises :class:`TemplateSyntaxError`."""
    if OPEN not in text:
        return []
    parsed = _parsed(text)
    if parsed is None:
        found = [_parse(match.group(1)) for match in _TEMPLATE.finditer(text)]  # raises
        parsed = _Parsed((), tuple(found), (), None, not _TEMPLATE.sub("", text).count(OPEN))
    if not parsed.closed:
        raise TemplateSyntaxError("'${{' is not closed with '}}'")
    return list(parsed.references)


@dataclass(frozen=True, slots=True)
class Template:
    """One template of a text, parsed on its own: ``written`` as in the text (``${{ x }}``), the
    ``occurrence``-th (from 0) of that writing there, and its ``reference`` or its ``error``."""

    written: str
    occurrence: int
    reference: Reference | None = None
    error: TemplateSyntaxError | None = None


def located_references(text: str) -> list[tuple[Reference, Within]] | None:
    """Every reference of ``text`` in order, each with its template as written and which
    occurrence of that writing it is (as :func:`templates` gives them), when every template
    parses and each is closed, the usual case; None otherwise (:func:`templates` says which do
    not). No :class:`Template` is made: validation reads every template of a file this way."""
    if OPEN not in text:
        return []
    parsed = _parsed(text)
    if parsed is None or not parsed.closed:
        return None
    if parsed.whole is not None:  # the parse kept from validation's other reads
        return [(parsed.whole, (parsed.written[0], 0))]
    seen: dict[str, int] = {}
    found: list[tuple[Reference, Within]] = []
    for written, reference in zip(parsed.written, parsed.references, strict=True):
        occurrence = seen.get(written, 0)
        seen[written] = occurrence + 1
        found.append((reference, (written, occurrence)))
    return found


def templates(text: str) -> list[Template]:
    """Every template of ``text`` in order, a malformed one among them: one does not hide the
    others (validation reports each). A ``${{`` left unclosed comes last, written ``${{``."""
    located = located_references(text)
    if located is not None:
        return [Template(*within, reference) for reference, within in located]
    found: list[Template] = []
    end = 0
    for match in _TEMPLATE.finditer(text):  # from each '${{' to the next '}}'
        end = match.end()
        written, occurrence = match.group(0), text.count(match.group(0), 0, match.start())
        try:
            found.append(Template(written, occurrence, _parse(match.group(1))))
        except TemplateSyntaxError as error:
            found.append(Template(written, occurrence, error=error))
    unclosed = text.find(OPEN, end)
    if unclosed >= 0:
        not_closed = TemplateSyntaxError("'${{' is not closed with '}}'")
        found.append(Template(OPEN, text.count(OPEN, 0, unclosed), error=not_closed))
    return found


def split(text: str) -> tuple[tuple[str, ...], tuple[Reference, ...]]:
    """``text`` as the pieces around its templates (one more than the references) and the
    references in order; raises :class:`TemplateSyntaxError` as :func:`references` does."""
    if OPEN not in text:
        return (text,), ()
    parsed = _parsed(text)
    if parsed is None or not parsed.closed:
        references(text)  # raises, naming the problem
        raise TemplateSyntaxError("'${{' is not closed with '}}'")
    return parsed.texts, parsed.references


def whole_reference(text: str) -> Reference | None:
    """The reference when ``text`` is exactly one template (surrounding spaces allowed)."""
    if OPEN not in text:
        return None
    parsed = _parsed(text)
    if parsed is not None:
        return parsed.whole
    match = _WHOLE.fullmatch(text)
    return _parse(match.group(1)) if match else None  # raises


def strings(value: Any, path: DataPath = ()) -> list[tuple[DataPath, str]]:
    """Every string inside ``value`` (mapping values and list items, not keys) with its path."""
    if isinstance(value, str):
        return [(path, value)]
    found: list[tuple[DataPath, str]] = []
    _collect_strings(value, path, found)
    return found


def template_strings(value: Any, path: DataPath = ()) -> list[tuple[DataPath, str]]:
    """The strings of :func:`strings` that hold ``${{``, in the same order: the ones whose
    templates are read (a path is made only for them)."""
    if isinstance(value, str):
        return [(path, value)] if OPEN in value else []
    found: list[tuple[DataPath, str]] = []
    _collect_strings(value, path, found, OPEN)
    return found


LEAVES: Final = frozenset({int, float, bool, type(None)})
"""Types of values with no string inside: walks do not look into them."""


def _collect_strings(
    value: Any, path: DataPath, found: list[tuple[DataPath, str]], within: str = ""
) -> None:
    """The strings under ``value`` that hold ``within`` (every one for ''), into ``found``."""
    # A list, not a generator, and paths made only for strings and containers: validation
    # walks every value of a file this way.
    if type(value) is dict or isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        if isinstance(item, str):
            if within in item:
                found.append(((*path, key), item))
        elif type(item) not in LEAVES:
            _collect_strings(item, (*path, key), found, within)


def to_text(value: Any) -> str:
    """A value as it appears inside a longer string: text as is, null as empty, else JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


Lookup = Callable[[Reference], Any]
"""Resolve one reference to its value, or return :data:`KEEP` to leave it as written."""


def render(value: Any, lookup: Lookup) -> Any:
    """``value`` with every template resolved by ``lookup``, following the rendering rule."""
    if isinstance(value, str):
        return _render_string(value, lookup)
    if type(value) in LEAVES:
        return value
    # Text without a template and the leaves are kept as they are without a call: most are.
    if isinstance(value, dict | Mapping):
        return {
            key: item
            if (type(item) is str and OPEN not in item) or type(item) in LEAVES
            else render(item, lookup)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            item
            if (type(item) is str and OPEN not in item) or type(item) in LEAVES
            else render(item, lookup)
            for item in value
        ]
    return value


def _render_string(text: str, lookup: Lookup) -> Any:
    if OPEN not in text:
        return text
    parsed = _parsed(text)
    if parsed is None:
        return _render_slowly(text, lookup)
    if parsed.whole is not None:
        resolved = lookup(parsed.whole)
        return text if resolved is KEEP else resolved
    pieces = [parsed.texts[0]]
    for reference, written, after in zip(
        parsed.references, parsed.written, parsed.texts[1:], strict=True
    ):
        resolved = lookup(reference)
        pieces += (written if resolved is KEEP else to_text(resolved), after)
    return "".join(pieces)


def _render_slowly(text: str, lookup: Lookup) -> Any:
    """:func:`_render_string` of a text with a template that does not parse: the templates
    before it are looked up, then it raises."""
    whole = whole_reference(text)
    if whole is not None:
        resolved = lookup(whole)
        return text if resolved is KEEP else resolved

    def replace(match: re.Match[str]) -> str:
        resolved = lookup(_parse(match.group(1)))
        return match.group(0) if resolved is KEEP else to_text(resolved)

    return _TEMPLATE.sub(replace, text)


def select(value: Any, keys: tuple[str, ...], reference: Reference) -> Any:
    """``value[k1][k2]...`` for the rest of a reference; KeyError naming what is missing."""
    for depth, key in enumerate(keys):
        if not isinstance(value, Mapping) or key not in value:
            where = ".".join(reference.path[: len(reference.path) - len(keys) + depth])
            if not isinstance(value, Mapping):
                # A result that is a number or text (a value JSON cannot hold is stored as its
                # text): say what it is, not that a key is missing.
                what = f"is {describe(value)}, not a mapping with the key '{key}'"
                raise KeyError(f"{reference}: {where} {what}")
            known = ", ".join(sorted(map(str, value)))
            raise KeyError(
                f"{reference}: {where} has no key '{key}'" + (f" (keys: {known})" if known else "")
            )
        value = value[key]
    return value
