"""Finding flow tests and reading them: what is collected, and a case's mistakes as findings."""

from __future__ import annotations

from pathlib import Path

from flows.testing.files import find_test_files, has_tests, read_test_file


def test_only_a_flow_with_tests_is_collected_not_any_yaml_with_a_tests_key(
    tmp_path: Path,
) -> None:
    # The pytest plugin looks at every YAML file of a project that has redis-flows installed:
    # a tool's config with a top-level `tests:` key is not a flow test failing with findings.
    flow = tmp_path / "report.yaml"
    flow.write_text("version: 1\nname: report\nsteps:\n  a: {run: echo}\ntests:\n  - name: x\n")
    config = tmp_path / "ci.yaml"
    config.write_text("tests:\n  unit: true\n  integration: false\n")
    assert has_tests(flow)
    assert not has_tests(config)
    assert find_test_files([tmp_path]) == [flow]


SCHEDULED = """\
version: 1
name: nightly
params:
  n: {type: int, default: 1}
schedule: {cron: "0 3 * * *"}
steps:
  a: {run: echo}
"""


def test_params_in_a_schedule_case_are_a_finding_not_silently_ignored(tmp_path: Path) -> None:
    # The service fires each tick with the flow's defaults: the case's params never reach a run.
    (tmp_path / "nightly.yaml").write_text(SCHEDULED)
    test = tmp_path / "nightly.test.yaml"
    test.write_text(
        "flow: nightly.yaml\ncases:\n"
        "  - name: a week\n"
        "    params: {n: 5}\n"
        '    schedule: {from: "2026-03-01T00:00:00Z", to: "2026-03-08T00:00:00Z"}\n'
        "    expect: {runs: 7}\n"
    )
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message) for f in reading.findings] == [
        (
            4,
            5,
            "a schedule case's runs take the flow's param defaults, as the scheduler's do: "
            "params is not used",
        )
    ]


def test_a_flow_with_tests_whose_steps_are_not_a_mapping_is_a_finding(tmp_path: Path) -> None:
    # The cases' check looked for wait steps in `steps:` as a mapping and crashed on anything
    # else (flows validate, flows test and pytest alike): the model's finding says it instead.
    for steps in ("1", "[a, b]"):
        flow = tmp_path / "x.yaml"
        flow.write_text(f"version: 1\nname: x\nsteps: {steps}\ntests:\n  - name: a\n")
        reading = read_test_file(flow)
        assert reading.test is None
        assert [(f.line, f.col) for f in reading.findings] == [(3, 8)]
        assert reading.findings[0].message.startswith("steps: expected a mapping")


def test_a_cases_params_are_bound_when_read_each_mistake_at_its_place(tmp_path: Path) -> None:
    # A name the flow does not declare, a value its param refuses and a required param left
    # out were found only when the case ran: "could not run", at the case's line. They are
    # findings now, in a test file and in a flow's own tests: (flows validate) alike.
    flow = tmp_path / "report.yaml"
    flow.write_text(
        "version: 1\nname: report\n"
        "params:\n  day: {type: date}\n  go: {type: bool, default: true}\n"
        "steps:\n  a: {run: echo}\n"
    )
    cases = (
        "  - name: unknown\n"  # 3
        "    params: {day: 2026-11-01, goo: 1}\n"  # 4
        "  - name: refused\n"  # 5
        "    params: {day: tomorrow, go: maybe}\n"  # 6
        "  - name: no day\n"  # 7
        "    params: {go: 'no'}\n"  # 8
        "  - name: fine\n"
        "    params: {day: '2026-11-01', go: 'off'}\n"
    )
    test = tmp_path / "report.test.yaml"
    test.write_text("flow: report.yaml\ncases:\n" + cases)
    expected = [
        (4, 31, "unknown param 'goo'", "did you mean 'go'?"),
        (6, 19, "param 'day': expected a date such as 2025-01-31, got the string 'tomorrow'", ""),
        (6, 33, "param 'go': expected true or false (or yes/no, on/off, 1/0), got 'maybe'", ""),
        (8, 5, "missing required param 'day'", "give it under params: {day: ...}"),
    ]
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == expected
    own = tmp_path / "own.yaml"
    own.write_text(flow.read_text() + "tests:\n" + cases)
    reading = read_test_file(own)
    assert [(f.line - 6, f.col, f.message, f.hint) for f in reading.findings] == expected


