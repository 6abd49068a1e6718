"""``if:`` conditions: the expression language (flows.flowfile.conditions) and what validation
says."""

from __future__ import annotations

from typing import Any

import pytest
from flows_support import check, one, valid

from flows.flowfile.conditions import ConditionError, check_types, holds, parse
from flows.flowfile.dag import to_dot, to_mermaid
from flows.flowfile.templates import Reference

VALUES: dict[str, Any] = {
    "params.publish": True,
    "params.regions": ["de", "at"],
    "params.name": "de-north",
    "params.count": 3,
    "steps.list.outputs.files": [],
    "steps.list.status": "success",
    "run.flow": "etl",
}


KNOWN = "(known: contains, startsWith, length)"


def lookup(reference: Reference) -> Any:
    return VALUES[str(reference)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${{ params.publish && steps.list.outputs.files != [] }}", False),
        ("params.publish || steps.list.outputs.files != []", True),
        ("!params.publish", False),
        ("!(params.count > 3)", True),
        ("params.count >= 3 && params.count <= 3 && params.count < 4", True),
        ("'de' in params.regions", True),
        ("'ch' in params.regions", False),
        ("'north' in params.name", True),
        ("contains(params.regions, 'at')", True),
        ("startsWith(params.name, 'de-')", True),
        ("length(params.regions) == 2", True),
        ("steps.list.status == 'success'", True),
        ('run.flow == "etl"', True),
        ("params.count == 3.0", True),
        ("true == 1", False),  # JSON equality, not Python's
        ("null == null && [] == []", True),
        ("steps.list.outputs.files", False),  # [] is falsy
        ("'it\\'s' == \"it's\"", True),
    ],
)
def test_expressions_evaluate(text: str, expected: bool) -> None:
    assert holds(text, lookup) is expected


def test_and_short_circuits_so_the_right_side_is_not_read() -> None:
    def only_params(reference: Reference) -> Any:
        assert reference.root == "params", f"{reference} was read"
        return False

    assert holds("params.publish && steps.gone.outputs.x", only_params) is False
    assert holds("!params.publish || steps.gone.outputs.x", only_params) is True


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("params.a &&", "expected a value, found the end", 11),
        ("params.a == = 1", "unexpected '='", 12),
        ("(params.a", "expected ')', found the end", 9),
        ("eval('1')", f"unknown function 'eval' {KNOWN}", 0),
        ("__import__('os')", f"unknown function '__import__' {KNOWN}", 0),
        ("length(1, 2)", "length() takes 1 argument(s), got 2", 0),
        ("params.a ; rm -rf", "unexpected ';'", 9),
        ("params.a params.b", "unexpected 'params.b' after a complete expression", 9),
        ("", "the condition is empty", 0),
    ],
)
def test_syntax_errors_name_the_offset(text: str, message: str, offset: int) -> None:
    with pytest.raises(ConditionError) as raised:
        parse(text)
    assert str(raised.value) == message
    assert raised.value.offset == offset


def test_a_misspelt_function_gets_a_suggestion() -> None:
    with pytest.raises(ConditionError) as raised:
        parse("lenght(params.regions) > 1")
    assert str(raised.value) == f"unknown function 'lenght': did you mean 'length'? {KNOWN}"


