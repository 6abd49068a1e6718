"""The safe loader: positions of every value, and what it refuses (each with its line)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from flows.flowfile.yaml_reader import MAX_DEPTH, load_file, load_yaml
from scheduler.engine.limits import PAST_JSON_NUMBERS


def codes(text: str) -> list[tuple[str, int, int]]:
    return [(f.code, f.line, f.col) for f in load_yaml(text, "f.yaml").findings]


def test_positions_of_values_and_keys_are_one_based() -> None:
    loaded = load_yaml("version: 1\nsteps:\n  load:\n    needs: [a, b]\n")
    assert loaded.source_map.values[("steps", "load", "needs", 1)] == (4, 16)
    assert loaded.source_map.keys[("steps", "load", "needs")] == (4, 5)
    assert loaded.source_map.locate(("steps", "load", "missing", 3)) == (4, 5)


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("at: 2:00\n", "sexagesimal", 120),
        ("at: 1:30.5\n", "sexagesimal", 90.5),
        ("mode: 0200\n", "octal", 128),
        ("flag: on\n", "boolean", True),
        ("flag: No\n", "boolean", False),
        ("flag: OFF\n", "boolean", False),
    ],
)
def test_yaml_1_1_traps_are_recorded_with_the_text(text: str, kind: str, value: object) -> None:
    loaded = load_yaml(text)
    [(path, trap)] = loaded.traps.items()
    assert trap.kind == kind and trap.value == value and trap.text == text.split(": ")[1].strip()
    assert loaded.source_map.values[path] == (1, len(text.split(":")[0]) + 3)


@pytest.mark.parametrize("text", ["a: '2:00'\n", "a: true\n", "a: 0\n", "a: 10\n", 'a: "on"\n'])
def test_quoted_or_plain_values_are_not_traps(text: str) -> None:
    assert load_yaml(text).traps == {}


def test_timestamps_stay_text() -> None:
    assert load_yaml("day: 2025-01-31\n").data == {"day": "2025-01-31"}


def test_keys_read_as_booleans_or_numbers_are_refused() -> None:
    loaded = load_yaml("steps:\n  off: {run: x}\n  7: {run: y}\n")
    messages = [(f.line, f.message) for f in loaded.findings]
    assert messages == [
        (2, "key off is read as the boolean false (YAML 1.1)"),
        (3, "keys must be strings, found the int 7"),
    ]
    assert loaded.data == {"steps": {"off": {"run": "x"}, "7": {"run": "y"}}}


def test_a_plain_on_key_is_the_text_on() -> None:
    """`notify: - on: [failure]` reads as GitHub Actions' `on:` does: the key is the text."""
    loaded = load_yaml("notify:\n  - on: [failure]\n")
    assert loaded.findings == [] and loaded.data == {"notify": [{"on": ["failure"]}]}


def test_duplicate_key_keeps_the_first_value() -> None:
    loaded = load_yaml("a: 1\nb: 2\na: 3\n")
    assert loaded.data == {"a": 1, "b": 2}
    assert codes("a: 1\nb: 2\na: 3\n") == [("yaml-duplicate-key", 3, 1)]


def test_merge_keys_copy_what_is_not_given() -> None:
    loaded = load_yaml("base: &b {queue: etl, priority: 1}\nstep:\n  <<: *b\n  priority: 5\n")
    assert loaded.data is not None
    assert loaded.data["step"] == {"queue": "etl", "priority": 5}


