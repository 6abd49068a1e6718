"""One test per kind of finding ``flows validate`` reports (docs: Writing flows, flow reference).

Each asserts the message, the line (and where it matters the column) and the hint.
"""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import pytest
from flows_support import check, one, valid

from flows.flowfile.durations import DURATION_PATTERN
from flows.flowfile.findings import Severity, has_errors
from flows.flowfile.model import Flow
from flows.flowfile.templates import WHOLE_TEMPLATE_PATTERN
from flows.validation.model_errors import PATTERN_HINTS

# -- YAML -------------------------------------------------------------------------------------


def test_syntax_error_has_its_position() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo a: b
        """,
        "yaml-syntax",
    )
    assert (finding.line, finding.col) == (5, 16)
    assert "mapping values are not allowed" in finding.message
    assert "quote" in finding.hint


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_quote_never_closed_is_placed_where_it_opens(quote: str) -> None:
    # Placed at the end of the file, where YAML gave up, however far below that was.
    finding = one(
        f"version: 1\nname: x\nsteps:\n  a:\n    run: {quote}echo hi\n" + "  b: {run: echo}\n" * 50,
        "yaml-syntax",
    )
    assert (finding.line, finding.col) == (5, 10)
    assert finding.message == f"a string opened with {quote} is never closed"
    assert finding.hint == f"close it with {quote} (a {quote} inside it is written " + (
        '\\")' if quote == '"' else "'')"
    )


@pytest.mark.parametrize(("opened", "closing", "what"), [("[", "]", "list"), ("{", "}", "mapping")])
def test_a_bracket_never_closed_is_placed_where_it_opens(
    opened: str, closing: str, what: str
) -> None:
    item = "1," if opened == "[" else "k: 1,"
    finding = one(
        f"version: 1\nname: x\nsteps:\n  a: {{run: echo, with: {{x: {opened}\n"
        + f"    {item}\n" * 30,
        "yaml-syntax",
    )
    assert (finding.line, finding.col) == (4, 28), finding.format()
    assert finding.message == f"a {what} opened with {opened} is never closed"
    assert finding.hint == f"close it with {closing}"


def test_special_characters_and_escapes_get_a_hint() -> None:
    finding = one("version: 1\nname: x\nsteps:\n  a: {run: @echo}\n", "yaml-syntax")
    assert finding.hint == "quote a value that starts with @, ` or %"
    finding = one('version: 1\nname: x\nsteps:\n  a: {run: "echo \\q"}\n', "yaml-syntax")
    assert finding.hint == (
        "in double quotes \\ starts an escape (\\n, \\t, \\\\): write \\\\ for a backslash, "
        "or use single quotes"
    )


@pytest.mark.parametrize(
    ("line", "col", "value"),
    [
        ("  cron: */5 * * * *  # every five minutes", 9, "*/5 * * * *"),
        ("  cron: * * * * *", 9, "* * * * *"),
        ("  {cron: */5 * * * *, timezone: UTC}", 10, "*/5 * * * *"),
    ],
)
def test_an_unquoted_star_is_said_as_the_alias_yaml_reads_with_the_value_quoted(
    line: str, col: int, value: str
) -> None:
    # The first cron a newcomer writes; YAML's own words name an alias they never wrote.
    finding = one(
        f"version: 1\nname: x\nschedule:\n{line}\nsteps:\n  a: {{run: echo}}\n", "yaml-syntax"
    )
    assert (finding.line, finding.col) == (4, col), finding.format()
    assert finding.message == "a value that starts with * is read as a YAML alias (*name)"
    assert finding.hint == f"quote it: '{value}'"


@pytest.mark.parametrize(
    ("line", "col", "value"),
    [
        ("  a: {run: echo ${{ params.who }}}", 18, "echo ${{ params.who }}"),
        ("  a: {job: x.y, with: {x: ${{ params.who }}, y: 2}}", 28, "${{ params.who }}"),
        ("  a: {run: echo, env: [A=${{ params.who }}]}", 27, "A=${{ params.who }}"),
    ],
)
def test_a_template_unquoted_in_braces_or_brackets_says_to_quote_its_value(
    line: str, col: int, value: str
) -> None:
    # YAML reads the template's own braces as the end of the mapping (or list) it is in.
    text = f"version: 1\nname: x\nparams: {{who: {{default: x}}}}\nsteps:\n{line}\n"
    finding = one(text, "yaml-syntax")
    assert (finding.line, finding.col) == (5, col), finding.format()
    assert finding.message == "a ${{ }} template inside {...} or [...] needs its value quoted"
    assert finding.hint == f'quote it: "{value}"'


@pytest.mark.parametrize(("key", "text"), [("priority", ".nan"), ("timeout", "-.inf")])
def test_a_number_json_cannot_hold_is_one_finding_naming_its_field(key: str, text: str) -> None:
    # The loader's finding and the model's ("... got nan", Python's spelling) made two.
    findings = check(f"version: 1\nname: x\nsteps:\n  a: {{run: echo, {key}: {text}}}\n")
    assert [(f.line, f.message) for f in findings] == [
        (4, f"steps.a.{key}: {text} is not a finite number and cannot be stored as JSON")
    ]


def test_duplicate_keys_are_refused_with_both_lines() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          extract: {run: echo one}
          load: {run: echo two}
          extract: {run: echo three}
        """,
        "yaml-duplicate-key",
    )
    assert finding.line == 6
    assert finding.message.startswith("duplicate key 'extract' (first at line 4)")


def test_unquoted_time_is_read_as_base_60() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            job: tasks.a
            with: {at: 2:00}
        """,
        "yaml-trap",
    )
    assert finding.line == 6
    assert finding.message == "2:00 is read as the number 120 (YAML 1.1 base 60)"
    assert finding.hint == "quote it: '2:00'"


def test_leading_zero_where_text_is_expected_is_octal() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo
            env: {CODE: 0200}
        """,
        "yaml-trap",
    )
    assert finding.line == 6
    assert finding.severity is Severity.ERROR
    assert "0200 is read as the number 128 (YAML 1.1 octal)" in finding.message


