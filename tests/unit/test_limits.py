"""``scheduler.engine.limits`` without Redis: the numbers, byte counting, depth, and the error
classes
(the parity with the engine is checked on a real server in tests/bad_input/)."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.engine import limits
from scheduler.engine.errors import InvalidArgument, TooLarge


def nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def test_the_numbers_match_the_documented_limits() -> None:
    assert limits.MAX_ID_BYTES == 256
    assert limits.MAX_PAYLOAD_BYTES == 512 * 1024
    assert limits.MAX_TAGS == 64
    assert limits.MAX_PRIORITY == 1_000_000
    assert limits.MAX_FLOW_JOBS == 100_000
    assert limits.MAX_FLOW_BYTES == 64 * 1024 * 1024
    assert limits.MAX_SOURCE_BYTES == 4 * 1024 * 1024  # Schedules.MAX_SOURCE_BYTES
    # The engine's Fanout.MAX_ITEMS (tests/lua/test_fanout.py: this many, not one more).
    assert limits.MAX_FANOUT_ITEMS == 10_000


def test_ids_are_counted_in_bytes_and_refuse_ascii_space_and_controls() -> None:
    assert limits.check_id("put", "jid", "é" * 128) == "é" * 128  # 256 bytes
    with pytest.raises(TooLarge, match="257 bytes"):
        limits.check_id("put", "jid", "é" * 128 + "x")
    bidi = ("a\u202eb", "a\u2066b", "a\u200fb", "a\u061cb")  # display an id as another
    for bad in (
        "a b",
        "a\tb",
        "a\nb",
        "a\rb",
        "a\x0bb",
        "a\x0cb",
        "a\x00b",
        "a\x1fb",
        "a\x7fb",
        *bidi,
    ):
        with pytest.raises(InvalidArgument, match="white space or a control character"):
            limits.check_id("put", "jid", bad)
    # Like the engine's Lua patterns, only ASCII white space counts.
    assert limits.check_id("put", "jid", "a\u00a0b")
    with pytest.raises(InvalidArgument, match='Put\\(\\): Arg "jid" missing'):
        limits.check_id("put", "jid", "")
    with pytest.raises(InvalidArgument):
        limits.check_id("put", "jid", None)


def test_reserved_jid_suffixes() -> None:
    for suffix in limits.RESERVED_JID_SUFFIXES:
        with pytest.raises(InvalidArgument, match="reserved"):
            limits.check_jid("complete", "jid", f"job{suffix}")
    assert limits.check_jid("complete", "jid", "job-history-2") == "job-history-2"


ID_VALUES = [
    "ok",
    "",
    "a b",
    "a\x9bb",
    "a\u00a0b",
    "é" * 128,
    "é" * 128 + "x",
    "a/b",
    "a\\b",
    ".",
    "..",
    "job-history",
    "job-dependents",
    "job-history-2",
    "lone\udcff",
    "rlo\u202eid",
    "en\u2013dash",
]


@pytest.mark.parametrize("kind", ["id", "name", "jid"])
@pytest.mark.parametrize("value", ID_VALUES)
def test_id_fault_says_a_fault_exactly_when_the_check_refuses(kind: str, value: str) -> None:
    check = {"id": limits.check_id, "name": limits.check_name, "jid": limits.check_jid}[kind]
    try:
        check("put", "jid", value)
    except (InvalidArgument, TooLarge):
        refused = True
    else:
        refused = False
    fault = limits.id_fault(value, kind)  # type: ignore[arg-type]
    assert (fault is not None) == refused, fault
    assert fault is None or not fault.startswith("Arg")  # the caller names the value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "1", None])
def test_numbers_must_be_finite_reals(value: Any) -> None:
    with pytest.raises(InvalidArgument, match="not a finite number"):
        limits.check_number("put", "delay", value)


def test_integers_and_ranges() -> None:
    assert limits.check_priority("put", 1_000_000.0) == 1_000_000
    for bad in (1.5, 1_000_001, -1_000_001):
        with pytest.raises(InvalidArgument, match="priority"):
            limits.check_priority("put", bad)
    with pytest.raises(InvalidArgument, match="at least 0"):
        limits.check_delay("put", -0.001)


def test_json_depth_is_iterative_and_bounded() -> None:
    assert limits.json_depth(1) == 0
    assert limits.json_depth({"a": [1, {"b": 2}]}) == 3
    assert limits.json_depth(nested(100_000)) == limits.MAX_JSON_DEPTH + 1  # no RecursionError
    cycle: list[Any] = []
    cycle.append(cycle)
    assert limits.json_depth(cycle) == limits.MAX_JSON_DEPTH + 1


MARKER = {"\u2026": f"nested deeper than {limits.MAX_SHOWN_DEPTH} levels"}


def test_a_reader_shows_a_value_nested_too_deeply_cut_at_the_limit_with_a_marker() -> None:
    shown = limits.MAX_SHOWN_DEPTH
    assert limits.nested_too_deep() == MARKER
    for levels in (shown + 1, 1_000, 100_000):  # past the API's serializer, Python's decoder
        text = '{"data":' + "[" * (levels - 1) + "0" + "]" * (levels - 1) + "}"
        cut = limits.read_json(text)
        assert cut == {"data": _marked(shown - 1)}
        assert limits.json_depth(cut, 10 * shown) == shown + 1
    whole = json.dumps({"data": nested(shown - 1)})
    assert limits.read_json(whole) == json.loads(whole)
    assert limits.read_json(whole.encode()) == json.loads(whole)


def _marked(levels: int) -> Any:
    """``levels`` lists around the marker."""
    value: Any = MARKER
    for _ in range(levels):
        value = [value]
    return value


def test_the_cut_reads_brackets_in_strings_and_escapes_as_text() -> None:
    text = '[[[1, "[[[", {"a\\"[": ["]"]}], "}"]]'
    assert limits.read_json(text, 2) == [[{"\u2026": "nested deeper than 2 levels"}, "}"]]
    with pytest.raises(ValueError):
        limits.read_json("[" * 500 + "]" * 499)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\ab'), children, max_size=3)
    ),
    max_leaves=30,
)


@given(_json_values, st.integers(1, 6))
def test_read_json_is_json_loads_within_the_limit_and_cut_below_it(value: Any, limit: int) -> None:
    text = json.dumps(value)
    read = limits.read_json(text, limit)
    if limits.json_depth(value, limit) <= limit:
        assert read == value
    else:
        assert limits.json_depth(read, limit + 1) == limit + 1
        assert "nested deeper than" in json.dumps(read)


# Text a string may hold: brackets, quotes, escapes (backslash, control characters, a letter
# past ASCII and one past the basic plane), so that each is read as text inside a string.
_TRICKY = '[]{}"\\:, \n\t\u00e9\U0001f600ab'


def _reference_cut(value: Any, limit: int, level: int = 1) -> Any:
    """``value`` with each array or object at level ``limit + 1`` replaced by the marker,
    written as plainly as possible (the values here nest a few hundred levels at most)."""
    if not isinstance(value, dict | list):
        return value
    if level > limit:
        return limits.nested_too_deep(limit)
    if isinstance(value, dict):
        return {key: _reference_cut(child, limit, level + 1) for key, child in value.items()}
    return [_reference_cut(child, limit, level + 1) for child in value]


def _random_value(rng: random.Random, levels: int) -> Any:
    """A value nesting exactly ``levels`` levels along one spine, with shallower siblings
    (strings full of brackets, quotes and escapes; small arrays and objects) at each level."""

    def text() -> str:
        return "".join(rng.choice(_TRICKY) for _ in range(rng.randrange(6)))

    def scalar() -> Any:
        return rng.choice([None, True, 1.5, -3, text(), text()])

    def sibling(room: int) -> Any:
        if room <= 0 or rng.random() < 0.6:
            return scalar()
        children = [sibling(room - 1) for _ in range(rng.randrange(3))]
        if rng.random() < 0.5:
            return children
        return {text(): child for child in children}

    value: Any = scalar()
    for level in range(levels, 0, -1):
        items = [sibling(min(levels - level, 3)) for _ in range(rng.randrange(3))]
        items.insert(rng.randrange(len(items) + 1), value)
        if rng.random() < 0.5:
            value = items
        else:  # keys full of brackets too; the spine's key is never a sibling's
            keys = [f"{text()}{i}" for i in range(len(items))]
            value = dict(zip(keys, items, strict=True))
    return value


@pytest.mark.parametrize("limit", [1, 2, 5, limits.MAX_SHOWN_DEPTH])
def test_read_json_cuts_random_json_as_a_plain_cut_of_the_value_does(limit: int) -> None:
    rng = random.Random(limit)
    for _ in range(1_500 if limit < 10 else 300):
        value = _random_value(rng, rng.randint(max(limit - 3, 0), limit + 4))
        separators = rng.choice([(",", ":"), (", ", ": "), (" ,\n", " :\t")])
        text = json.dumps(value, separators=separators, ensure_ascii=rng.random() < 0.5)
        assert limits.read_json(text, limit) == _reference_cut(value, limit), text


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ({"x": math.nan}, InvalidArgument, "not valid JSON"),
        ([math.inf], InvalidArgument, "not valid JSON"),
        ({"x": object()}, InvalidArgument, "not valid JSON"),
        ({1, 2}, InvalidArgument, "not valid JSON"),
        (nested(10_000), InvalidArgument, "nests more than 100 levels"),
        ("x" * (512 * 1024), TooLarge, "more than the limit of 524288"),
    ],
)
def test_payloads(value: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        limits.encode_payload("complete", "result", value)


def test_data_nests_at_most_100_levels_and_a_result_64() -> None:
    data, result = limits.MAX_JSON_DEPTH, limits.MAX_RESULT_DEPTH
    assert (data, result) == (100, 64)
    assert limits.encode_payload("put", "data", {"a": nested(data - 1)}, kind="object")
    with pytest.raises(InvalidArgument, match=f'"data" nests more than {data} levels deep'):
        limits.encode_payload("put", "data", {"a": nested(data)}, kind="object")
    assert limits.encode_payload("complete", "result", nested(result), max_depth=result)
    with pytest.raises(InvalidArgument, match=f'"result" nests more than {result} levels deep'):
        limits.encode_payload("complete", "result", nested(result + 1), max_depth=result)


def test_job_data_must_be_an_object() -> None:
    assert limits.encode_payload("put", "data", {"a": 1}, kind="object") == '{"a":1}'
    with pytest.raises(InvalidArgument, match="not a JSON object"):
        limits.encode_payload("put", "data", [1], kind="object")


def test_tags_are_counted_distinct() -> None:
    assert len(limits.check_tags("put", ["t"] * 100)) == 100  # duplicates: the engine keeps one
    with pytest.raises(TooLarge, match="65 items"):
        limits.check_tags("put", [f"t{i}" for i in range(65)])


def test_flow_submission_limits() -> None:
    limits.check_flow_submission("flow.submit", limits.MAX_FLOW_JOBS, "[]")
    with pytest.raises(TooLarge, match="100001 jobs"):
        limits.check_flow_submission("flow.submit", limits.MAX_FLOW_JOBS + 1, "[]")
    with pytest.raises(TooLarge, match="jobs"):
        limits.check_flow_submission("flow.submit", 1, "x" * (limits.MAX_FLOW_BYTES + 1))


@pytest.mark.parametrize("value", ["x/../y", "a\\b", "..", ".", "c1\u0085", "a b", ""])
def test_names_are_single_path_segments(value: str) -> None:
    with pytest.raises(InvalidArgument, match='Arg "queue"'):
        limits.check_name("put", "queue", value)
    with pytest.raises(InvalidArgument, match='Arg "jid"'):
        limits.check_jid("put", "jid", value)


@pytest.mark.parametrize("value", ["q", "etl@20261126T105728Z-43c5d8", "run:step[3]", "a..b", "ü"])
def test_names_may_hold_dots_colons_and_letters_of_any_script(value: str) -> None:
    assert limits.check_name("put", "queue", value) == value


def test_json_fault_says_where_json_text_would_not_give_a_value_back() -> None:
    past = limits.PAST_JSON_NUMBERS
    assert limits.json_fault({"a": [1, 2.5, "x", None, True, {"b": 2**1023}]}) is None
    assert limits.json_fault({"a": [1, {"b c": [10**400]}]}) == (
        'a[1]["b c"][0]',
        f"an integer of the order of 1e400, {past}; give it as text",
    )
    assert limits.json_fault([-(10**309) + 1]) == (
        "[0]",
        f"an integer of the order of -1e308, {past}; give it as text",
    )
    assert limits.json_fault({"x": math.inf}) == ("x", f"a number {past}")
    assert limits.json_fault(math.nan) == ("", "NaN, which is no JSON number")
    assert limits.json_fault({"k": {"\ud800": 1}}) == (
        "k",
        'a key that is text with a lone surrogate ("\\ud800"), which is not UTF-8 text',
    )
    assert limits.json_fault({"a": 1, 2: 3}) == (
        "",
        "a key that is not a string: 2 (int); JSON would turn it into text",
    )
    # The first place in the order the text is written.
    assert limits.json_fault({"a": [0, "\udcff"], "b": 10**400})[0] == "a[1]"


def test_an_integer_past_a_double_is_refused_where_it_is_in_data_and_results() -> None:
    largest = int(limits.MAX_JSON_NUMBER)  # rounds to the largest double: read as it
    assert limits.encode_payload("put", "data", {"n": largest}, kind="object")
    with pytest.raises(InvalidArgument, match=r'^Put\(\): Arg "data" at n\[2\]: an integer '):
        limits.encode_payload("put", "data", {"n": [0, 1, 2**1024]}, kind="object")
    with pytest.raises(InvalidArgument, match=r'^Complete\(\): Arg "result": an integer of the '):
        limits.encode_payload("complete", "result", 10**5000)  # too long even to write


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(_JSON_VALUES)
def test_the_payload_encoder_gives_what_the_compact_encoder_gives(value: Any) -> None:
    """encode_payload's encoder is _COMPACT's C encoder made directly: the same text, or the
    same error for what JSON cannot hold (NaN, infinities)."""
    try:
        expected: object = limits._COMPACT.encode(value)
    except ValueError as error:
        expected = repr(error)
    try:
        got: object = limits._compact(value)
    except ValueError as error:
        got = repr(error)
    assert got == expected


def test_a_cycle_refused_leaves_no_mark_on_the_next_payload() -> None:
    """Each encoding marks the objects it is inside of on its own: a payload refused midway
    (a cycle, a value JSON cannot hold) does not make the next one that shares an object look
    like a cycle."""
    shared: dict[str, Any] = {"a": 1}
    looped: dict[str, Any] = {"shared": shared}
    looped["self"] = looped
    with pytest.raises(InvalidArgument, match="nests more than"):
        limits.encode_payload("put", "data", looped, kind="object")
    with pytest.raises(InvalidArgument, match="not valid JSON"):
        limits.encode_payload("put", "data", {"shared": shared, "x": object()}, kind="object")
    assert limits.encode_payload("put", "data", {"s": shared}, kind="object") == '{"s":{"a":1}}'


def test_a_c_encoder_made_otherwise_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python whose private C encoder takes other arguments leaves payloads to ``encode``."""

    def other(*args: object) -> object:
        if len(args) != 10:
            raise TypeError("c_make_encoder() takes exactly 10 arguments")
        raise AssertionError("not reached")

    monkeypatch.setattr(limits, "_C_MAKE_ENCODER", other)
    limits._probe_c_encoder()
    assert limits._C_MAKE_ENCODER is None
    assert limits.encode_payload("put", "data", {"a": [1, "é"]}) == '{"a":[1,"\\u00e9"]}'


