"""``if:`` conditions: a small expression language, parsed and evaluated here, never by ``eval``.

An expression is written bare or inside one ``${{ ... }}``::

    params.publish && steps.list.outputs.files != []
    !(run.flow in ['a', 'b']) || startsWith(item.name, 'de-')

Grammar (lowest precedence first)::

    or      := and ('||' and)*
    and     := not ('&&' not)*
    not     := '!' not | compare
    compare := operand (('==' | '!=' | '<' | '<=' | '>' | '>=' | 'in') operand)?
    operand := literal | reference | call | '[' (or (',' or)*)? ']' | '(' or ')'
    literal := number | 'text' | "text" | true | false | null
    call    := contains(a, b) | startsWith(a, b) | length(a)

A reference is a dotted path as in templates (``params.x``, ``run.flow``, ``steps.a.outputs.k``,
``steps.a.status``, the foreach variable). ``&&``, ``||`` and ``!`` read truthiness (null,
false, 0, '', [] and {} are false) and give booleans; ``==`` compares JSON values; ``<`` and
friends compare two numbers or two strings; ``a in b`` is an item of a list, a substring of a
string or a key of an object. Anything else is a :class:`ConditionError` naming the offset.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from flows.flowfile.findings import did_you_mean
from flows.flowfile.templates import CLOSE, OPEN, SEGMENT_PATTERN, Reference

MAX_LENGTH: Final = 1000
MAX_DEPTH: Final = 64
FUNCTIONS: Final = {"contains": 2, "startsWith": 2, "length": 1}
"""The functions an expression may call, with their number of arguments."""

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
    | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<name>"""
    + SEGMENT_PATTERN
    + r"""(?:\."""
    + SEGMENT_PATTERN
    + r""")*)
    | (?P<op>&&|\|\||==|!=|<=|>=|[<>!(),\[\]])
    )""",
    re.VERBOSE,
)
_COMPARISONS: Final = ("==", "!=", "<", "<=", ">", ">=", "in")
_KEYWORDS: Final = {"true": True, "false": False, "null": None}


class ConditionError(ValueError):
    """An expression that does not parse, or a value it cannot work on. ``offset`` is where,
    in the expression text (0-based); ``hint``, when given, how to put it right."""

    def __init__(self, message: str, offset: int = 0, hint: str = "") -> None:
        super().__init__(message)
        self.offset = offset
        self.hint = hint


# -- syntax tree --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any
    offset: int


@dataclass(frozen=True, slots=True)
class Ref:
    reference: Reference
    offset: int


@dataclass(frozen=True, slots=True)
class ListOf:
    items: tuple[Node, ...]
    offset: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    offset: int


@dataclass(frozen=True, slots=True)
class Logic:
    op: str  # '&&' or '||'
    left: Node
    right: Node
    offset: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Node
    right: Node
    offset: int


@dataclass(frozen=True, slots=True)
class Call:
    function: str
    args: tuple[Node, ...]
    offset: int


Node = Literal | Ref | ListOf | Not | Logic | Compare | Call


def expression_of(text: str) -> str:
    """The expression of a condition: ``text`` without one ``${{ ... }}`` around it, stripped.
    Offsets (:class:`ConditionError`, :func:`references_of`) count in it."""
    stripped = text.strip()
    if stripped.startswith(OPEN) and stripped.endswith(CLOSE):
        stripped = stripped[len(OPEN) : -len(CLOSE)].strip()
    return stripped