def test_leading_zero_in_free_data_is_a_warning() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            job: tasks.chmod
            with: {mode: 0755}
        """,
        "yaml-trap",
    )
    assert (finding.line, finding.severity) == (6, Severity.WARNING)
    assert "0755 is read as the number 493" in finding.message


@pytest.mark.parametrize("word", ["on", "no", "yes", "off"])
def test_yes_no_on_off_where_a_string_is_expected(word: str) -> None:
    finding = one(
        f"""\
        version: 1
        name: x
        tags: [nightly, {word}]
        steps:
          a: {{run: echo}}
        """,
        "yaml-trap",
    )
    assert finding.line == 3
    assert f"tags[1]: {word} is read as the boolean" in finding.message
    assert finding.hint == f"quote it: '{word}'"


def test_booleans_in_free_data_are_left_alone() -> None:
    valid(
        """\
        version: 1
        name: x
        steps:
          a:
            job: tasks.a
            with: {dry_run: yes}
        """
    )


def test_unsafe_tags_are_refused() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            job: tasks.a
            with: {x: !!python/object/apply:os.system ["rm -rf /"]}
        """,
        "yaml-tag",
    )
    assert finding.line == 6
    assert finding.message.startswith("unsafe tag !!python/object/apply:os.system")


def test_alias_bombs_are_refused() -> None:
    layers = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for index in range(1, 8):
        previous, name = chr(ord("a") + index - 1), chr(ord("a") + index)
        layers.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
    finding = one("\n".join(["version: 1", *layers]) + "\n", "yaml-alias-bomb")
    assert "expands to more than 2,000,000 values through aliases" in finding.message
    assert finding.line == 8  # the layer that crosses the bound


def test_empty_file() -> None:
    finding = one("# nothing but a comment\n", "yaml-empty")
    assert (finding.line, finding.message) == (1, "the file is empty")


def test_a_list_at_the_top() -> None:
    finding = one("- version: 1\n- name: x\n", "yaml-top-level")
    assert finding.line == 1
    assert finding.message.endswith("found a list")


def test_a_scalar_at_the_top() -> None:
    finding = one("just some text\n", "yaml-top-level")
    assert finding.message.endswith("found the str 'just some text'")


def test_several_documents() -> None:
    finding = one("version: 1\nname: x\n---\nversion: 1\n", "yaml-documents")
    assert (finding.line, finding.message) == (3, "several YAML documents in one file")


# -- schema ------------------------------------------------------------------------------------


def test_unknown_key_in_a_step_suggests_the_right_one() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a: {run: echo}
          b:
            run: echo
            need: [a]
        """,
        "unknown-key",
    )
    assert (finding.line, finding.col) == (7, 5)
    assert finding.message == "unknown key 'need' in steps.b"
    assert finding.hint == "did you mean 'needs'?"


def test_unknown_keys_at_any_depth_suggest_the_right_one() -> None:
    findings = check(
        """\
        version: 1
        name: x
        defaults:
          retry: {attempts: 3, delay: 5s}
          timout: 5m
        steps:
          a: {run: echo, retry: {atempts: 2}}
        """
    )
    assert [(f.line, f.message, f.hint) for f in findings] == [
        (5, "unknown key 'timout' in defaults", "did you mean 'timeout'?"),
        (7, "unknown key 'atempts' in steps.a.retry", "did you mean 'attempts'?"),
    ]


def test_unknown_key_that_belongs_elsewhere_says_where() -> None:
    finding = one(
        """\
        version: 1
        name: x
        cron: "0 2 * * *"
        steps:
          a: {run: echo}
        """,
        "unknown-key",
    )
    assert finding.line == 3
    assert finding.hint == "'cron' belongs under 'schedule:'"


def test_wrong_type_names_the_field_path() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo
            retry: {attempts: many}
        """,
        "wrong-type",
    )
    assert finding.line == 6
    assert finding.message == "steps.a.retry.attempts: expected an integer, got the string 'many'"


def test_missing_run_and_job() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            with: {x: 1}
        """,
        "missing-action",
    )
    assert finding.line == 4
    assert finding.message == "steps.a: missing 'run' or 'job': say what to execute"
    assert "run: <shell command>" in finding.hint


def test_both_run_and_job() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo
            job: tasks.a
        """,
        "both-actions",
    )
    assert finding.line == 4  # the step's key
    assert "both 'run' and 'job' are set" in finding.message


def test_bad_duration_suggests_the_spelling() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo
            timeout: 5 min
        """,
        "duration",
    )
    assert finding.line == 6
    assert finding.message.startswith("steps.a.timeout: invalid duration '5 min'")
    assert finding.hint == "did you mean '5m'?"


def test_out_of_range_value() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo
            retry: {attempts: 0}
        """,
        "out-of-range",
    )
    assert finding.line == 6
    assert finding.message == "steps.a.retry.attempts: 0 is out of range (must be >= 1)"


def test_bad_enum_lists_the_allowed_values() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a: {run: echo}
          b:
            run: echo
            needs: [a]
            trigger_rule: all_sucess
        """,
        "bad-value",
    )
    assert finding.line == 8
    assert finding.message == (
        "steps.b.trigger_rule: 'all_sucess' is not one of: "
        "all_success, all_done, one_failed, none_failed"
    )
    assert finding.hint == "did you mean 'all_success'?"


@pytest.mark.parametrize(
    ("step", "code", "message", "hint"),
    [
        (
            "{run: echo, throttle: 'db pool'}",
            "bad-format",
            "steps.a.throttle: 'db pool' is not allowed here",
            "use letters, digits, '_', '.', ':' and '-'",
        ),
        (
            "{flow: 'daily report.yaml'}",
            "bad-format",
            "steps.a.flow: 'daily report.yaml' is not allowed here",
            "a .yaml or .yml file's path, relative to this file, without spaces or '$'",
        ),
        ("{run: ''}", "empty", "steps.a.run: must not be empty", ""),
    ],
)
def test_a_string_of_the_wrong_form_is_said_in_words(
    step: str, code: str, message: str, hint: str
) -> None:
    """Never a regular expression or the schema library's own words."""
    finding = one(f"version: 1\nname: x\nsteps:\n  a: {step}\n", code)
    assert (finding.line, finding.message, finding.hint) == (4, message, hint)


def test_every_pattern_of_the_schema_has_its_words() -> None:
    """A string refused by a pattern gets a hint in words, not the pattern: so every pattern
    the model checks has one (durations and whole templates are checked with their own)."""
    patterns: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            patterns.update(v for k, v in node.items() if k == "pattern")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(Flow.model_json_schema())
    assert patterns - {DURATION_PATTERN, WHOLE_TEMPLATE_PATTERN} <= set(PATTERN_HINTS)