def test_a_step_named_twice_in_order_is_a_finding(tmp_path: Path) -> None:
    # order compares the order steps first started: [a, b, a] could never pass.
    (tmp_path / "nightly.yaml").write_text(SCHEDULED + "  b: {run: echo}\n")
    test = tmp_path / "nightly.test.yaml"
    test.write_text(
        "flow: nightly.yaml\ncases:\n"
        "  - name: two nights\n"
        '    schedule: {from: "2026-03-01T00:00:00Z", to: "2026-03-03T00:00:00Z"}\n'
        "    expect: {runs: 2, order: [a, b, a, b]}\n"
    )
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message) for f in reading.findings] == [
        (5, 37, "'a' is named twice: order is the order steps first started"),
        (5, 40, "'b' is named twice: order is the order steps first started"),
    ]


def test_a_stubs_skip_that_is_not_true_or_false_is_a_finding(tmp_path: Path) -> None:
    # `skip: "no"` was read as truth: the text skipped the step it meant to run.
    (tmp_path / "x.yaml").write_text("version: 1\nname: x\nsteps:\n  a: {run: echo}\n")
    test = tmp_path / "x.test.yaml"
    test.write_text(
        "flow: x.yaml\ncases:\n"
        "  - name: quoted\n"
        "    mock: {a: {skip: 'no'}}\n"
        "  - name: a number\n"
        "    mock: {a: [{skip: 1}, {skip: false}]}\n"
    )
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == [
        (4, 22, "skip must be true or false", "e.g. skip: true"),
        (6, 23, "skip must be true or false", "e.g. skip: true"),
    ]
    test.write_text(
        "flow: x.yaml\ncases:\n  - name: fine\n    mock: {a: [{skip: true}, {skip: false}]}\n"
    )
    reading = read_test_file(test)
    assert reading.test is not None
    stubs = reading.test.cases[0].mocks["a"]
    assert [stub.skip for stub in stubs] == [True, False]


def test_an_empty_test_file_is_told_what_a_test_file_starts_with(tmp_path: Path) -> None:
    # The YAML reader's hint said what a flow starts with (version, name, steps): a test file
    # written that way gets three unknown keys and no flow.
    test = tmp_path / "x.test.yaml"
    hint = "a test file starts with 'flow: etl.yaml' (its flow) and 'cases:'"
    for text, message in (
        ("", "the file is empty"),
        ("# nothing yet\n", "the file is empty"),
        ("- a\n- b\n", "the top level must be a mapping of keys (flow, cases), found a list"),
    ):
        test.write_text(text)
        reading = read_test_file(test)
        assert reading.test is None
        assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == [
            (1, 1, message, hint)
        ]


def test_a_step_expectation_that_can_never_hold_is_a_finding(tmp_path: Path) -> None:
    # A negative attempts count, or outputs that are neither a mapping nor a foreach step's
    # list, can match nothing: the case failed with a diff instead of its place in the file.
    (tmp_path / "x.yaml").write_text("version: 1\nname: x\nsteps:\n  a: {run: echo}\n")
    test = tmp_path / "x.test.yaml"
    test.write_text(
        "flow: x.yaml\ncases:\n"
        "  - name: never\n"
        "    expect: {steps: {a: {attempts: -1, outputs: 5}}}\n"
        "  - name: fine\n"
        "    expect: {steps: {a: {attempts: 0, outputs: [{n: 1}]}}}\n"
    )
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message) for f in reading.findings] == [
        (4, 36, "attempts must be a number >= 0"),
        (4, 49, "outputs must map the step's outputs to values (a foreach step: a list of them)"),
    ]


