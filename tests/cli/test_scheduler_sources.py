"""A scheduler service fires only the schedules of its own source (a folder of flow files, by
name), unregisters one whose file left that folder, and ``flows schedule remove`` unregisters
by hand: ``flows scheduler --once`` through click's runner on the session's real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import assert_unchanged

from flows.cli import main
from scheduler.embedded import EmbeddedServer

T = 1_767_614_400.0  # 2026-01-05 12:00 UTC, a tick of */5

FLOW = """\
version: 1
name: {name}
queue: q
schedule:
  cron: "*/5 * * * *"
  overlap: allow
steps:
  only: {{run: echo {name}}}
"""


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis) -> str:
    return server.url


def flows(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def folder(root: Path, name: str, *flow_names: str) -> Path:
    path = root / name
    path.mkdir(parents=True)
    for flow in flow_names:
        (path / f"{flow}.yaml").write_text(FLOW.format(name=flow))
    return path


def once(url: str, where: Path, now: float, *extra: str) -> dict[str, object]:
    result = flows(
        "scheduler", "--redis", url, "--flows-dir", str(where), "--once", "--now", str(now),
        "--json", *extra,
    )  # fmt: skip
    report: dict[str, object] = json.loads(result.stdout)
    # A file it could not register (another source's flow, say) is a failure of the pass.
    assert result.exit_code == (1 if report["invalid"] else 0), result.output
    return report


def fired(report: dict[str, object]) -> list[str]:
    return sorted(str(f["schedule"]) for f in report["fired"])  # type: ignore[attr-defined]


def sources(url: str) -> dict[str, str | None]:
    rows = json.loads(flows("schedules", "--redis", url, "--json").stdout)
    return {row["name"]: row["source"] for row in rows}


def test_a_service_fires_only_the_schedules_of_its_own_source(url: str, tmp_path: Path) -> None:
    nightly = folder(tmp_path, "pipelines", "nightly")
    examples = folder(tmp_path, "examples", "demo")
    assert once(url, nightly, T - 60)["registered"] == ["nightly"]
    assert once(url, examples, T - 30)["registered"] == ["demo"]
    assert sources(url) == {"demo": "examples", "nightly": "pipelines"}

    assert fired(once(url, examples, T + 1)) == ["demo"]  # nightly is due too: not its own
    assert fired(once(url, nightly, T + 2)) == ["nightly"]
    # The same file in another source does not take the schedule over.
    (examples / "nightly.yaml").write_text(FLOW.format(name="nightly"))
    report = once(url, examples, T + 301)
    assert fired(report) == ["demo"]
    assert "scheduled by source 'pipelines'" in str(report["invalid"])
    assert report["findings"] == []  # the file validates: it names a flow it may not schedule
    assert sources(url)["nightly"] == "pipelines"


def test_a_schedule_of_another_source_in_a_folder_inside_its_own_is_not_fired(
    url: str, tmp_path: Path
) -> None:
    outer = folder(tmp_path, "pipelines", "nightly")
    inner = folder(outer, "team", "demo")
    assert once(url, inner, T - 60, "--source", "team")["registered"] == ["demo"]
    report = once(url, outer, T - 30)
    assert report["registered"] == ["nightly"]
    assert "scheduled by source 'team'" in str(report["invalid"])
    # demo is due too and its file lies under this folder, but it is team's
    assert fired(once(url, outer, T + 1)) == ["nightly"]
    assert fired(once(url, inner, T + 2, "--source", "team")) == ["demo"]


def test_a_file_deleted_from_the_source_is_unregistered_at_the_next_scan(
    url: str, tmp_path: Path
) -> None:
    examples = folder(tmp_path, "examples", "demo", "other")
    once(url, examples, T - 60)
    (examples / "demo.yaml").unlink()
    report = once(url, examples, T + 1)
    assert report["unregistered"] == ["demo"]
    assert fired(report) == ["other"]
    assert sorted(sources(url)) == ["other"]


def test_one_checkout_at_two_paths_is_one_source(url: str, tmp_path: Path) -> None:
    here = folder(tmp_path / "machine-a" / "repo", "pipelines", "nightly", "weekly")
    there = folder(tmp_path / "machine-b" / "checkout", "pipelines", "nightly", "weekly")
    once(url, here, T - 60)
    report = once(url, there, T + 1)
    assert report["registered"] == [] and report["updated"] == []  # the same content
    assert fired(report) == ["nightly", "weekly"]
    (there / "weekly.yaml").unlink()
    assert once(url, there, T + 2)["unregistered"] == ["weekly"]
    # A named source is another source.
    renamed = once(url, there, T + 3, "--source", "other")
    assert "scheduled by source 'pipelines'" in str(renamed["invalid"])


def test_remove_unregisters_a_schedule(url: str, tmp_path: Path, redis_client: redis.Redis) -> None:
    gone = folder(tmp_path, "gone", "orphan")
    once(url, gone, T - 60)
    result = flows("schedule", "remove", "orphan", "--redis", url)
    assert (result.exit_code, result.stdout) == (0, "removed orphan (source gone)\n")
    assert sources(url) == {}
    with assert_unchanged(redis_client):
        again = flows("schedule", "remove", "orphan", "--redis", url)
    assert again.exit_code == 1 and "no schedule 'orphan'" in again.stderr


@pytest.mark.parametrize("bad", ["", "two words", "x" * 257])
def test_a_bad_source_name_is_refused(
    url: str, tmp_path: Path, redis_client: redis.Redis, bad: str
) -> None:
    where = folder(tmp_path, "pipelines", "nightly")
    with assert_unchanged(redis_client):
        result = flows(
            "scheduler", "--redis", url, "--flows-dir", str(where), "--once", "--source", bad
        )
    assert result.exit_code == 2
    assert "--source" in result.stderr and "source name" in result.stderr
    assert "Traceback" not in result.output