def test_an_empty_name_is_said_in_words() -> None:
    finding = one("version: 1\nname: ''\nsteps:\n  a: {run: echo}\n", "empty")
    assert (finding.line, finding.col, finding.message) == (2, 7, "name: must not be empty")


def test_a_value_of_none_of_a_fields_types_is_one_finding() -> None:
    # A choice may be text, an integer or a number: one finding saying so, not one per type
    # (the first of which said to quote the boolean as Python spells it, 'True').
    findings = check(
        "version: 1\nname: x\nparams:\n  c: {type: int, choices: [true, 2]}\n"
        "steps:\n  a: {run: echo}\n"
    )
    assert [(f.line, f.col, f.message, f.hint) for f in findings] == [
        (
            4,
            28,
            "params.c.choices[0]: expected a string, an integer or a number, got the boolean true",
            "quote it: 'true'",
        )
    ]


@pytest.mark.parametrize("key", ["foreach: {items: {a: 1}}", "matrix: {x: {a: 1}}"])
def test_items_of_the_wrong_kind_are_named_not_shown_as_python(key: str) -> None:
    [finding] = check(f"version: 1\nname: x\nsteps:\n  a: {{run: echo, {key}}}\n")
    assert finding.message.endswith("; got a mapping"), finding.message


def test_number_where_text_is_expected_says_quote_it() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a: {run: serve, env: {PORT: 8080}}
        """,
        "wrong-type",
    )
    assert finding.message == "steps.a.env.PORT: expected a string, got the number 8080"
    assert finding.hint == "quote it: '8080'"


def test_foreach_variable_cannot_hide_a_root() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a: {run: echo, foreach: {items: [1], as: params}}
        """,
        "reserved-name",
    )
    assert finding.line == 4
    assert finding.message.startswith("steps.a.foreach: foreach.as cannot be 'params'")


def test_missing_required_top_level_key() -> None:
    finding = one("version: 1\nsteps:\n  a: {run: echo}\n", "missing-key")
    assert (finding.line, finding.message) == (1, "missing required key 'name'")


# -- graph ----------------------------------------------------------------------------------


def test_need_that_names_no_step() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          transform: {run: echo}
          load:
            run: echo
            needs: [transfrom]
        """,
        "unknown-need",
    )
    assert (finding.line, finding.col) == (7, 13)
    assert finding.message == "step 'load' needs 'transfrom', which is not a step"
    assert finding.hint == "did you mean 'transform'?"


@pytest.mark.parametrize(
    ("needs", "message", "hint"),
    [
        ('""', "step 'load' needs '', which is not a step", "steps: load, transform"),
        (
            "[trans form]",
            "step 'load' needs 'trans form', which is not a step",
            "did you mean 'transform'?",
        ),
        (
            "[on_success]",
            "step 'load' needs 'on_success', which is not a step",
            "steps: load, transform",
        ),
    ],
)
def test_a_need_of_no_step_id_spelling_is_one_finding(needs: str, message: str, hint: str) -> None:
    # Not also one saying what a step id may be: the need is a mistake for a step's name.
    findings = check(
        f"version: 1\nname: x\nsteps:\n  transform: {{run: echo}}\n"
        f"  load: {{run: echo, needs: {needs}}}\n"
    )
    col = 29 if needs.startswith("[") else 28
    assert [(f.line, f.col, f.code, f.message, f.hint) for f in findings] == [
        (5, col, "unknown-need", message, hint)
    ]


def test_a_template_in_needs_is_one_finding() -> None:
    findings = check("version: 1\nname: x\nsteps:\n  a: {run: echo, needs: '${{ params.x }}'}\n")
    assert [(f.line, f.col, f.code) for f in findings] == [(4, 25, "template-place")]


@pytest.mark.parametrize("section", ["steps", "params"])
def test_a_key_that_is_no_string_nor_an_id_is_one_finding(section: str) -> None:
    # Quoting it would not help: the finding says what the key may be.
    body = "{run: echo}" if section == "steps" else "{type: int, default: 1}"
    text = f"version: 1\nname: x\n{section}:\n  1: {body}\n"
    if section == "params":
        text += "steps:\n  a: {run: echo}\n"
    findings = check(text)
    assert [(f.line, f.col, f.message, f.hint) for f in findings] == [
        (
            4,
            3,
            f"{section}.1: '1' is not allowed here",
            "use letters, digits, '_' and '-', starting with a letter or '_'",
        )
    ]


def test_a_key_that_is_no_string_elsewhere_says_quote_it() -> None:
    [finding] = check("version: 1\nname: x\nsteps:\n  a: {job: t.a, with: {1: x}}\n")
    assert (finding.code, finding.hint) == ("yaml-key-type", "quote it: '1'")


def test_need_with_nothing_close_lists_a_few_steps_only() -> None:
    steps = "".join(f"  s{index}: {{run: echo}}\n" for index in range(25))
    text = f"version: 1\nname: x\nsteps:\n{steps}  load: {{run: echo, needs: [zzz]}}\n"
    finding = one(text, "unknown-need")
    first = ", ".join(sorted([*(f"s{index}" for index in range(25)), "load"])[:10])
    assert finding.hint == f"steps: {first}, ... (16 more)"


def test_reference_to_no_step_with_nothing_close_lists_a_few_steps_only() -> None:
    steps = "".join(f"  s{index}: {{run: echo}}\n" for index in range(12))
    text = (
        f"version: 1\nname: x\nsteps:\n{steps}"
        "  load: {job: tasks.load, with: {x: '${{ steps.zzz.outputs.x }}'}}\n"
    )
    finding = one(text, "template")
    first = ", ".join(sorted([*(f"s{index}" for index in range(12)), "load"])[:10])
    assert finding.hint == f"steps: {first}, ... (3 more)"


def test_step_needing_itself() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a: {run: echo, needs: [a]}
        """,
        "self-need",
    )
    assert (finding.line, finding.message) == (4, "step 'a' needs itself")


def test_cycle_is_printed_as_a_path() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          extract: {run: echo}
          transform: {run: echo, needs: [extract, load]}
          load: {run: echo, needs: [transform]}
        """,
        "cycle",
    )
    assert finding.line == 6
    assert finding.message == "the needs form a cycle: load -> transform -> load"


def test_step_id_colliding_with_a_generated_job_id() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          load: {run: echo, foreach: {items: [a, b]}}
          load[0]: {run: echo}
        """,
        "generated-id",
    )
    assert (finding.line, finding.col) == (5, 3)
    assert finding.message.startswith("step id 'load[0]' collides with the job ids generated")


