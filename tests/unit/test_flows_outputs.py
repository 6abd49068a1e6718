"""The worker contract: resolving step references when a job starts, shell output files."""

from __future__ import annotations

from typing import Any

import pytest

from flows.flowfile.job_data import (
    META_KEY,
    FlowsMeta,
    UnresolvedReference,
    Upstream,
    UpstreamJob,
    env_name,
    parse_output_file,
    resolve_payload,
    step_status,
)
from flows.flowfile.templates import Reference


def job_data(payload: dict[str, Any], kind: str = "python") -> dict[str, Any]:
    meta = FlowsMeta(
        run="r",
        flow="f",
        step="transform",
        index=None,
        kind=kind,
        upstream={
            "extract": Upstream(("r:extract",), foreach=False),
            "load": Upstream(("r:load[0]", "r:load[1]"), foreach=True),
        },
        timeout=None,
        heartbeat=None,
        retry={},
        flow_dir="/flows",
    )
    return {**payload, META_KEY: meta.to_json()}


JOBS = {
    "r:extract": UpstreamJob("complete", {"uri": "s3://x", "rows": 3}),
    "r:load[0]": UpstreamJob("complete", {"rows": 5}),
    "r:load[1]": UpstreamJob("failed"),
}


def test_meta_round_trips_and_lists_the_jids_to_read() -> None:
    meta = FlowsMeta.from_data(job_data({}))
    assert meta is not None
    assert meta.upstream_jids() == ["r:extract", "r:load[0]", "r:load[1]"]
    assert FlowsMeta.from_data({"x": 1}) is None
    # A plain job may use the envelope for its own options; that does not make it a flow job.
    assert FlowsMeta.from_data({"_flows": {"pythonpath": ["/lib"], "timeout": 5}}) is None


def test_references_resolve_with_types_and_as_text() -> None:
    data = job_data(
        {
            "uri": "${{ steps.extract.outputs.uri }}",
            "rows": "${{ steps.extract.outputs.rows }}",
            "all": "${{ steps.extract.outputs }}",
            "note": "got ${{ steps.extract.outputs.rows }} rows, load ${{ steps.load.status }}",
            "per_item": "${{ steps.load.outputs.rows }}",
            "items": "${{ steps.load.outputs }}",
        }
    )
    assert resolve_payload(data, JOBS) == {
        "uri": "s3://x",
        "rows": 3,
        "all": {"uri": "s3://x", "rows": 3},
        "note": "got 3 rows, load failed",
        "per_item": [5, None],
        "items": [{"rows": 5}, None],
    }


def test_shell_env_values_become_text() -> None:
    data = job_data({"command": "echo $X", "env": {"X": "${{ steps.load.outputs.rows }}"}}, "shell")
    assert resolve_payload(data, JOBS)["env"] == {"X": "[5,null]"}


def test_resolution_is_a_single_pass() -> None:
    jobs = {**JOBS, "r:extract": UpstreamJob("complete", {"uri": "${{ steps.load.status }}"})}
    data = job_data({"uri": "${{ steps.extract.outputs.uri }}"})
    assert resolve_payload(data, jobs) == {"uri": "${{ steps.load.status }}"}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("${{ steps.extract.outputs.missing }}", "has no key 'missing'"),
        ("${{ steps.other.outputs }}", "step 'other' is not upstream"),
        ("${{ steps.extract.result }}", "expected outputs or status"),
    ],
)
def test_unresolvable_references(template: str, message: str) -> None:
    with pytest.raises(UnresolvedReference, match=message):
        resolve_payload(job_data({"x": template}), JOBS)


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (5, "steps.extract.outputs is the number 5, not a mapping with the key 'rows'"),
        # A result JSON cannot hold (a datetime) is stored as its text.
        (
            "{'rows': datetime.date(2026, 1, 1)}",
            "steps.extract.outputs is the string \"{'rows': datetime.date(2026, 1, 1)}\", "
            "not a mapping with the key 'rows'",
        ),
    ],
)
def test_a_key_of_outputs_that_are_no_mapping_says_what_they_are(result: Any, message: str) -> None:
    jobs = {**JOBS, "r:extract": UpstreamJob("complete", result)}
    with pytest.raises(UnresolvedReference) as raised:
        resolve_payload(job_data({"x": "${{ steps.extract.outputs.rows }}"}), jobs)
    assert str(raised.value).endswith(message), raised.value


@pytest.mark.parametrize(
    ("jobs", "status"),
    [
        ([UpstreamJob("complete")], "success"),
        ([], "success"),
        ([UpstreamJob("complete"), UpstreamJob("failed")], "failed"),
        ([UpstreamJob("complete"), UpstreamJob("expired")], "expired"),
        ([UpstreamJob("complete"), UpstreamJob("running")], "pending"),
        ([UpstreamJob("depends")], "upstream_failed"),
        ([UpstreamJob("complete", skipped=True)], "skipped"),
        ([UpstreamJob("complete", skipped=True), UpstreamJob("complete")], "success"),
    ],
)
def test_step_status(jobs: list[UpstreamJob], status: str) -> None:
    assert step_status(jobs) == status


def test_env_name() -> None:
    reference = Reference(("steps", "extract-crm", "outputs", "uri"))
    assert env_name(reference) == "FLOWS_STEPS_EXTRACT_CRM_OUTPUTS_URI"


def test_parse_output_file() -> None:
    text = "# comment\nuri=s3://bucket/a=b\n\nbody<<EOF\nline 1\nline 2\nEOF\nuri=s3://last\n"
    assert parse_output_file(text) == {"uri": "s3://last", "body": "line 1\nline 2"}
    with pytest.raises(ValueError, match="line 1: expected key=value"):
        parse_output_file("nonsense\n")
    with pytest.raises(ValueError, match="no closing 'EOF'"):
        parse_output_file("a<<EOF\nx\n")


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x1e", "\x0b", "\x0c"])
def test_only_a_newline_ends_an_output_line(separator: str) -> None:
    """A value carrying another line separator (from a param, say) sets no output of its own."""
    text = f"target=/srv/site\ngreeting=hello bob{separator}target=/etc/shadow\r\n"
    assert parse_output_file(text) == {
        "target": "/srv/site",
        "greeting": f"hello bob{separator}target=/etc/shadow",
    }