def test_an_alias_repeats_a_single_value() -> None:
    loaded = load_yaml("a: {job: &j tasks.a, n: &n 3}\nb: {job: *j, n: *n}\n")
    assert not loaded.findings
    assert loaded.data is not None
    assert loaded.data["b"] == {"job": "tasks.a", "n": 3}
    assert loaded.source_map.values[("b", "job")] == (2, 10)


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("a: [1, 2\nb: 3\n", "yaml-syntax", 2),
        ("a:\n\t- b\n", "yaml-syntax", 2),
        ("a: !!python/name:os.system x\n", "yaml-tag", 1),
        ("a: !custom x\n", "yaml-tag", 1),
        ("a: !!binary aGk=\n", "yaml-tag", 1),
        ("a: &x [*x]\n", "yaml-alias", 1),
        ("a: *nowhere\n", "yaml-alias", 1),
        ("", "yaml-empty", 1),
        ("---\n", "yaml-empty", 1),
        ("[1, 2]\n", "yaml-top-level", 1),
        ("a: 1\n---\nb: 2\n", "yaml-documents", 2),
        ("a: .nan\n", "yaml-not-json", 1),
        ("? [a]\n: b\n", "yaml-key-type", 1),
        # `<<` merges only as a key; as a value it was an internal marker that no JSON encodes.
        ("a: {k: <<}\n", "yaml-merge", 1),
        ("a:\n  - 1\n  - <<\n", "yaml-merge", 3),
    ],
)
def test_refusals_carry_their_line(text: str, code: str, line: int) -> None:
    [(found, at, _)] = codes(text)
    assert (found, at) == (code, line)


@pytest.mark.parametrize(
    ("number", "said"),
    [
        ("9" * 400, "999999999999... (400 characters) is an integer of the order of 1e399"),
        ("9" * 5000, "999999999999... (5,000 characters) is an integer"),  # past int()'s own limit
        ("-1_" + "0" * 5000, "-1_000000000... (5,003 characters) is an integer"),
        ("0x" + "f" * 300, "0xffffffffff... (302 characters) is an integer of the order of 1e361"),
    ],
)
def test_an_integer_past_what_json_holds_is_refused_where_it_is(number: str, said: str) -> None:
    # Loaded as a number, it passed validate and the engine refused the run; past 4,300 digits
    # Python's int() refused it with an unexpected error.
    [finding] = load_yaml(f"a: 1\nb: [x, {number}]\n").findings
    assert (finding.code, finding.line, finding.col) == ("yaml-not-json", 2, 8)
    assert finding.message.startswith(f"b[1]: {said}"), finding.message
    assert finding.message.endswith(PAST_JSON_NUMBERS)
    assert finding.hint == "quote it to keep it as text"
    assert load_yaml(f"b: {'9' * 308}\n").findings == []


def test_a_character_yaml_refuses_is_named_where_it_is() -> None:
    [finding] = load_yaml("a: 1\nb: clear \x1b[2J screen\n").findings
    assert (finding.code, finding.line, finding.col) == ("yaml-syntax", 2, 10)
    assert finding.message.startswith("the character U+001B is not allowed in YAML")


def test_tabs_get_a_hint() -> None:
    [finding] = load_yaml("a:\n\t- b\n").findings
    assert finding.hint == "indent with spaces, not tabs"


def test_deep_nesting_is_refused_without_recursion() -> None:
    text = "[" * 100_000 + "]" * 100_000
    [finding] = load_yaml(text).findings
    assert finding.code == "yaml-too-deep"
    assert finding.col == MAX_DEPTH + 1


def test_files_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"name: x\nsteps: \xff\n")
    [finding] = load_file(path).findings
    assert (finding.line, finding.message) == (2, "the file is not UTF-8 text (byte 15)")


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_DATA = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the parser the loader uses


@given(st.dictionaries(st.text(max_size=8), _DATA, min_size=1, max_size=5))
def test_plain_data_loads_as_pyyaml_reads_it(data: dict[str, object]) -> None:
    """Whatever PyYAML's safe dumper writes, the loader reads as PyYAML's safe loader does.

    (Not always as ``data``: PyYAML itself does not round-trip some line-break characters.)
    """
    for style in (None, False, True):  # default, block, flow
        text = yaml.safe_dump(data, default_flow_style=style, allow_unicode=True)
        loaded = load_yaml(text)
        assert loaded.findings == []
        assert loaded.data == yaml.load(text, Loader=_SAFE_LOADER)


def test_the_gc_pause_happens_only_where_a_command_asked_for_it() -> None:
    import gc

    from flows import gc_pause

    assert gc.isenabled()
    was = gc_pause._enabled
    try:
        gc_pause._enabled = False  # a service, the API, a library user's program
        with gc_pause.gc_paused():
            assert gc.isenabled()
        gc_pause.enable()  # `flows validate`, `plan`, `graph`, `run`
        with gc_pause.gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        gc_pause._enabled = was