def parse(text: str) -> Node:
    """The syntax tree of a condition (bare or in ``${{ }}``); :class:`ConditionError` else."""
    expression = expression_of(text)
    if len(expression) > MAX_LENGTH:
        raise ConditionError(f"the condition is longer than {MAX_LENGTH} characters", 0)
    return _Parser(expression).whole()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, offset)
        position = 0
        while position < len(text):
            if not text[position:].strip():
                break
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                where = len(text[position:]) - len(text[position:].lstrip()) + position
                raise ConditionError(f"unexpected {text[where]!r}", where)
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.index = 0
        self.depth = 0

    def peek(self) -> tuple[str, str, int]:
        if self.index < len(self.tokens):
            return self.tokens[self.index]
        return ("end", "", len(self.text))

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        token = self.peek()
        if expected is not None and token[1] != expected:
            found = "the end" if token[0] == "end" else repr(token[1])
            raise ConditionError(f"expected {expected!r}, found {found}", token[2])
        self.index += 1
        return token

    def whole(self) -> Node:
        if not self.tokens:
            raise ConditionError("the condition is empty", 0)
        node = self.or_()
        kind, text, offset = self.peek()
        if kind != "end":
            raise ConditionError(f"unexpected {text!r} after a complete expression", offset)
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.peek()[1] == "||":
            offset = self.take()[2]
            node = Logic("||", node, self.and_(), offset)
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.peek()[1] == "&&":
            offset = self.take()[2]
            node = Logic("&&", node, self.not_(), offset)
        return node

    def not_(self) -> Node:
        if self.peek()[1] == "!":
            offset = self.take()[2]
            return Not(self.nested(self.not_), offset)
        return self.compare()

    def compare(self) -> Node:
        left = self.operand()
        kind, text, offset = self.peek()
        if (kind == "op" and text in _COMPARISONS) or (kind == "name" and text == "in"):
            self.take()
            return Compare(text, left, self.operand(), offset)
        return left

    def nested(self, parse: Callable[[], Node]) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            offset = self.peek()[2]
            raise ConditionError(f"the condition nests more than {MAX_DEPTH} levels", offset)
        try:
            return parse()
        finally:
            self.depth -= 1

    def operand(self) -> Node:
        kind, text, offset = self.take()
        if kind == "number":
            return Literal(float(text) if re.search(r"[.eE]", text) else int(text), offset)
        if kind == "string":
            return Literal(_unquote(text), offset)
        if kind == "name":
            if text in _KEYWORDS:
                return Literal(_KEYWORDS[text], offset)
            if self.peek()[1] == "(":
                return self.call(text, offset)
            return Ref(Reference(tuple(text.split("."))), offset)
        if text == "(":
            node = self.nested(self.or_)
            self.take(")")
            return node
        if text == "[":
            items: list[Node] = []
            while self.peek()[1] != "]":
                items.append(self.nested(self.or_))
                if self.peek()[1] != ",":
                    break
                self.take(",")
            self.take("]")
            return ListOf(tuple(items), offset)
        found = "the end" if kind == "end" else repr(text)
        raise ConditionError(f"expected a value, found {found}", offset)

    def call(self, name: str, offset: int) -> Node:
        if name not in FUNCTIONS:
            close = did_you_mean(name, FUNCTIONS)
            message = f"unknown function '{name}'" + (f": {close}" if close else "")
            raise ConditionError(f"{message} (known: {', '.join(FUNCTIONS)})", offset)
        self.take("(")
        args: list[Node] = []
        while self.peek()[1] != ")":
            args.append(self.nested(self.or_))
            if self.peek()[1] != ",":
                break
            self.take(",")
        self.take(")")
        if len(args) != FUNCTIONS[name]:
            raise ConditionError(
                f"{name}() takes {FUNCTIONS[name]} argument(s), got {len(args)}", offset
            )
        return Call(name, tuple(args), offset)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def references_of(node: Node) -> list[tuple[Reference, int]]:
    """Every reference in the tree with its offset, in order."""
    found: list[tuple[Reference, int]] = []
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Ref):
            found.append((current.reference, current.offset))
        elif isinstance(current, ListOf | Call):
            stack.extend(reversed(current.items if isinstance(current, ListOf) else current.args))
        elif isinstance(current, Not):
            stack.append(current.operand)
        elif isinstance(current, Logic | Compare):
            stack.extend((current.right, current.left))
    return sorted(found, key=lambda pair: pair[1])


# -- static types -------------------------------------------------------------------------------

ANY: Final = "any"
_TYPE_OF_PARAM: Final = {
    "string": "string", "date": "string", "int": "number", "number": "number",
    "bool": "bool", "array": "list", "object": "object",
}  # fmt: skip


def param_kind(param_type: str) -> str:
    """The expression type of a param of ``param_type``."""
    return _TYPE_OF_PARAM.get(param_type, ANY)


def check_types(node: Node, kind_of: Callable[[Reference], str]) -> list[ConditionError]:
    """Type errors that are certain before the run (``length(5)``, ``'a' < 1``, ``1 in 2``);
    ``kind_of`` gives a reference's type ('string', 'number', 'bool', 'list', 'object',
    'null' or 'any')."""
    problems: list[ConditionError] = []

    def kind(current: Node) -> str:
        if isinstance(current, Literal):
            return _kind(current.value)
        if isinstance(current, Ref):
            return kind_of(current.reference)
        if isinstance(current, ListOf):
            for item in current.items:
                kind(item)
            return "list"
        if isinstance(current, Not):
            kind(current.operand)
            return "bool"
        if isinstance(current, Logic):
            kind(current.left), kind(current.right)
            return "bool"
        if isinstance(current, Compare):
            left, right = kind(current.left), kind(current.right)
            problem = _compare_problem(current.op, left, right)
            if problem:
                hint = _EQUAL_HINT if current.op in ("==", "!=") else ""
                problems.append(ConditionError(problem, current.offset, hint))
            return "bool"
        kinds = [kind(arg) for arg in current.args]
        problem = _call_problem(current.function, kinds)
        if problem:
            problems.append(ConditionError(problem, current.offset))
        return "number" if current.function == "length" else "bool"

    kind(node)
    return problems


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    return "object" if isinstance(value, Mapping) else ANY