def test_step_id_colliding_with_a_hook_job_id() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          finally: {run: echo}
        """,
        "reserved-id",
    )
    assert (finding.line, finding.message) == (
        4,
        "step id 'finally' is the job id of the finally hook",
    )


# -- templates ------------------------------------------------------------------------------


def test_unknown_param_reference() -> None:
    finding = one(
        """\
        version: 1
        name: x
        params:
          date: {type: date, default: "2025-01-31"}
        steps:
          a:
            run: echo ${{ params.dat }}
        """,
        "template",
    )
    assert finding.line == 7
    assert finding.message == "unknown param 'dat' in 'params.dat'"
    assert finding.hint == "did you mean 'date'?"


def test_unknown_root_reference() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo ${{ parms.date }}
        """,
        "template",
    )
    assert (finding.line, finding.hint) == (5, "did you mean 'params'?")


def test_unknown_run_field() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a: {run: "echo ${{ run.logical_day }}"}
        """,
        "template",
    )
    assert finding.message == "unknown reference 'run.logical_day'"
    assert finding.hint == "did you mean 'logical_date'?"


def test_reference_to_a_step_that_is_not_upstream() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          extract_crm: {job: tasks.crm}
          extract_orders: {run: echo}
          transform:
            job: tasks.transform
            needs: [extract_orders]
            with: {crm: "${{ steps.extract_crm.outputs.uri }}"}
        """,
        "template",
    )
    assert finding.line == 9
    assert finding.message == (
        "step 'transform' reads steps.extract_crm.outputs but does not depend on 'extract_crm'"
    )
    assert finding.hint == "add it to needs: needs: [extract_orders, extract_crm]"


def test_reference_to_a_step_upstream_through_others_is_fine() -> None:
    valid(
        """\
        version: 1
        name: x
        steps:
          a: {job: tasks.a}
          b: {run: echo, needs: [a]}
          c: {job: tasks.c, needs: [b], with: {x: "${{ steps.a.outputs.x }}"}}
        """
    )


def test_foreach_items_not_a_list() -> None:
    finding = one(
        """\
        version: 1
        name: x
        params:
          region: {type: string, default: de}
        steps:
          load:
            job: tasks.load
            foreach: {items: "${{ params.region }}"}
        """,
        "foreach-items",
    )
    assert finding.line == 8
    assert finding.message == "foreach.items must be a list: params.region is of type string"
    assert finding.hint == "declare params.region with 'type: array'"


def test_foreach_items_that_are_plain_text() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          load:
            job: tasks.load
            foreach: {items: de, at}
        """,
        "foreach-items",
    )
    assert finding.line == 6
    assert "foreach.items must be a list, or one template" in finding.message


def test_foreach_items_from_a_needed_steps_output_are_valid() -> None:
    flow = valid(
        """\
        version: 1
        name: x
        steps:
          list: {job: tasks.list, outputs: [files]}
          process:
            needs: [list]
            foreach: {items: "${{ steps.list.outputs.files }}", as: f, max_parallel: 4}
            job: tasks.process
            with: {name: "${{ f }}", n: "${{ f.size }}"}
          report:
            needs: [process]
            run: echo "${{ steps.process.outputs }}"
        """
    )
    assert flow.steps["process"].foreach is not None


FANOUT_BASE = """\
version: 1
name: x
steps:
  list: {job: tasks.list, outputs: [files]}
  many: {job: tasks.many, foreach: {items: [1, 2]}, outputs: [files]}
"""


@pytest.mark.parametrize(
    ("step", "line", "col", "message", "hint"),
    [
        (
            '{job: tasks.p, foreach: {items: "${{ steps.list.outputs.files }}"}}',
            6,
            44,
            "foreach.items reads steps.list.outputs but step 'process' does not need 'list' "
            "directly",
            "add it to needs: needs: [list]",
        ),
        (
            '{job: tasks.p, needs: [list], foreach: {items: "${{ steps.list.outputs.fils }}"}}',
            6,
            59,
            "'steps.list.outputs.fils': step 'list' declares no output 'fils'",
            "did you mean 'files'?",
        ),
        (
            '{job: tasks.p, needs: [list], foreach: {items: "${{ steps.list.outputs }}"}}',
            6,
            59,
            "foreach.items reads 'steps.list.outputs': items from a step are one of its outputs",
            "write ${{ steps.<id>.outputs.<key> }}, the step in needs",
        ),
        (
            '{job: tasks.p, needs: [many], foreach: {items: "${{ steps.many.outputs.files }}"}}',
            6,
            59,
            "foreach.items reads the outputs of 'many', which runs as several jobs (foreach or "
            "matrix): its outputs are a list of their outputs",
            "let one step gather the list: a step that needs 'many' and outputs it",
        ),
        (
            "{job: tasks.p, needs: [list], trigger_rule: all_done, "
            'foreach: {items: "${{ steps.list.outputs.files }}"}}',
            6,
            56,
            "step 'process' takes its items from list's output, so it runs when its needs "
            "succeeded: trigger_rule all_done is not possible",
            "remove trigger_rule, or take the items from a param",
        ),
    ],
    ids=["not-a-need", "undeclared-output", "no-output-key", "producer-fans-out", "trigger-rule"],
)
def test_foreach_items_from_outputs_that_cannot_be(
    step: str, line: int, col: int, message: str, hint: str
) -> None:
    finding = one(FANOUT_BASE + f"  process: {step}\n", "foreach-items")
    assert (finding.line, finding.col) == (line, col)
    assert finding.message == message
    assert finding.hint == hint


def test_a_fanout_item_cannot_be_read_in_cwd() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          list: {job: tasks.list}
          process:
            needs: [list]
            foreach: {items: "${{ steps.list.outputs.files }}", as: f}
            run: ls
            cwd: "data/${{ f }}"
        """,
        "template",
    )
    assert (finding.line, finding.col) == (9, 16)
    assert finding.message.startswith("'f' in cwd: the items of step 'process' are known only")


def test_param_default_that_does_not_match_its_type() -> None:
    finding = one(
        """\
        version: 1
        name: x
        params:
          regions: {type: array, items: {type: string}, default: [de, 7]}
        steps:
          a: {run: echo}
        """,
        "param-default",
    )
    assert finding.line == 4
    assert finding.message == (
        "the default of param 'regions' does not match its type: "
        "item 1: expected a string, got the number 7"
    )