_JID_CASES = [
    "r1:s0",
    "r1:s0[3]",
    "run.2026-01-01:step-a[region=de,kind=full]",
    "é",
    "a b",
    "a\tb",
    "a\u202eb",
    "a/b",
    "a\\b",
    ".",
    "..",
    "a.",
    "...",
    "",
    "x" * 256,
    "x" * 257,
    "a-history",
    "a-dependents",
    "a-dependencies",
    "a-historyx",
]


@given(st.lists(st.sampled_from(_JID_CASES) | st.text(max_size=8), max_size=6))
def test_all_jids_is_true_only_when_each_jid_is_taken(values: list[str]) -> None:
    """A run's jids are checked at once (a run has thousands): true only when check_jid takes
    every one; false hands them to check_jid one by one, which says which and why."""
    if limits.all_jids(values):
        for value in values:
            assert limits.check_jid("flow.submit", "jid", value) == value
    if all(
        limits.id_fault(value, "jid") is None and value.isascii() and not value.endswith(".")
        for value in values
    ):
        assert limits.all_jids(values)


def test_all_jids_takes_a_run_s_jids_and_refuses_what_check_jid_refuses() -> None:
    assert limits.all_jids([f"r1:s{i}" for i in range(10_000)])
    assert limits.all_jids([])
    for bad in ("", "a b", "a/b", "a\\b", ".", "..", "x" * 257, "a-history", "a\x00"):
        assert not limits.all_jids(["r1:s0", bad, "r1:s1"]), bad
    assert not limits.all_jids(["r1:s0", 5])  # type: ignore[list-item]
