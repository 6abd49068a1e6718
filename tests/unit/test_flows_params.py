"""Params: -p parsing, conversion to the declared types, defaults, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from flows.flowfile.model import Param
from flows.flowfile.params import ParamError, bind_params, parse_assignments

DECLARED = {
    "date": Param(type="date", default="2025-01-31"),
    "regions": Param.model_validate(
        {"type": "array", "items": {"type": "string"}, "default": ["de"]}
    ),
    "limit": Param(type="int", default=10),
    "ratio": Param(type="number", default=0.5),
    "dry_run": Param(type="bool", default=False),
    "options": Param(type="object", default={}),
    "customer": Param(type="string", required=False),
}


def bind(given: dict[str, Any], declared: dict[str, Param] = DECLARED) -> dict[str, Any]:
    return bind_params(declared, given, lambda value: value)


def test_parse_assignments() -> None:
    assert parse_assignments(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["a"], "'a' is not name=value"),
        (["=1"], "'=1' is not name=value"),
        (["a=1", "a=2"], "given twice"),
    ],
)
def test_parse_assignments_refuses(pairs: list[str], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        parse_assignments(pairs)


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("regions", "de,at, ch", ["de", "at", "ch"]),
        ("regions", '["de", "at"]', ["de", "at"]),
        ("regions", "", []),
        ("limit", "42", 42),
        ("ratio", "2", 2),
        ("ratio", "2.5", 2.5),
        ("dry_run", "yes", True),
        ("dry_run", "False", False),
        ("options", '{"a": 1}', {"a": 1}),
        ("date", "2024-02-29", "2024-02-29"),
        ("customer", "acme", "acme"),
    ],
)
def test_text_is_converted_to_the_declared_type(name: str, text: str, value: Any) -> None:
    assert bind({name: text})[name] == value


def test_defaults_fill_in_and_optional_params_are_null() -> None:
    values = bind({})
    assert values["limit"] == 10 and values["regions"] == ["de"] and values["customer"] is None


def test_values_of_the_wrong_type_are_refused() -> None:
    assert bind({"limit": 3})["limit"] == 3
    with pytest.raises(ParamError, match="param 'limit': expected an integer, got 'x'"):
        bind({"limit": "x"})
    with pytest.raises(
        ParamError, match="param 'limit': expected an integer, got the boolean true"
    ):
        bind({"limit": True})
    with pytest.raises(ParamError, match="param 'options': expected a mapping, got a list"):
        bind({"options": "[1]"})


def test_array_items_are_converted_and_checked() -> None:
    declared = {"ids": Param.model_validate({"type": "array", "items": {"type": "int"}})}
    assert bind({"ids": "1,2,3"}, declared) == {"ids": [1, 2, 3]}
    with pytest.raises(ParamError, match="param 'ids': item 1: expected an integer, got 'two'"):
        bind({"ids": "1,two"}, declared)
    # a text that is no list (a date given to a list of numbers) is one item, said as one
    with pytest.raises(
        ParamError, match="param 'ids': item 0: expected an integer, got '2026-11-01'"
    ):
        bind({"ids": "2026-11-01"}, declared)


def test_every_problem_is_reported_at_once() -> None:
    declared = {"date": Param(type="date"), "region": Param(type="string", default="de")}
    with pytest.raises(ParamError) as error:
        bind({"regoin": "at", "date": "31.01.2025"}, declared)
    assert error.value.problems == [
        "unknown param 'regoin' (did you mean 'region'?)",
        "param 'date': expected a date such as 2025-01-31, got the string '31.01.2025'",
    ]


def test_missing_required_param() -> None:
    with pytest.raises(ParamError, match=r"^missing required param 'date'$"):
        bind({}, {"date": Param(type="date")})


def test_values_cannot_smuggle_templates() -> None:
    with pytest.raises(ParamError, match="values cannot contain"):
        bind({"customer": "${{ steps.secret.outputs.token }}"})


CHOICES = {
    "env": Param.model_validate({"type": "string", "choices": ["dev", "staging", "prod"]}),
    "workers": Param.model_validate({"type": "int", "choices": [1, 2, 4], "default": 2}),
}


def test_a_value_among_the_choices_is_taken_and_others_are_refused_with_the_likely_one() -> None:
    assert bind({"env": "prod", "workers": "4"}, CHOICES) == {"env": "prod", "workers": 4}
    assert bind({"env": "dev"}, CHOICES)["workers"] == 2  # the default, one of the choices
    with pytest.raises(ParamError) as error:
        bind({"env": "prdo", "workers": "3"}, CHOICES)
    assert error.value.problems == [
        "param 'env': 'prdo' is not one of its choices (dev, staging, prod); did you mean 'prod'?",
        "param 'workers': 3 is not one of its choices (1, 2, 4)",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "bool", "choices": ["x"]}, "'choices' applies to string, int, number and date"),
        ({"type": "array", "choices": ["x"]}, "not to type array"),
        ({"type": "int", "choices": [1, "two"]}, "choice 'two' is not an int value"),
        ({"type": "date", "choices": ["2026-02-30"]}, "choice '2026-02-30' is not a date value"),
        ({"type": "string", "choices": ["a", "a"]}, "choice 'a' is listed twice"),
        ({"type": "string", "choices": []}, "at least 1"),
    ],
)
def test_choices_that_cannot_be_are_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Param.model_validate(spec)