_TYPES = "string, int, number, bool, date, array, object"


def test_a_misspelt_param_type_is_the_only_finding_about_that_param() -> None:
    """The default, keys, items and comparisons are not checked against the stand-in type
    (string) the model falls back to: they would blame the param's uses for its type's
    mistake. The templates of a default are still checked."""
    findings = check(
        """\
        version: 1
        name: x
        params:
          n: {type: integer, default: 1}
          r: {type: arrray, default: [a]}
          o: {type: objekt, default: {a: 1}}
          e: {type: integr, default: "${{ run.idd }}"}
        steps:
          a:
            run: echo ${{ params.o.a }}
            foreach: {items: "${{ params.r }}"}
            if: ${{ params.n > 2 }}
        """
    )
    assert [f.format() for f in findings] == [
        f"flow.yaml:4:13: error: params.n.type: 'integer' is not one of: {_TYPES}\n"
        "    hint: did you mean 'int'?",
        f"flow.yaml:5:13: error: params.r.type: 'arrray' is not one of: {_TYPES}\n"
        "    hint: did you mean 'array'?",
        f"flow.yaml:6:13: error: params.o.type: 'objekt' is not one of: {_TYPES}\n"
        "    hint: did you mean 'object'?",
        f"flow.yaml:7:13: error: params.e.type: 'integr' is not one of: {_TYPES}\n"
        "    hint: did you mean 'int'?",
        "flow.yaml:7:31: error: unknown reference 'run.idd'\n    hint: did you mean 'id'?",
    ]
    assert [f.code for f in findings] == ["bad-value"] * 4 + ["template"]


