"""Finding flow tests and reading them: what is collected, and a case's mistakes as findings."""

from __future__ import annotations

from pathlib import Path

from flows.testing.files import find_test_files, has_tests


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
