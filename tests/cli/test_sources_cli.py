"""``flows sources`` and ``flows sources remove`` through click's runner on the session's real
server: each source a scheduler service published, live or stale by its services' last tick
(passed in with the hidden ``--now`` of ``flows scheduler --once``, relative to the server's
clock), and removing a stale one's files (a live one's only with --force)."""

from __future__ import annotations

import json
from pathlib import Path

import redis
from click.testing import CliRunner, Result
from helpers import assert_unchanged

from flows.cli import main
from scheduler.engine.client import Client
from scheduler.service import catalog

FLOW = "version: 1\nname: {name}\nsteps:\n  a: {{run: 'true'}}\n"
HOUR = 3600.0


def flows(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def published(url: str, folder: Path, source: str, now: float, *names: str) -> None:
    folder.mkdir(parents=True)
    for name in names:
        (folder / f"{name}.yaml").write_text(FLOW.format(name=name))
    result = flows(
        "scheduler", "--redis", url, "--flows-dir", str(folder), "--source", source,
        "--id", f"svc-{source}", "--once", "--now", str(now),
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def test_sources_are_listed_live_or_stale_with_when_each_was_last_seen(
    url: str, client: Client, tmp_path: Path
) -> None:
    assert flows("sources", "--redis", url).stderr == (
        "no source has published flow files: `flows scheduler --flows-dir DIR` does\n"
    )
    now = client.engine.server_time()
    published(url, tmp_path / "old", "old", now - 2 * HOUR, "reload", "legacy")
    published(url, tmp_path / "new", "new", now, "reload")

    listed = json.loads(flows("sources", "--redis", url, "--json").stdout)
    assert [(s["name"], s["live"], s["files"]) for s in listed] == [
        ("new", True, 1), ("old", False, 2),
    ]  # fmt: skip
    assert abs(listed[1]["last_seen"] - (now - 2 * HOUR)) < 1
    assert listed[1]["folder"] == str((tmp_path / "old").resolve())
    table = flows("sources", "--redis", url).stdout
    assert "┃ source ┃ state ┃ last seen ┃ files ┃ published ┃" in table
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines()]
    rows = {row[0]: row for row in cells if row}
    assert rows["new"][1] == "live" and rows["new"][2].endswith("s ago")
    assert (rows["new"][3], rows["new"][-1]) == ("1", "svc-new")
    assert rows["old"][1:4] == ["stale", "2h ago", "2"] and rows["old"][-1] == "svc-old"

    # The old service stops cleanly now: it leaves the health list, the time it left stays.
    client.engine.call("scheduler.forget", "svc-old", now=now - HOUR)
    [old] = [s for s in catalog.sources(client, now) if s.name == "old"]
    assert old.services == () and not old.live
    assert old.last_seen is not None and abs(old.last_seen - (now - HOUR)) < 1


def test_a_stale_source_is_removed_and_a_live_one_only_with_force(
    url: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    now = client.engine.server_time()
    published(url, tmp_path / "old", "old", now - HOUR, "reload")
    published(url, tmp_path / "new", "new", now, "reload")

    with assert_unchanged(redis_client):
        unknown = flows("sources", "remove", "olf", "--redis", url)
        live = flows("sources", "remove", "new", "--redis", url)
    assert unknown.exit_code == 1 and unknown.output == (
        "Error: no source 'olf' has published flow files; did you mean 'old'? (sources: new,"
        " old): see `flows sources`\n"
    )
    assert live.exit_code == 1, live.output
    assert live.output.startswith("Error: source 'new' is live: its service svc-new on ")
    assert live.output.endswith(
        "stop the service first (it is stale once no service of it has ticked for 60 s), or "
        "pass --force\n"
    )

    removed = flows("sources", "remove", "old", "--redis", url)
    assert removed.exit_code == 0, removed.output
    assert removed.stdout == (
        f"removed source old: 1 flow file published from {(tmp_path / 'old').resolve()}\n"
    )
    assert [s.name for s in catalog.sources(client, now)] == ["new"]
    forced = flows("sources", "remove", "new", "--force", "--json", "--redis", url)
    assert json.loads(forced.stdout) == {
        "source": "new", "removed": True, "files": 1, "was_live": True,
    }  # fmt: skip
    assert redis_client.keys("ql:catalog*") == []
    audit = json.loads(flows("audit", "--json", "--redis", url, "-n", "2").stdout)
    assert [(e["action"], e["target"]) for e in audit] == [
        ("sources remove", "new --force --json"), ("sources remove", "old"),
    ]  # fmt: skip