def test_a_case_name_with_the_node_separator_is_a_finding(tmp_path: Path) -> None:
    # pytest splits a node id at '::': `pytest x.test.yaml::etl::load` looked for a case 'etl'
    # holding 'load', so the case was collected (and shown by that id) but never selectable.
    flow = tmp_path / "x.yaml"
    flow.write_text("version: 1\nname: x\nsteps:\n  a: {run: echo}\n")
    cases = "  - name: etl::load\n  - name: 'a: b'\n"
    expected = [
        (
            3,
            11,
            "a case name may not contain '::': 'etl::load'",
            "a case is selected as FILE::NAME (pytest): e.g. 'etl: load'",
        )
    ]
    test = tmp_path / "x.test.yaml"
    test.write_text("flow: x.yaml\ncases:\n" + cases)
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == expected
    own = tmp_path / "own.yaml"
    own.write_text(flow.read_text() + "tests:\n" + cases)
    reading = read_test_file(own)  # and so `flows validate` and `flows run`
    assert [(f.line - 3, f.col, f.message, f.hint) for f in reading.findings] == expected


OUTPUTS = """\
version: 1
name: report
steps:
  count:
    run: echo total=40 >> "$FLOWS_OUTPUT"
    outputs: [total]
  each:
    foreach: {items: [1, 2], as: n}
    run: echo rows=1 >> "$FLOWS_OUTPUT"
    outputs: [rows]
  free: {run: echo}
outputs:
  total: "${{ steps.count.outputs.total }}"
  day: "x"
"""


def test_an_output_key_the_flow_or_its_step_does_not_declare_is_a_finding(
    tmp_path: Path,
) -> None:
    # A typo in an expected output key only showed as `expected 40, got null` once the case ran;
    # where the flow (its outputs:) or the step (its outputs:) declares the keys, it is a finding
    # at the key, naming the keys there are. A stub giving one is one too: nothing may read it.
    flow = tmp_path / "report.yaml"
    flow.write_text(OUTPUTS)
    cases = (
        "  - name: typos\n"  # 3
        "    mock: {count: {outputs: {totl: 4}}, free: {outputs: {anything: 1}}}\n"  # 4
        "    expect:\n"  # 5
        "      outputs: {totel: 40, day: x}\n"  # 6
        "      steps:\n"  # 7
        "        count: {outputs: {total: 40, count: 1}}\n"  # 8
        "        each: {outputs: [{rows: 1}, {row: 1}]}\n"  # 9
        "        free: {outputs: {whatever: 1}}\n"  # 10
    )
    expected = [
        (4, 30, "'totl' is not an output of step 'count'", "did you mean 'total'?"),
        (6, 17, "'totel' is not an output of the flow", "did you mean 'total'?"),
        (8, 38, "'count' is not an output of step 'count'", "step 'count' declares: total"),
        (9, 38, "'row' is not an output of step 'each'", "did you mean 'rows'?"),
    ]
    test = tmp_path / "report.test.yaml"
    test.write_text("flow: report.yaml\ncases:\n" + cases)
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == expected
    own = tmp_path / "own.yaml"
    own.write_text(OUTPUTS + "tests:\n" + cases)
    reading = read_test_file(own)  # and so `flows validate` and `flows run`
    lines = OUTPUTS.count("\n") - 1
    assert [(f.line - lines, f.col, f.message, f.hint) for f in reading.findings] == expected