def test_nesting_and_length_are_bounded() -> None:
    with pytest.raises(ConditionError, match="nests more than 64 levels"):
        parse("!" * 70 + "true")
    with pytest.raises(ConditionError, match="longer than 1000 characters"):
        parse("true || " * 200 + "true")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("params.count < 'x'", "'<' compares two numbers or two texts, not number and string"),
        ("startsWith(params.count, 'x')", "startsWith() takes two texts, not number and string"),
        ("length(params.count) > 1", "length() of number"),
        ("'x' in params.count", "looking for a value in number"),
        ("1 in params.name", "looking for number in text"),
    ],
)
def test_type_errors_at_run_time(text: str, message: str) -> None:
    with pytest.raises(ConditionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        holds(text, lookup)


def test_type_errors_found_before_the_run() -> None:
    kinds = {"params.n": "number", "params.s": "string", "steps.a.outputs": "any"}
    found = check_types(
        parse("length(params.n) > 0 || params.s < 1 || 1 in 2 || steps.a.outputs < 1"),
        lambda reference: kinds[str(reference)],
    )
    assert [str(error) for error in found] == [
        "length() takes a list, text or object, not number",
        "'<' compares two numbers or two texts, not string and number",
        "'in' needs a list, text or object on its right, not number",
    ]


# -- validation -----------------------------------------------------------------------------

FLOW = """\
version: 1
name: x
params:
  publish: {{type: bool, default: true}}
  count: {{type: int, default: 1}}
steps:
  list: {{job: tasks.list_files, outputs: [files]}}
  other: {{run: 'true'}}
  publish:
    needs: [list]
    if: "{condition}"
    run: ./publish.sh
"""


def test_a_good_condition_validates() -> None:
    flow = valid(FLOW.format(condition="${{ params.publish && steps.list.outputs.files != [] }}"))
    assert flow.steps["publish"].if_ == "${{ params.publish && steps.list.outputs.files != [] }}"


@pytest.mark.parametrize(
    ("condition", "message", "hint"),
    [
        (
            "params.publsh && true",
            "condition, at character 1 ('params.publsh && tru'): unknown param 'publsh' in "
            "'params.publsh'",
            "did you mean 'publish'?",
        ),
        (
            "${{ steps.list.outputs.fils == [] }}",
            "condition, at character 1 ('steps.list.outputs.f'): 'steps.list.outputs.fils': "
            "step 'list' declares no output 'fils'",
            "did you mean 'files'?",
        ),
        (
            "steps.other.status == 'success'",
            "condition, at character 1 ('steps.other.status ='): step 'publish' reads "
            "steps.other.status but does not depend on 'other'",
            "add it to needs: needs: [list, other]",
        ),
        (
            "params.count < 'x'",
            "condition, at character 14 ('< 'x''): '<' compares two numbers or two texts, not "
            "number and string",
            "",
        ),
        (
            "length(params.publish) > 0",
            "condition, at character 1 ('length(params.publis'): length() takes a list, text or "
            "object, not bool",
            "",
        ),
        (
            "params.publish == 'true'",
            "condition, at character 16 ('== 'true''): '==' compares bool with string, which "
            "are never equal: it is always false",
            "compare with a value of its type: true or false for a bool",
        ),
        (
            "params.count != '1'",
            "condition, at character 14 ('!= '1''): '!=' compares number with string, which "
            "are never equal: it is always true",
            "compare with a value of its type",
        ),
        (
            "params.publish &&",
            "condition, at character 18 ('the end'): expected a value, found the end",
            "",
        ),
    ],
)
def test_bad_conditions_are_reported_at_their_line_and_col(
    condition: str, message: str, hint: str
) -> None:
    finding = one(FLOW.format(condition=condition), "condition")
    assert (finding.line, finding.col) == (11, 9)
    assert finding.message == message
    assert hint in finding.hint


def test_every_bad_reference_of_a_condition_is_reported_at_once() -> None:
    findings = [
        f for f in check(FLOW.format(condition="params.a || run.flw")) if f.code == "condition"
    ]
    assert [f.message.split(": ", 1)[1] for f in findings] == [
        "unknown param 'a' in 'params.a'",
        "unknown reference 'run.flw'",
    ]


def test_type_errors_are_reported_with_the_bad_references() -> None:
    findings = [
        f
        for f in check(FLOW.format(condition="length(params.count) > 1 || params.a"))
        if f.code == "condition"
    ]
    assert [f.message.split(": ", 1)[1] for f in findings] == [
        "unknown param 'a' in 'params.a'",
        "length() takes a list, text or object, not number",
    ]


@pytest.mark.parametrize(
    "condition",
    [
        "params.count == 1.5",
        "params.publish == true",
        "params.count == null",
        "steps.list.outputs.files == 'x'",
        "steps.other.status == 'success'",
        "params.count == steps.list.outputs.files",
    ],
)
def test_comparisons_that_may_hold_are_not_findings(condition: str) -> None:
    flow = FLOW.replace("needs: [list]", "needs: [list, other]")
    assert not [f for f in check(flow.format(condition=condition)) if f.code == "condition"]


def test_graph_labels_show_the_condition() -> None:
    flow = valid(FLOW.format(condition="${{ params.count < 2 }}"))
    assert '"publish if params.count #lt; 2"' in to_mermaid(flow)
    assert '"publish" [label="publish if params.count < 2"];' in to_dot(flow)
