"""``benchmarks/run.py --smoke`` still runs and produces every figure of the benchmark table.

Benchmarks are not tests: this only keeps the script working (a few hundred jobs, seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.embedded import EmbeddedServer

pytestmark = pytest.mark.slow  # runs the whole benchmark at smoke size

REPO = Path(__file__).resolve().parents[2]

# Every figure of the benchmark table; the key of each in the JSON output.
THROUGHPUT = ["put", "bulk_put", "bulk_put_many", "flow_submit", "drain_1", "drain_2"]
LATENCY = ["latency_p50", "latency_p99", "handoff_server_us"]
ABSOLUTE = [
    "lifecycle_server_us",
    "lifecycle_batched_server_us",
    "memory_waiting",
    "memory_completed",
    "memory_flow_waiting",
    "flow_submit_s",
    "flow_run_s",
    "fanout_expand_s",
    "cli_help_s",
    "cli_runs_s",
    "cli_status_s",
    "chain_start_ms",
    "retention_complete_ms",
]
CRON = "cron_fire_s"
#: Bytes of append-only file per job, against a raw list queue's (no target).
WRITES = ["aof_bytes_plain", "aof_bytes_flow"]


#: A guard against a hang, not a timing: the smoke run takes seconds on a quiet machine.
HANG_GUARD_S = 300


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict[str, object]]]:
    out = tmp_path_factory.mktemp("bench") / "smoke.json"
    # The benchmark's private servers daemonize; their folders go here so none outlives the test.
    scratch = tmp_path_factory.mktemp("bench-tmp")
    process = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--smoke", "--json", str(out)],
        cwd=REPO,
        env=dict(os.environ, TMPDIR=str(scratch)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        # An interrupt unwinds the benchmark's own clean-up, which stops its server.
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
        pytest.fail(f"the smoke benchmark hung for {HANG_GUARD_S} s:\n{stdout}{stderr}")
    finally:
        _stop_leftover_servers(scratch)
    assert process.returncode == 0, stdout + stderr
    document = json.loads(out.read_text())
    assert document["smoke"] is True
    assert document["mode"] == "normal"
    return stdout, {figure["key"]: figure for figure in document["figures"]}


def _stop_leftover_servers(scratch: Path) -> None:
    for data_dir in scratch.glob("flows-bench-*/data"):
        EmbeddedServer(data_dir).stop()


def test_every_figure_is_measured(smoke: tuple[str, dict[str, dict[str, object]]]) -> None:
    _, figures = smoke
    missing = [
        key for key in [*THROUGHPUT, *LATENCY, *ABSOLUTE, *WRITES, CRON] if key not in figures
    ]
    assert not missing
    for key in [*THROUGHPUT, *LATENCY, *ABSOLUTE]:
        value = figures[key]["value"]
        assert isinstance(value, float | int) and value > 0, (key, value)


def test_throughput_and_latency_have_a_baseline_and_a_ratio(
    smoke: tuple[str, dict[str, dict[str, object]]],
) -> None:
    _, figures = smoke
    for key in [*THROUGHPUT, *LATENCY]:
        figure = figures[key]
        assert isinstance(figure["baseline"], float) and figure["baseline"] > 0, key
        assert isinstance(figure["ratio"], float) and figure["ratio"] > 0, key
        assert figure["target"], key
        assert figure["met"] is _met(figure), key


def test_a_jobs_writes_are_measured_against_a_list_queues(
    smoke: tuple[str, dict[str, dict[str, object]]],
) -> None:
    """The engine writes more per job than a bare list queue (its state, history, statistics),
    and the figure says how much: both sides measured, in bytes of append-only file."""
    _, figures = smoke
    for key in WRITES:
        figure = figures[key]
        value, baseline, ratio = figure["value"], figure["baseline"], figure["ratio"]
        assert isinstance(baseline, float) and baseline > 0, key
        assert isinstance(value, float) and value > baseline, key
        assert isinstance(ratio, float) and ratio == value / baseline, key
        assert "commands a job" in str(figure["note"]), key


def _met(figure: dict[str, object]) -> bool:
    """Whether the figure meets its target, worked out here from its own numbers."""
    rule = figure["target_rule"]
    assert isinstance(rule, dict)
    subject = figure["ratio"] if str(rule["kind"]).startswith("ratio") else figure["value"]
    assert isinstance(subject, float | int)
    limit = float(rule["limit"])
    if rule["kind"] == "ratio-min":
        return subject >= limit
    if rule["kind"] == "below":
        return subject < limit
    return subject <= limit


def test_cron_is_measured_or_marked_not_available(
    smoke: tuple[str, dict[str, dict[str, object]]],
) -> None:
    _, figures = smoke
    cron = figures[CRON]
    assert cron["value"] is not None or str(cron["note"]).startswith("n/a"), cron


def test_the_table_lists_every_figure(smoke: tuple[str, dict[str, dict[str, object]]]) -> None:
    stdout, figures = smoke
    assert "mode: normal" in stdout and "appendfsync everysec" in stdout
    for figure in figures.values():
        assert f"| {figure['label']} |" in stdout


def test_engine_ab_compares_two_checkouts() -> None:
    """``benchmarks.engine_ab`` still runs (here this checkout against itself)."""
    sizes = ["--puts", "20", "--steps", "50", "--rounds", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.engine_ab", str(REPO), *sizes],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "round 1: put" in done.stdout
    for version in ("before", "after"):
        assert f"{version}: memory per waiting job" in done.stdout


def test_run_reads_measures_every_read() -> None:
    """``benchmarks.run_reads`` still runs (a small run, one sample)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run_reads", "--items", "20", "--samples", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for figure in ("run.read server time", "flows runs", "GET /metrics", "GET /flows"):
        assert figure in done.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
@pytest.mark.parametrize("kind", ["submit", "fanout", "put"])
def test_engine_instructions_counts_one_call(kind: str) -> None:
    """``benchmarks.engine_instructions`` still runs (a small call under callgrind)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.engine_instructions", kind, "--size", "20"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{kind} of 20: " in done.stdout and " instructions (" in done.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_engine_instructions_waits_for_a_slow_call() -> None:
    """A call runs some fifty times slower under callgrind (a 10,000-step submit about 12 s):
    the client waits for its reply. redis-py's ``Redis()`` gives up after 5 s by default and
    sends the call again, which the count would then hold twice."""
    from benchmarks.engine_instructions import counted_server

    with counted_server() as (client, _control, _out):
        assert client.redis.connection_pool.connection_kwargs["socket_timeout"] is None