def test_malformed_template() -> None:
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a: {run: "echo ${{ params.x | upper }}"}
        """,
        "template-syntax",
    )
    assert finding.line == 4
    assert "is not a reference" in finding.message


_NOT_A_REFERENCE = (
    "is not a reference: a template holds a dotted path such as params.date or "
    "steps.extract.outputs.uri, nothing else"
)


def test_each_template_of_a_string_is_checked_and_placed_on_its_own() -> None:
    """A malformed template hides none of the others; each finding is at its template's column
    (in a quoted string, a block scalar, twice the same template), or at the string when an
    escape means the template is not written as it reads."""
    findings = check(
        """\
        version: 1
        name: x
        steps:
          a:
            run: echo a
            outputs: [x]
          b:
            needs: [a]
            run: echo "${{ steps.a.outputs.x | upper }} ${{ run.idd }} ${{ steps.a.output.x }}"
            env:
              LINES: |
                first
                ${{ run.fl }} and ${{ run.fl }}
              ESCAPED: "\\u0024{{ run.x }}"
              OPEN: ${{ run.id }} ${{ run.id
        """
    )
    assert [(f.line, f.col, f.code, f.message, f.hint) for f in findings] == [
        (
            9,
            16,
            "template-syntax",
            f"'${{{{ steps.a.outputs.x | upper }}}}' {_NOT_A_REFERENCE}",
            "write ${{ params.name }}",
        ),
        (9, 49, "template", "unknown reference 'run.idd'", "did you mean 'id'?"),
        (
            9,
            64,
            "template",
            "'steps.a.output.x': a step has outputs and status",
            "did you mean 'outputs'?",
        ),
        (13, 9, "template", "unknown reference 'run.fl'", "did you mean 'flow'?"),
        (13, 27, "template", "unknown reference 'run.fl'", "did you mean 'flow'?"),
        (
            14,
            16,
            "template",
            "unknown reference 'run.x'",
            "run has: id, flow, logical_date, logical_time",
        ),
        (15, 27, "template-syntax", "'${{' is not closed with '}}'", "write ${{ params.name }}"),
    ]


def test_template_where_nothing_is_rendered() -> None:
    finding = one(
        """\
        version: 1
        name: x
        tags: ["${{ run.id }}"]
        steps:
          a: {run: echo}
        """,
        "template-place",
    )
    assert (finding.line, finding.message) == (3, "templates are not expanded in tags[0]")


# -- shell commands -------------------------------------------------------------------------


def test_a_nul_character_in_a_command_is_refused_at_its_run() -> None:
    """YAML double quotes read \0 as NUL: the command could never start (no exec can carry
    it), so it is said here, not by a job failing at run time."""
    finding = one(
        """\
        version: 1
        name: x
        steps:
          a:
            run: "printf '\\0'"
        """,
        "nul-character",
    )
    assert (finding.line, finding.col, finding.severity) == (5, 10, Severity.ERROR)
    assert finding.message == (
        "step 'a': the command contains a NUL character, which no shell can run"
    )
    assert "write \\\\0 there, or use single quotes" in finding.hint


def test_a_nul_character_in_env_or_cwd_is_refused_where_it_is_written() -> None:
    findings = [
        f"{f.line}:{f.col}: {f.message}"
        for f in check(
            """\
            version: 1
            name: x
            steps:
              a:
                run: echo "$V"
                env: {V: "a\\0b", W: fine}
                cwd: "data\\0"
            hooks:
              finally:
                run: "echo \\0"
            """
        )
        if f.code == "nul-character"
    ]
    assert findings == [
        "6:14: step 'a': env V contains a NUL character, which no environment variable can carry",
        "7:10: step 'a': cwd contains a NUL character, which no path can hold",
        "10:10: hook 'finally': the command contains a NUL character, which no shell can run",
    ]


def test_a_step_the_model_refuses_still_has_its_command_checked() -> None:
    findings = check(
        """\
        version: 1
        name: x
        steps:
          a:
            run: "\\0"
            timeout: soon
        """
    )
    assert {f.code for f in findings} >= {"nul-character"}, [f.format() for f in findings]


def test_a_backslash_zero_for_the_shell_is_fine() -> None:
    valid(
        """\
        version: 1
        name: x
        steps:
          a: {run: "printf '\\\\0' | od -c"}
          b: {run: printf '\\0' | od -c}
        """
    )


# -- schedule -------------------------------------------------------------------------------

SCHEDULED = """\
version: 1
name: x
schedule:
  cron: {cron}
  timezone: {timezone}
steps:
  a: {{run: echo}}
"""


def _schedule(cron: str, timezone: str = "Europe/Berlin") -> list[str]:
    text = SCHEDULED.format(cron=cron, timezone=timezone)
    return [
        f"{f.line}: {f.severity}: {f.message} | {f.hint}"
        for f in check(text)
        if f.code == "schedule"
    ]


def test_cron_with_the_wrong_field_count() -> None:
    [finding] = _schedule('"0 2 * *"')
    assert finding.startswith("4: error: '0 2 * *': 4 fields, expected 5")


def test_cron_value_out_of_range() -> None:
    [finding] = _schedule('"0 25 * * *"')
    assert finding.startswith("4: error: '0 25 * * *': hour value 25 is out of range 0-23")


def test_cron_that_never_fires() -> None:
    [finding] = _schedule('"0 0 30 2 *"')
    assert finding.startswith("4: error: '0 0 30 2 *': never fires")


@pytest.mark.parametrize(
    ("cron", "message", "hint"),
    [
        (
            "1-0 * * * *",
            "minute field: the range 1-0 runs backwards (a range does not wrap around)",
            "1-59,0",
        ),
        (
            "30-10 * * * *",
            "minute field: the range 30-10 runs backwards (a range does not wrap around)",
            "30-59,0-10",
        ),
        (
            "* 5-2 * * *",
            "hour field: the range 5-2 runs backwards (a range does not wrap around)",
            "5-23,0-2",
        ),
        (
            "0 22-2/2 * * *",
            "hour field: the range 22-2 runs backwards (a range does not wrap around)",
            "22-23/2,0-2/2",
        ),
        (
            "0 0 * nov-feb *",
            "month field: the range nov-feb runs backwards (a range does not wrap around)",
            "nov-dec,jan-feb",
        ),
        (
            "0 0 * * sat-sun",
            "day-of-week field: the range sat-sun runs backwards (a range does not wrap around)",
            "sat,sun",
        ),
        (
            "0 0 * * 5-1",
            "day-of-week field: the range 5-1 runs backwards (a range does not wrap around)",
            "5-6,0-1",
        ),
    ],
)
def test_cron_range_that_runs_backwards_is_refused(cron: str, message: str, hint: str) -> None:
    [finding] = _schedule(f'"{cron}"')
    assert finding == (f"4: error: '{cron}': {message} | write it as two ranges: {hint}")


def test_a_schedule_cron_of_the_wrong_type_says_what_it_takes() -> None:
    [finding] = check("version: 1\nname: x\nschedule: {cron: {a: 1}}\nsteps:\n  a: {run: echo}\n")
    assert (finding.line, finding.col, finding.code, finding.message) == (
        3,
        12,
        "wrong-type",
        'schedule.cron: expected a cron string such as "0 3 * * *", or a list of them, '
        "got a mapping",
    )


def test_cron_list_entries_are_located_one_by_one() -> None:
    text = "version: 1\nname: x\nschedule:\n  cron:\n    - '0 2 * * *'\n    - '61 * * * *'\n"
    text += "steps:\n  a: {run: echo}\n"
    [finding] = [f for f in check(text) if f.code == "schedule"]
    assert finding.line == 6
    assert "minute value 61 is out of range 0-59" in finding.message


@pytest.mark.parametrize(
    ("cron", "hint"),
    [
        (
            "0 2 * * *",
            "write schedule: {cron: \"0 2 * * *\"} ('0 2 * * *' is a valid cron expression)",
        ),
        (
            "0 2 * *",
            'write schedule: {cron: "0 2 * *"}, and fix the expression: '
            "'0 2 * *': 4 fields, expected 5",
        ),
    ],
)
def test_a_schedule_written_as_its_cron_says_how_to_write_it(cron: str, hint: str) -> None:
    [finding] = check(f'version: 1\nname: x\nschedule: "{cron}"\nsteps:\n  a: {{run: echo}}\n')
    assert (finding.line, finding.col, finding.code, finding.message, finding.hint) == (
        3,
        11,
        "wrong-type",
        f"schedule: expected a mapping, got the string '{cron}'",
        hint,
    )


def test_a_value_written_for_the_mapping_it_stands_for_says_which_mapping() -> None:
    # retry: 3 (after 'retries' was renamed), wait: approve...: the field the value belongs to.
    text = """\
        version: 1
        name: x
        concurrency: 1
        defaults: {retry: 2}
        schedule: {cron: "0 1 * * *", catchup: latest}
        params:
          regions: {type: array, default: [de]}
          retry: 3
        steps:
          a: {run: echo, retry: 3, foreach: "${{ params.regions }}"}
          w: {wait: approve}
        """
    assert [(f.line, f.hint) for f in check(text)] == [
        (3, "write concurrency: {max_active_runs: 1}"),
        (4, "write retry: {attempts: 2} (tries in all, the first one included)"),
        (5, "write catchup: {policy: latest}"),
        (8, "write retry: {type: int, default: 3}"),  # a param, not a retry
        (10, "write retry: {attempts: 3} (tries in all, the first one included)"),
        (10, 'write foreach: {items: "${{ params.regions }}"}'),
        (11, "write wait: {signal: approve}"),
    ]


def test_a_param_written_as_its_default_says_how_to_declare_it() -> None:
    text = """\
        version: 1
        name: x
        params:
          n: 3
          ratio: 0.5
          full: false
          city: berlin
          regions: [de, at]
          who:
        steps:
          a: {run: echo}
        """
    assert [(f.line, f.hint) for f in check(text)] == [
        (4, "write n: {type: int, default: 3}"),
        (5, "write ratio: {type: number, default: 0.5}"),
        (6, "write full: {type: bool, default: false}"),
        (7, "write city: {type: string, default: berlin}"),
        (8, 'write regions: {type: array, default: ["de", "at"]}'),
        (9, "write who: {type: string} (without a default, every run must give it)"),
    ]


def test_a_quoted_version_says_to_write_the_number() -> None:
    [finding] = check('version: "1"\nname: x\nsteps:\n  a: {run: echo}\n')
    assert (finding.message, finding.hint) == (
        "version: '1' is not one of: 1",
        "write the number without quotes: version: 1",
    )


@pytest.mark.parametrize(
    ("key", "rule"), [("on_failure", "one_failed"), ("on_success", None), ("finally", "all_done")]
)
def test_a_hook_written_in_a_step_says_where_hooks_go(key: str, rule: str | None) -> None:
    finding = one(
        f"version: 1\nname: x\nsteps:\n  a:\n    run: echo\n    {key}: {{run: echo}}\n",
        "unknown-key",
    )
    step = ", or a step with needs: [a]" + (f" and trigger_rule: {rule}" if rule else "")
    assert finding.hint == f"'{key}' goes under the flow's hooks: (after every step){step}"


def test_steps_written_as_a_list_say_they_are_keyed_by_id() -> None:
    [finding] = check("version: 1\nname: x\nsteps:\n  - name: a\n    run: echo\n")
    assert (finding.message, finding.hint) == (
        "steps: expected a mapping, got a list",
        "key each step by its id: steps: {extract: {run: ...}}, not '- name: extract'",
    )


def test_unknown_time_zone_suggests_one() -> None:
    [finding] = _schedule('"0 4 * * *"', "Europe/Berln")
    assert finding == "5: error: unknown time zone 'Europe/Berln' | did you mean 'Europe/Berlin'?"


def test_fire_time_in_a_daylight_saving_gap_says_what_happens() -> None:
    findings = _schedule('"30 2 * * 0"')
    gap = [f for f in findings if "does not exist" in f]
    assert len(gap) == 1
    assert gap[0].startswith(
        "4: warning: '30 2 * * 0' in Europe/Berlin: 02:30 does not exist on 2026-03-29 "
        "(clocks jump from 02:00 to 03:00): fires once at 03:00"
    )


def test_fire_time_repeated_in_an_overlap_says_what_happens() -> None:
    findings = _schedule('"30 2 * * 0"')
    overlap = [f for f in findings if "twice" in f]
    assert len(overlap) == 1
    assert "02:30 occurs twice on 2026-10-25" in overlap[0]
    assert "fires once, at the first occurrence" in overlap[0]


def test_scheduled_flow_with_a_required_param_without_default() -> None:
    finding = one(
        """\
        version: 1
        name: x
        params:
          customer: {type: string}
        schedule: {cron: "0 4 * * *"}
        steps:
          a: {run: "echo ${{ params.customer }}"}
        """,
        "schedule-param",
    )
    assert finding.line == 4
    assert finding.message == "param 'customer' is required, but scheduled runs give no params"


def test_catch_up_that_would_enqueue_too_many_runs() -> None:
    finding = one(
        """\
        version: 1
        name: x
        schedule:
          cron: "* * * * *"
          catchup: {policy: all, window: 7d}
        steps:
          a: {run: echo}
        """,
        "schedule",
    )
    assert finding.line == 5
    assert finding.severity is Severity.WARNING
    assert "catch-up policy all can enqueue more than 1000 runs" in finding.message
    assert "max_runs" in finding.hint


# -- engine ---------------------------------------------------------------------------------


def test_job_whose_module_does_not_import(tmp_path: Path) -> None:
    (tmp_path / "broken_tasks.py").write_text("import not_a_module_anywhere\n")
    (tmp_path / "good_tasks.py").write_text("def extract(job):\n    return {}\n")
    text = """\
        version: 1
        name: x
        steps:
          a: {job: broken_tasks.extract}
          b: {job: good_tasks.extrakt}
          c: {job: good_tasks.extract}
        """
    findings = [f for f in check(text, flow_dir=tmp_path, check_imports=True) if f.code == "import"]
    assert [(f.line, f.message, f.hint) for f in findings] == [
        (
            4,
            "job 'broken_tasks.extract' does not import: ModuleNotFoundError: "
            "No module named 'not_a_module_anywhere'",
            "'broken_tasks' imports 'not_a_module_anywhere', which is not installed: install it"
            " where the workers run, or fix that import",
        ),
        (
            5,
            "job 'good_tasks.extrakt': module 'good_tasks' has no 'extrakt'",
            "did you mean 'extract'?",
        ),
    ]
    assert not [f for f in check(text, flow_dir=tmp_path) if f.code == "import"]  # opt-in only


def test_job_whose_module_is_missing_or_raises_at_import(tmp_path: Path) -> None:
    """The hint names the real cause: the module itself is missing, or it is there but its
    own code fails (a syntax error, an exception), at the file and line to fix."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "syn.py").write_text("def fn(job)\n    pass\n")
    (tmp_path / "pkg" / "zero.py").write_text("import os\nx = 1 / 0\n")
    text = """\
        version: 1
        name: x
        steps:
          a: {job: pkg.nothere.fn}
          b: {job: nopkg.tasks.fn}
          c: {job: pkg.syn.fn}
          d: {job: pkg.zero.fn}
        """
    findings = [f for f in check(text, flow_dir=tmp_path, check_imports=True) if f.code == "import"]
    assert [f.hint for f in findings] == [
        "make 'pkg.nothere' importable from the flow file's folder or the working directory",
        "make 'nopkg.tasks' importable from the flow file's folder or the working directory",
        "fix the syntax error at pkg/syn.py:1",
        "'pkg.zero' raises ZeroDivisionError when imported: fix pkg/zero.py:2",
    ]


def test_heartbeat_not_shorter_than_timeout() -> None:
    finding = one(
        """\
        version: 1
        name: x
        defaults: {timeout: 1m}
        steps:
          a:
            run: echo
            heartbeat: 1m
        """,
        "heartbeat",
    )
    assert finding.line == 7
    assert finding.message.startswith("step 'a': heartbeat 1m is not shorter than timeout 1m")


# -- all at once ----------------------------------------------------------------------------


def test_every_finding_is_reported_at_once_in_file_order() -> None:
    findings = check(
        """\
        version: 1
        name: Sales ETL
        steps:
          extract:
            run: echo ${{ params.dat }}
            timout: 5m
          load:
            job: tasks.load
            needs: [extrct]
            trigger_rule: sometimes
        """
    )
    assert [(f.line, f.code) for f in findings] == [
        (2, "bad-format"),
        (5, "template"),
        (6, "unknown-key"),
        (9, "unknown-need"),
        (10, "bad-value"),
    ]
    assert has_errors(findings)


def test_a_clean_file_has_no_findings() -> None:
    assert (
        check(
            textwrap.dedent(
                """\
            version: 1
            name: clean
            steps:
              a: {run: echo a}
              b: {job: tasks.b, needs: a, with: {a: "${{ steps.a.outputs.x }}"}}
            """
            )
        )
        == []
    )


@pytest.mark.parametrize(
    ("choices", "col", "message"),
    [
        ('[1, "two"]', 43, "params.n.choices[1]: choice 'two' is not an int value"),
        ("[1, 2, 1]", 46, "params.n.choices[2]: choice 1 is listed twice"),
    ],
)
def test_a_wrong_choice_is_placed_at_the_choice(choices: str, col: int, message: str) -> None:
    findings = check(
        f"version: 1\nname: x\nparams:\n  n: {{type: int, default: 1, choices: {choices}}}\n"
        "steps:\n  a: {run: echo}\n"
    )
    assert [(f.line, f.col, f.message) for f in findings] == [(4, col, message)]


def test_a_default_outside_the_choices_is_a_finding() -> None:
    finding = one(
        """\
        version: 1
        name: x
        params:
          env: {type: string, choices: [dev, prod], default: prdo}
        steps:
          a: {run: echo}
        """,
        "param-default",
    )
    assert finding.line == 4
    assert finding.message == (
        "the default of param 'env' is not among its choices: "
        "'prdo' is not one of its choices (dev, prod); did you mean 'prod'?"
    )


# -- tests: a flow's own test cases -----------------------------------------------------------

_WITH_TESTS = """\
version: 1
name: x
steps:
  a:
    run: echo a
tests:
"""


def test_a_flows_own_tests_are_accepted_and_ignored_by_runs() -> None:
    flow = valid(
        _WITH_TESTS
        + "  - name: ok\n    mock: {a: {outputs: {n: 1}}}\n    expect: {status: succeeded}\n"
    )
    assert flow.tests is not None and flow.tests[0]["name"] == "ok"
    assert list(flow.steps) == ["a"]


def test_a_mistake_in_a_flows_own_tests_is_a_finding_at_its_place() -> None:
    findings = check(
        _WITH_TESTS
        + "  - name: typo\n"
        + "    mock: {b: {outputs: {}}}\n"
        + "    schedule: {from: 2026-01-01T00:00:00Z, to: 2026-01-02T00:00:00Z}\n"
        + "    expect: {status: done}\n"
        + "  - name: typo\n"
    )
    got = {(f.code, f.line, f.col) for f in findings}
    assert ("test-step", 8, 12) in got  # b: not a step of the flow
    assert ("test-schedule", 9, 15) in got  # the flow has no schedule
    assert ("test-status", 10, 22) in got  # done: not a run status
    assert ("test-name", 11, 11) in got  # the name again
    assert has_errors(findings)


@pytest.mark.parametrize("value", ["[]", "3", "[3]"])
def test_tests_must_be_a_list_of_cases(value: str) -> None:
    findings = check(_WITH_TESTS.replace("tests:\n", f"tests: {value}\n"))
    assert [f.line for f in findings if f.severity == "error"] == [6], [
        f.format() for f in findings
    ]


def test_a_cache_key_takes_templates_of_params_and_run_fields() -> None:
    flow = valid(
        """
        version: 1
        name: c
        params: {day: {type: string, default: "x"}}
        steps:
          count:
            run: echo hi
            cache: {key: "v1-${{ params.day }}-${{ run.flow }}", ttl: 1m}
        """
    )
    assert flow.steps["count"].cache is not None


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("${{ params.dya }}", "unknown param 'dya'"),
        ("${{ steps.a.outputs.n }}", "a cache key may read params and run fields"),
        ("${{ run.nope }}", "run.nope"),
    ],
)
def test_a_cache_key_reading_anything_else_is_refused_at_its_column(key: str, message: str) -> None:
    finding = one(
        f"""
        version: 1
        name: c
        params: {{day: {{type: string, default: "x"}}}}
        steps:
          a: {{run: echo a}}
          count:
            needs: [a]
            run: echo hi
            cache: {{key: "{key}", ttl: 1m}}
        """,
        "template",
    )
    assert message in finding.message and finding.line == 10  # the dedented text starts blank