def _compare_problem(op: str, left: str, right: str) -> str:
    if ANY in (left, right):
        return ""
    if op == "in":
        if right not in ("list", "string", "object"):
            return f"'in' needs a list, text or object on its right, not {right}"
        if right == "string" and left != "string":
            return f"'in' text looks for text, not {left}"
        return ""
    if op in ("<", "<=", ">", ">=") and not (left == right and left in ("number", "string")):
        return f"'{op}' compares two numbers or two texts, not {left} and {right}"
    if op in ("==", "!=") and not _may_equal(left, right):
        always = "false" if op == "==" else "true"
        return f"'{op}' compares {left} with {right}, which are never equal: it is always {always}"
    return ""


_EQUAL_HINT: Final = (
    "compare with a value of its type: true or false for a bool, a number without quotes, "
    "'text' in quotes"
)


def _may_equal(left: str, right: str) -> bool:
    """Whether values of these kinds may be equal: of one kind, or one may be missing (null),
    or a list and an object (an empty one that went through the server may come back as the
    other)."""
    return left == right or "null" in (left, right) or {left, right} == {"list", "object"}


def _call_problem(function: str, kinds: list[str]) -> str:
    if function == "length":
        if kinds[0] not in (ANY, "list", "string", "object"):
            return f"length() takes a list, text or object, not {kinds[0]}"
    elif function == "startsWith":
        if any(k not in (ANY, "string") for k in kinds):
            return f"startsWith() takes two texts, not {kinds[0]} and {kinds[1]}"
    elif function == "contains":
        return _compare_problem("in", kinds[1], kinds[0]).replace("'in'", "contains()")
    return ""


# -- evaluation ---------------------------------------------------------------------------------


def truthy(value: Any) -> bool:
    """Whether a value counts as true: all but null, false, 0, '', [] and {}."""
    return (
        value is not None
        and value is not False
        and value != 0
        and value != ""
        and (not isinstance(value, list | tuple | Mapping) or len(value) > 0)
    )


def evaluate(node: Node, lookup: Callable[[Reference], Any]) -> Any:
    """The value of ``node``; ``lookup`` gives each reference's value."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Ref):
        return lookup(node.reference)
    if isinstance(node, ListOf):
        return [evaluate(item, lookup) for item in node.items]
    if isinstance(node, Not):
        return not truthy(evaluate(node.operand, lookup))
    if isinstance(node, Logic):
        left = truthy(evaluate(node.left, lookup))
        if (node.op == "&&") != left:  # short circuit: false && ..., true || ...
            return left
        return truthy(evaluate(node.right, lookup))
    if isinstance(node, Compare):
        return _compare(node, evaluate(node.left, lookup), evaluate(node.right, lookup))
    args = [evaluate(arg, lookup) for arg in node.args]
    return _call(node, args)


def _compare(node: Compare, left: Any, right: Any) -> bool:
    op = node.op
    if op == "==":
        return _same(left, right)
    if op == "!=":
        return not _same(left, right)
    if op == "in":
        return _contains(node, right, left)
    problem = _compare_problem(op, _kind(left), _kind(right))
    if problem:
        raise ConditionError(problem, node.offset)
    if op == "<":
        return bool(left < right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left >= right)


def _same(left: Any, right: Any) -> bool:
    # JSON equality: true is not 1 (Python's True == 1 would say it is).
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(_same, left, right))
    return bool(left == right)


def _contains(node: Node, haystack: Any, needle: Any) -> bool:
    if isinstance(haystack, str):
        if not isinstance(needle, str):
            raise ConditionError(f"looking for {_kind(needle)} in text", node.offset)
        return needle in haystack
    if isinstance(haystack, list | tuple):
        return any(_same(item, needle) for item in haystack)
    if isinstance(haystack, Mapping):
        return needle in haystack
    raise ConditionError(f"looking for a value in {_kind(haystack)}", node.offset)


def _call(node: Call, args: list[Any]) -> Any:
    if node.function == "contains":
        return _contains(node, args[0], args[1])
    if node.function == "startsWith":
        if not all(isinstance(arg, str) for arg in args):
            kinds = " and ".join(_kind(arg) for arg in args)
            raise ConditionError(f"startsWith() takes two texts, not {kinds}", node.offset)
        return str(args[0]).startswith(str(args[1]))
    value = args[0]
    if not isinstance(value, str | list | tuple | Mapping):
        raise ConditionError(f"length() of {_kind(value)}", node.offset)
    return len(value)


def holds(text: str, lookup: Callable[[Reference], Any]) -> bool:
    """Whether the condition ``text`` is true; :class:`ConditionError` when it cannot say."""
    return truthy(evaluate(parse(text), lookup))
