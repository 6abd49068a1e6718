"""Template values into a shell command as data: each becomes an environment variable.

A ``run:`` command is shell syntax; the values its templates name (params, run fields, foreach
items, other steps' outputs) come from users, schedules and jobs. Pasting them into the text
would let a value such as ``$(rm -rf ~)`` run as code, so every template is replaced by a
reference to an environment variable holding the value, written for the quoting it stands in:

* bare: ``"${NAME}"`` (one word, exactly the value: no splitting, no globbing);
* inside double quotes and in a here-document: ``${NAME}``;
* inside single quotes: ``'"${NAME}"'`` (the quote is closed around it, so the value is read
  there as it would be written there).

The shell expands a variable's value once and never reads it as syntax. The quoting is followed
through backslashes, ``#`` comments and here-documents; a quoted here-document (``<<'EOF'``)
expands nothing, so there the variable stays as written (its value is in the environment). A
command substitution (``$(...)``, backquotes) starts its own quoting, even inside double quotes:
a template there is bare again. In an arithmetic expansion (``$((...))``) it is ``${NAME}``, as
in double quotes, and ``<<`` there is a shift; the shell evaluates the value there, so its
variable is a ``FLOWS_NUMBER_`` one, which the worker lets through only as an integer. So is a
template where bash (``/bin/sh`` on some systems) evaluates a word as arithmetic too: in its
arithmetic command (``((...))``) and as an operand of ``-eq``, ``-ne``, ``-lt``, ``-le``, ``-gt``
or ``-ge`` inside ``[[ ]]``, in the arguments of ``let``, in a substring's offset and length
(``${VAR:offset:length}``) and in ``$[...]`` (there bash runs the command of a value such as
``a[$(cmd)]``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from flows.flowfile.job_data import ENV_PREFIX, NUMBER_ENV_PREFIX, env_name
from flows.flowfile.templates import MATRIX, PARAMS, RUN, STEPS, Reference, split

_BARE, _SINGLE, _DOUBLE, _COMMENT, _HEREDOC = range(5)
_WORD_BREAKS: Final = frozenset(" \t\n;&|()<>")
_CLOSING: Final = {_SINGLE: "'", _DOUBLE: '"', _COMMENT: "\n"}
_OPENING: Final = {"'": _SINGLE, '"': _DOUBLE}
_MODE_CHANGERS: Final = {
    _BARE: re.compile(r"[\\'\"#<\n()`]"),
    _SINGLE: re.compile("'"),
    _DOUBLE: re.compile(r'[\\"(`]'),
    _COMMENT: re.compile("\n"),
    _HEREDOC: re.compile("\n"),
}
"""Per mode, the characters that may change it (or start a here-document's delimiter)."""
FOREACH_ENV_ROOT: Final = "foreach"
"""The foreach variable's values are ``FLOWS_FOREACH_<NAME>``: never a runtime name such as
``FLOWS_OUTPUT``, whatever the variable is called."""


@lru_cache(maxsize=4096)
def variable_name(reference: Reference) -> str:
    """The environment variable that carries ``reference`` (before any collision suffix)."""
    if reference.root in (PARAMS, RUN, STEPS, MATRIX):
        return env_name(reference)
    return env_name(Reference((FOREACH_ENV_ROOT, *reference.path)))


def number_name(reference: Reference) -> str:
    """The variable that carries ``reference`` into an arithmetic expansion: ``params.n`` →
    ``FLOWS_NUMBER_PARAMS_N`` (:data:`~flows.flowfile.job_data.NUMBER_ENV_PREFIX`)."""
    return NUMBER_ENV_PREFIX + variable_name(reference).removeprefix(ENV_PREFIX)


def shell_command(command: str, value_of: Callable[[Reference], str]) -> tuple[str, dict[str, str]]:
    """``command`` with each template replaced by a variable, and the variables' values.

    ``value_of`` gives a reference's value as text (it may also be a template the worker
    resolves). Two references whose names would collide (``params.a-b`` and ``params.a_b``) get
    distinct names. Raises :class:`flows.flowfile.templates.TemplateSyntaxError` like
    ``references``.
    """
    texts, found = split(command)
    variables: dict[str, str] = {}
    names: dict[tuple[Reference, bool], str] = {}
    pieces: list[str] = []
    modes = _modes(texts) if sum(map(len, texts)) <= _KEPT_LENGTH else _scan(texts)
    for index, reference in enumerate(found):
        pieces.append(texts[index])
        mode, arithmetic = modes[index]
        name = names.get((reference, arithmetic))
        if name is None:
            name = base = number_name(reference) if arithmetic else variable_name(reference)
            suffix = 1
            while name in variables:
                suffix += 1
                name = f"{base}_{suffix}"
            names[reference, arithmetic] = name
            variables[name] = value_of(reference)
        pieces.append(_placeholder(name, mode))
    pieces.append(texts[-1])
    return "".join(pieces), variables


def _scan(texts: tuple[str, ...]) -> tuple[tuple[int, bool], ...]:
    """The quoting mode at each template between ``texts``, and whether it stands in an
    arithmetic expansion (its value is then a number's: :data:`NUMBER_ENV_PREFIX`)."""
    quoting = _Quoting()
    bash = _BashCommands(texts)
    modes = []
    for index, text in enumerate(texts[:-1]):
        quoting.feed(text)
        bash.feed(text)
        arithmetic = quoting.in_arithmetic()
        # An arithmetic expansion reads its text as if in double quotes (and sh refuses quotes
        # there): no splitting, no globbing.
        mode = _DOUBLE if arithmetic and quoting.mode == _BARE else quoting.mode
        modes.append((mode, arithmetic or bash.arithmetic(index)))
        quoting.feed_word()
    return tuple(modes)


_CONDITIONAL: Final = re.compile(r"(?<![^\s;&|(!])(?:\[\[|\]\])(?=[\s;&|)]|$)")
"""The words that open and close bash's conditional command, ``[[ ... ]]``."""
_COMMAND_END: Final = re.compile(r"[;&|\n)]")
"""What ends a command: after it, a word is no argument of ``let``."""
_LET: Final = re.compile(
    r"(?:^|[;&|(\n])\s*(?:(?:if|then|else|elif|do|while|until|!)\s+)*(?P<let>let)(?=\s)"
    rf"|{_COMMAND_END.pattern}"
)
"""bash's ``let``, whose arguments are arithmetic, and what ends a command."""
_NUMERIC_TEST: Final = r"-(?:eq|ne|lt|le|gt|ge)"
_NUMERIC_TEST_WORD: Final = re.compile(_NUMERIC_TEST)
_OPERAND_AFTER: Final = re.compile(rf"(?:^|\s){_NUMERIC_TEST}\s+\S*$")
_OPERAND_BEFORE: Final = re.compile(rf"^\S*\s+{_NUMERIC_TEST}(?:\s|$)")
_ONE_WORD: Final = re.compile(r"\S*")


class _BashCommands:
    """Follows the bash commands whose words are arithmetic: ``[[ ]]`` (the operands of its
    numeric tests) and ``let``. A command that names neither is not looked at again."""

    def __init__(self, texts: tuple[str, ...]) -> None:
        command = "".join(texts)
        self.tests = "[[" in command and _NUMERIC_TEST_WORD.search(command) is not None
        self.lets = "let" in command
        self.operands = _numeric_test_operands(texts) if self.tests else []
        self.conditional = self.let = False  # inside [[ ]], in the arguments of let

    def feed(self, text: str) -> None:
        if self.tests and ("[[" in text or "]]" in text):
            for found in _CONDITIONAL.finditer(text):
                self.conditional = found.group() == "[["
        if self.lets and "let" in text:
            for found in _LET.finditer(text):
                self.let = found.group("let") is not None
        elif self.let and _COMMAND_END.search(text):
            self.let = False

    def arithmetic(self, index: int) -> bool:
        """Whether the template after the text fed last stands where bash evaluates it."""
        return self.let or (self.conditional and self.operands[index])


def _numeric_test_operands(texts: tuple[str, ...]) -> list[bool]:
    """Per template between ``texts``: whether it is part of a word beside a numeric test
    operator (``-eq`` ... ``-ge``), which bash's ``[[ ]]`` evaluates as arithmetic. A template
    in the same word as such a one is part of that operand too (``-eq ${{ a }}${{ b }}``)."""
    count = len(texts) - 1
    operands = [
        bool(_OPERAND_AFTER.search(texts[i]) or _OPERAND_BEFORE.search(texts[i + 1]))
        for i in range(count)
    ]
    for i in range(1, count):
        operands[i] = operands[i] or (operands[i - 1] and bool(_ONE_WORD.fullmatch(texts[i])))
    for i in range(count - 2, -1, -1):
        operands[i] = operands[i] or (operands[i + 1] and bool(_ONE_WORD.fullmatch(texts[i + 1])))
    return operands


_KEPT_LENGTH: Final = 1024
"""Commands up to this long have their scan kept: a foreach step's jobs share one command."""
_modes = lru_cache(maxsize=4096)(_scan)


def _placeholder(name: str, mode: int) -> str:
    if mode in (_DOUBLE, _HEREDOC):
        return f"${{{name}}}"
    if mode == _SINGLE:
        return f"'\"${{{name}}}\"'"
    return f'"${{{name}}}"'


@dataclass
class _Substitution:
    """A command substitution (or arithmetic expansion) being read."""

    outer: int  # the mode it stands in, back when it closes
    closer: str  # ')' or '`'
    depth: int = 1  # its open parentheses
    arithmetic: bool = False

    def opened_by_previous(self) -> bool:
        """Whether no parenthesis of its own is open in it: with a ``(`` just before, that one
        opened it."""
        return self.closer == ")" and self.depth == 1


@dataclass
class _Bracketed:
    """bash's ``${VAR:`` or ``$[`` being read: arithmetic until its closer."""

    closer: str  # '}' or ']'
    level: int  # how many substitutions were open around it
    depth: int = 1  # its open braces (or brackets)


_BRACKETS: Final = re.compile(r"\$\{#?(?:[A-Za-z_]\w*|\d+|[@*]):(?![-=?+])|\$\[|\$?[{\[]|[}\]]")
"""What opens bash's arithmetic in a parameter expansion (``${VAR:`` but ``:-``, ``:=``,
``:?``, ``:+``) or ``$[``, and the braces and brackets inside it."""


class _Quoting:
    """Follows a command's quoting, character by character, as /bin/sh reads it."""

    def __init__(self) -> None:
        self.mode = _BARE
        self.escaped = False
        self.word_start = True
        self.previous = ""
        self.delimiter: list[str] | None = None  # the word after '<<', while it is read
        self.strip_tabs = False
        self.heredocs: list[tuple[str, bool]] = []  # (end line, strip tabs), from the next line
        self.line = ""  # the current line of a here-document
        self.before = ""  # the character before `previous`
        self.substitutions: list[_Substitution] = []  # open around here, innermost last
        self.bash_arithmetic: list[_Bracketed] = []  # `${VAR:` and `$[` open here, innermost last

    def feed(self, text: str) -> None:
        # Runs of characters that cannot change the mode are skipped with one search: expansion
        # does this for every shell job of a run.
        at, length = 0, len(text)
        while at < length:
            if self.escaped or self.delimiter is not None:
                self._char(text[at])
                at += 1
                continue
            found = _MODE_CHANGERS[self.mode].search(text, at)
            end = found.start() if found else length
            if end > at:
                self._plain(text[at:end])
                at = end
            if found:
                self._char(text[at])
                at += 1

    def _plain(self, chars: str) -> None:
        """Characters that change no mode."""
        if self.mode == _HEREDOC:
            self.line += chars
        elif self.mode in (_BARE, _DOUBLE) and (self.bash_arithmetic or "$" in chars):
            self._brackets(chars)
        self.before = chars[-2] if len(chars) > 1 else self.previous
        self.previous = chars[-1]
        self.word_start = self.previous in _WORD_BREAKS and self.mode == _BARE

    def feed_word(self) -> None:
        """A template stood here: part of a word."""
        self.word_start = False
        self.previous = "x"
        if self.mode == _HEREDOC:
            self.line += "\0"
        elif self.delimiter is not None:
            self.delimiter.append("\0")

    def _char(self, char: str) -> None:
        was_escaped = self.escaped
        if self.mode == _HEREDOC:
            self._heredoc(char)
        elif self.escaped:
            self.escaped = False
        elif char == "\\" and self.mode in (_BARE, _DOUBLE):
            self.escaped = True
        elif self.mode == _DOUBLE and char in "(`":
            if char == "`" or self.previous == "$":
                self._substitution(char)
        elif self.mode != _BARE:
            if char == _CLOSING[self.mode]:
                self.mode = _BARE
                if char == "\n":
                    self._line_end()
        else:
            self._bare(char)
        self.word_start = char in _WORD_BREAKS and self.mode == _BARE
        # An escaped character is itself only: `\$(` opens nothing, `\<<` is no here-document.
        self.before, self.previous = self.previous, "\\" + char if was_escaped else char

    def _substitution(self, char: str) -> None:
        """``$(`` or a backquote: a command of its own, read bare, until its closer."""
        self.substitutions.append(_Substitution(self.mode, ")" if char == "(" else "`"))
        self.mode = _BARE

    def _parenthesis(self, char: str) -> bool:
        """Follow ``(``, ``)`` and backquotes in bare text; whether ``char`` was one of them."""
        top = self.substitutions[-1] if self.substitutions else None
        if char == "`":
            if top is not None and top.closer == "`":
                self.mode = self.substitutions.pop().outer
            else:
                self._substitution(char)
        elif char == "(" and self.previous == "$":
            self._substitution(char)
        elif char == "(" and self.previous == "(" and top is not None and top.opened_by_previous():
            # The second parenthesis of `$((`, or of `((` where a command starts: bash's
            # arithmetic command (the first one opened what could have been a subshell).
            top.arithmetic = True
            top.depth += 1
        elif char == "(" and self.word_start and not self.arithmetic():
            self._substitution(char)  # a subshell: a command of its own, read bare
        elif top is not None and top.closer == ")":
            if char == "(":
                top.depth += 1
            elif char == ")":
                top.depth -= 1
                if top.depth == 0:
                    self.mode = self.substitutions.pop().outer
        return char in "()`"

    def _brackets(self, chars: str) -> None:
        """Follow bash's ``${VAR:offset:length}`` and ``$[...]``, whose text is arithmetic."""
        level = len(self.substitutions)
        for found in _BRACKETS.finditer(chars):
            token = found.group()
            if token == "$[" or token.endswith(":"):
                self.bash_arithmetic.append(_Bracketed("]" if token == "$[" else "}", level))
                continue
            top = self.bash_arithmetic[-1] if self.bash_arithmetic else None
            if top is None or top.level != level:
                continue
            if token == top.closer:
                top.depth -= 1
                if top.depth == 0:
                    self.bash_arithmetic.pop()
            elif token.endswith("{" if top.closer == "}" else "["):
                top.depth += 1

    def arithmetic(self) -> bool:
        return bool(self.bash_arithmetic) or any(s.arithmetic for s in self.substitutions)

    def in_arithmetic(self) -> bool:
        """Whether the text here is read as an arithmetic expression (the innermost expansion
        open is one: a command substitution inside it is a command again)."""
        level = len(self.substitutions)
        if self.bash_arithmetic and self.bash_arithmetic[-1].level == level:
            return True
        return bool(self.substitutions) and self.substitutions[-1].arithmetic

    def _bare(self, char: str) -> None:
        if self.delimiter is not None and (
            char in _WORD_BREAKS and (self.delimiter or char not in " \t-")
        ):
            self._delimited()
        if self.delimiter is None and self._parenthesis(char):
            return
        if char == "\n":
            self._line_end()
        elif self.delimiter is not None:
            if char == "-" and not self.delimiter:
                self.strip_tabs = True
            elif char not in " \t":
                self.delimiter.append(char)
        elif char == "<" and self.previous == "<" and not self.arithmetic():
            self.delimiter, self.strip_tabs = [], False
        elif char == "#" and self.word_start:
            self.mode = _COMMENT
        else:
            self.mode = _OPENING.get(char, _BARE)

    def _delimited(self) -> None:
        assert self.delimiter is not None
        word = "".join(self.delimiter).replace("'", "").replace('"', "").replace("\\", "")
        self.heredocs.append((word, self.strip_tabs))
        self.delimiter = None

    def _line_end(self) -> None:
        if self.delimiter is not None:
            self._delimited()
        if self.heredocs:
            self.mode = _HEREDOC

    def _heredoc(self, char: str) -> None:
        if char != "\n":
            self.line += char
            return
        end, strip_tabs = self.heredocs[0]
        line, self.line = self.line, ""
        if (line.lstrip("\t") if strip_tabs else line) == end:
            self.heredocs.pop(0)
            if not self.heredocs:
                self.mode = _BARE