def test_a_cache_file_that_is_not_there_is_named_with_its_place() -> None:
    """A declared file that does not exist adds nothing to the key (an edit of the file meant
    would not run the step again): `flows validate` says so at the file's name."""
    # A short folder: a finding cuts a word past 80 characters, and pytest's own folders are
    # longer on some machines than others.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="cf") as folder:
        _cache_file_findings(Path(folder))


def _cache_file_findings(tmp_path: Path) -> None:
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "orders.sql").write_text("select 1")
    text = """
        version: 1
        name: c
        steps:
          extract:
            run: echo hi
            cache: {ttl: 1d, files: [sql/orders.sql, sql/order.sql, sql]}
        """
    findings = [f for f in check(text, flow_dir=tmp_path) if f.code == "cache-file"]
    assert [(f.severity, f.line) for f in findings] == [(Severity.WARNING, 7)] * 2, findings
    missing, folder = findings
    assert "step 'extract': cache file 'sql/order.sql' not found" in missing.message
    assert str(tmp_path / "sql" / "order.sql") in missing.message
    assert "'sql' is not a file" in folder.message
    assert 0 < missing.col < folder.col


def test_a_cwd_that_is_not_a_folder_is_named_with_its_step_and_path() -> None:
    """Before, a literal ``cwd:`` naming no folder passed `flows validate` and failed the step
    only when it ran (``bad-cwd``). Relative paths are resolved from the flow file's folder, as
    a run resolves them; a templated cwd is known only when the run is built."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="cw") as folder:
        flow_dir = Path(folder)
        (flow_dir / "build").mkdir()
        (flow_dir / "notes.txt").write_text("x")
        text = """
            version: 1
            name: c
            params: {where: {default: build}}
            steps:
              here: {run: echo hi, cwd: build}
              missing: {run: echo hi, cwd: biuld}
              a_file: {run: echo hi, cwd: notes.txt}
              absolute: {run: echo hi, cwd: /no/such/folder}
              templated: {run: echo hi, cwd: "${{ params.where }}/none"}
            hooks:
              finally: {run: echo bye, cwd: gone}
            """
        findings = [f for f in check(text, flow_dir=flow_dir) if f.code == "cwd-not-found"]
    assert [(f.severity, f.line) for f in findings] == [
        (Severity.WARNING, 7),
        (Severity.WARNING, 8),
        (Severity.WARNING, 9),
        (Severity.WARNING, 12),
    ], findings
    missing, a_file, absolute, hook = (f.message for f in findings)
    assert missing.startswith(f"step 'missing': cwd 'biuld' not found ({flow_dir}/biuld)")
    assert a_file.startswith(f"step 'a_file': cwd 'notes.txt' is not a folder ({flow_dir}/")
    assert absolute.startswith("step 'absolute': cwd '/no/such/folder' not found")
    assert hook.startswith("hook 'finally': cwd 'gone' not found")