def test_expected_outputs_of_a_flow_without_outputs_are_a_finding(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("version: 1\nname: x\nsteps:\n  a: {run: echo}\n")
    test = tmp_path / "x.test.yaml"
    test.write_text("flow: x.yaml\ncases:\n  - name: none\n    expect: {outputs: {total: 40}}\n")
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == [
        (
            4,
            14,
            "the flow declares no outputs",
            "give the flow an outputs: section, or expect a step's under "
            "expect.steps.<step>.outputs",
        )
    ]


SUBFLOW = """version: 1
name: parent
steps:
  report: {flow: child.yaml}
  own: {flow: child.yaml, outputs: [total]}
  bare: {flow: bare.yaml}
"""


def test_a_sub_flow_steps_outputs_are_checked_against_its_childs(tmp_path: Path) -> None:
    # A sub-flow step without outputs: of its own gives its child's outputs: those are the
    # keys, as for a step that declares them (it was `expected 40, got null` once it ran).
    (tmp_path / "child.yaml").write_text(
        "version: 1\nname: child\nsteps:\n  count: {run: echo, outputs: [total]}\n"
        'outputs:\n  total: "${{ steps.count.outputs.total }}"\n  day: "x"\n'
    )
    (tmp_path / "bare.yaml").write_text("version: 1\nname: bare\nsteps:\n  a: {run: echo}\n")
    (tmp_path / "parent.yaml").write_text(SUBFLOW)
    cases = (
        "  - name: typos\n"  # 3
        "    mock: {report: {outputs: {totl: 4}}}\n"  # 4
        "    expect:\n"  # 5
        "      steps:\n"  # 6
        "        report: {outputs: {total: 40, dya: x}}\n"  # 7
        "        own: {outputs: {day: x}}\n"  # 8
        "        bare: {outputs: {k: 1}}\n"  # 9
    )
    expected = [
        (
            4,
            31,
            "'totl' is not an output of step 'report' (its outputs are sub-flow child.yaml's)",
            "did you mean 'total'?",
        ),
        (
            7,
            39,
            "'dya' is not an output of step 'report' (its outputs are sub-flow child.yaml's)",
            "did you mean 'day'?",
        ),
        (8, 25, "'day' is not an output of step 'own'", "step 'own' declares: total"),
        (
            9,
            16,
            "step 'bare' (sub-flow bare.yaml) gives no outputs",
            "bare.yaml declares no outputs: add an outputs: map to it",
        ),
    ]
    test = tmp_path / "parent.test.yaml"
    test.write_text("flow: parent.yaml\ncases:\n" + cases)
    reading = read_test_file(test)
    assert reading.test is None
    assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == expected
    assert {f.code for f in reading.findings} == {"test-output"}
    own = tmp_path / "own.yaml"
    own.write_text(SUBFLOW + "tests:\n" + cases)
    reading = read_test_file(own)  # and so `flows validate` and `flows run`
    lines = SUBFLOW.count("\n") - 1
    assert [(f.line - lines, f.col, f.message, f.hint) for f in reading.findings] == expected


def test_a_time_that_is_not_one_is_said_in_words_at_its_place(tmp_path: Path) -> None:
    # `at:` and a schedule's `from:`/`to:` said what Python's date parser said ("Invalid
    # isoformat string", "offset must be a timedelta strictly between -timedelta(hours=24)...")
    # and a time before 1970 failed the case when the engine refused its clock.
    (tmp_path / "nightly.yaml").write_text(SCHEDULED)
    test = tmp_path / "nightly.test.yaml"
    test.write_text(
        "flow: nightly.yaml\ncases:\n"
        "  - {name: a, at: not a time}\n"
        '  - {name: b, at: "2026-10-25T02:30:00+25:00"}\n'
        '  - {name: c, at: "1969-12-31T23:59:59Z"}\n'
        "  - {name: d, at: 12345}\n"
        '  - {name: e, schedule: {from: "2026-13-01", to: "2026-03-08T00:00:00Z"}, mock: all}\n'
    )
    reading = read_test_file(test)
    assert reading.test is None
    said = "an ISO 8601 time such as 2026-11-01T03:00:00Z"
    before = "1970-01-01T00:00:00Z, where the engine's clock starts"
    assert [(f.line, f.col, f.message) for f in reading.findings] == [
        (3, 19, f"'not a time' is not {said}"),
        (4, 19, f"'2026-10-25T02:30:00+25:00' is not {said}"),
        (5, 19, f"'1969-12-31T23:59:59Z' is before {before}"),
        (6, 19, f"expected {said}, got the number 12345"),
        (7, 32, f"'2026-13-01' is not {said}"),
    ]


def test_a_schedule_case_of_more_than_a_year_is_refused_at_its_to(tmp_path: Path) -> None:
    # `to: 9999-01-01` ran a schedule case for hours; a year (and a leap day) still runs.
    (tmp_path / "nightly.yaml").write_text(SCHEDULED)
    test = tmp_path / "nightly.test.yaml"
    test.write_text(
        "flow: nightly.yaml\ncases:\n"
        "  - {name: a, schedule: {from: 2026-01-01, to: 9999-01-01}, mock: all}\n"
        '  - {name: b, schedule: {from: 2026-01-01, to: "2027-01-02T00:00:01Z"}, mock: all}\n'
        "  - {name: c, schedule: {from: 2026-01-01, to: 2027-01-02}, mock: all}\n"
    )
    reading = read_test_file(test)
    assert reading.test is None
    why = (
        "a schedule case may cover at most 366 days (each tick runs the flow: a year of a "
        "minutely schedule is 527,040 runs, some 9 minutes)"
    )
    hint = "end it sooner, or split the period into cases of a year or less"
    assert [(f.line, f.col, f.message, f.hint) for f in reading.findings] == [
        (3, 48, f"the period is 2,912,078 days long; {why}", hint),
        (4, 48, f"the period is 366 days and 1s long; {why}", hint),
    ]


def test_a_flow_with_tests_that_is_not_utf8_is_collected_to_say_so(tmp_path: Path) -> None:
    # Left out as unreadable, its cases vanished from `flows test DIR` and pytest unsaid.
    flow = tmp_path / "latin.yaml"
    flow.write_bytes(b"version: 1\nname: latin\nsteps:\n  a: {run: echo caf\xe9}\ntests: []\n")
    assert find_test_files([tmp_path]) == [flow]
    [finding] = read_test_file(flow).findings
    assert (finding.line, finding.col, finding.message) == (
        4,
        20,
        "the file is not UTF-8 text (byte 49)",
    )


def test_a_test_file_naming_a_test_file_as_its_flow_says_so(tmp_path: Path) -> None:
    # It was read as a flow: five findings at 1:1 of a flow's missing keys.
    test = tmp_path / "nightly.test.yaml"
    test.write_text("flow: nightly.test.yaml\ncases:\n  - {name: a}\n")
    [finding] = read_test_file(test).findings
    assert (finding.line, finding.col, finding.message, finding.hint) == (
        1,
        7,
        "'nightly.test.yaml' is a flow test file: flow: names the flow the cases test",
        "e.g. flow: nightly.yaml",
    )


def test_a_misspelt_flow_of_a_test_file_is_answered_with_the_one_likely_meant(
    tmp_path: Path,
) -> None:
    (tmp_path / "nightly.yaml").write_text(SCHEDULED)
    test = tmp_path / "nightly.test.yaml"
    test.write_text("flow: nighlty.yaml\ncases:\n  - {name: a}\n")
    [finding] = read_test_file(test).findings
    assert (finding.message, finding.hint) == (
        "no flow file 'nighlty.yaml' beside nightly.test.yaml",
        "did you mean 'nightly.yaml'?",
    )


def test_a_test_file_without_cases_is_told_to_add_them(tmp_path: Path) -> None:
    (tmp_path / "nightly.yaml").write_text(SCHEDULED)
    test = tmp_path / "nightly.test.yaml"
    test.write_text("flow: nightly.yaml\ncaces:\n  - {name: a}\n")
    findings = [(f.line, f.col, f.message) for f in read_test_file(test).findings]
    assert findings == [
        (1, 1, "no cases: a list of cases, each with a name"),
        (2, 1, "unknown key 'caces' in a test file"),
    ]


def test_a_test_file_named_test_yml_is_one(tmp_path: Path) -> None:
    # flows validate DIR and the scheduler left *.test.yml out as a test file, while flows test
    # and pytest did not look for it: its cases were run, and checked, by nobody.
    (tmp_path / "nightly.yaml").write_text(SCHEDULED)
    test = tmp_path / "nightly.test.yml"
    test.write_text("flow: nightly.yaml\ncases:\n  - {name: a, mock: all}\n")
    assert find_test_files([tmp_path]) == [test]
    reading = read_test_file(test)
    assert reading.findings == [] and reading.test is not None
    assert [case.name for case in reading.test.cases] == ["a"]
