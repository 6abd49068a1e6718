"""The scheduler service publishes every flow file of its folder, scheduled or not, so that
`flows ui` started without --flows-dir (on any machine) lists and starts them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from helpers import assert_unchanged
from ui_support import TOKEN, Api, off_document, serve

from flows.cli import main
from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.service import catalog

FILES = {
    "nightly.yaml": "version: 1\nname: nightly\nschedule: {cron: '0 3 * * *'}\n"
    "steps:\n  a: {run: 'true'}\n",
    "adhoc/reload.yaml": "version: 1\nname: reload\nparams:\n"
    "  env: {type: string, choices: [dev, prod]}\nsteps:\n  a: {run: 'true'}\n",
    "broken.yaml": "version: 1\nname: broken\nsteps:\n  a: {run: 'true', needs: nope}\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    for name, text in FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


def scan(url: str, folder: Path) -> None:
    result = CliRunner().invoke(
        main, ["scheduler", "--redis", url, "--flows-dir", str(folder), "--once"]
    )
    # broken.yaml does not validate (while it is there): said, and the pass fails, after doing
    # the rest.
    broken = (folder / "broken.yaml").exists()
    assert result.exit_code == (1 if broken else 0), result.output
    assert ("broken.yaml:4:27: error: step 'a' needs 'nope'" in result.stderr) == broken


def test_a_services_flows_scheduled_or_not_are_listed_and_started_without_flows_dir(
    server: EmbeddedServer, redis_client: redis.Redis, folder: Path
) -> None:
    url = server.url
    scan(url, folder)
    client = Client(url)
    published = {(e.source, e.path) for e in catalog.entries(client)}
    assert published == {
        ("pipelines", "nightly.yaml"),
        ("pipelines", "adhoc/reload.yaml"),
    }  # broken.yaml does not validate: like any bad input, it changes nothing
    # Nothing changed: the next scan writes nothing to the catalogue.
    with assert_unchanged(redis_client, "ql:catalog*"):
        scan(url, folder)

    with serve(client, Auth(TOKEN, reads_open=True)) as base:  # no --flows-dir
        http = Api(base)
        listed = {f["file"]: f for f in http.get("/api/v1/flows").body["items"]}
        assert sorted(listed) == ["adhoc/reload.yaml", "nightly.yaml"]
        assert {f["source"] for f in listed.values()} == {"pipelines"}
        assert listed["nightly.yaml"]["scheduled"] and not listed["adhoc/reload.yaml"]["scheduled"]
        assert listed["adhoc/reload.yaml"]["params"][0]["choices"] == ["dev", "prod"]
        page = http.get("/start").body
        assert 'data-flow="reload"' in page and 'data-flow="nightly"' in page

        with assert_unchanged(redis_client):
            refused = http.post("/api/v1/flows/reload/runs", {"params": {"env": "qa"}})
        assert refused.status == 422 and "not one of its choices" in str(refused.body)
        started = http.post("/api/v1/flows/reload/runs", {"params": {"env": "prod"}})
        assert started.status == 201, started.body
        record = json.loads(client.engine.call("run.get", started.body["id"]))
        assert record["flow"] == "reload" and record["trigger"] == "manual"
        assert record["file"] == str(folder.resolve() / "adhoc" / "reload.yaml")

        # A file removed and one added: the next scan publishes the folder as it is now.
        (folder / "broken.yaml").unlink()
        (folder / "extra.yaml").write_text("version: 1\nname: extra\nsteps:\n  a: {run: 'true'}\n")
        scan(url, folder)
        files = sorted(f["file"] for f in http.get("/api/v1/flows").body["items"])
        assert files == ["adhoc/reload.yaml", "extra.yaml", "nightly.yaml"]
        missing = http.post("/api/v1/flows/broken/runs", {"params": {}})
        assert missing.status == 404 and "in the services' folders" in str(missing.body)


# -- sources retired, moved or renamed: live and stale ----------------------------------------

RELOAD = "version: 1\nname: reload\nsteps:\n  a: {run: 'true'}\n"
LEGACY = "version: 1\nname: legacy\nsteps:\n  a: {run: 'true'}\n"
HOUR = 3600.0


def published(url: str, folder: Path, source: str, files: dict[str, str], now: float) -> Path:
    """``folder`` with ``files``, published by a service of ``source`` whose last tick is
    ``now`` (``--once --now``: its ping records that time)."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    result = CliRunner().invoke(
        main,
        ["scheduler", "--redis", url, "--flows-dir", str(folder), "--source", source,
         "--id", f"svc-{source}", "--once", "--now", str(now)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return folder


def silent_since(client: Client, source: str, when: float) -> None:
    """The service of ``source`` last ticked at ``when`` (as if it had stopped then)."""
    client.engine.call("scheduler.ping", f"svc-{source}", json.dumps({"source": source}), now=when)


def test_a_flow_a_live_source_and_a_stale_one_define_starts_from_the_live_source(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    client = Client(server.url)
    now = client.engine.server_time()
    # The service moved from old/ to new/ (a new source name) an hour ago.
    published(server.url, tmp_path / "old", "old", {"reload.yaml": RELOAD, "legacy.yaml": LEGACY},
              now - HOUR)  # fmt: skip
    new = published(server.url, tmp_path / "new", "new", {"etl/reload.yaml": RELOAD}, now)

    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        http = Api(base)
        listed = {(f["source"], f["file"]): f for f in http.get("/api/v1/flows").body["items"]}
        assert {k: (f["live"], f["shadowed"]) for k, f in listed.items()} == {
            ("new", "etl/reload.yaml"): (True, False),
            ("old", "legacy.yaml"): (False, False),
            ("old", "reload.yaml"): (False, True),
        }
        assert listed[("old", "reload.yaml")]["last_seen"] == pytest.approx(now - HOUR, abs=1)

        started = http.post("/api/v1/flows/reload/runs", {"params": {}})
        assert started.status == 201, started.body
        record = json.loads(client.engine.call("run.get", started.body["id"]))
        assert record["file"] == str(new.resolve() / "etl" / "reload.yaml")
        # A flow that only a stale source defines is still started from it.
        assert http.post("/api/v1/flows/legacy/runs", {"params": {}}).status == 201

        page = http.get("/start").body
        assert page.count("st-stale") == 2 and "<code>flows sources remove old</code>" in page
        assert page.count('data-flow="reload"') == 1  # the stale copy has no form to start it
        assert "Running reload starts the live source's file." in page
        # The overview marks the service that has not ticked for 60 s, by the same rule.
        services = {item.split(" ")[0]: item for item in http.get("/").body.split("<li>")[1:]}
        assert "source old" in services["svc-old"] and "st-stale" in services["svc-old"]
        assert "source new" in services["svc-new"] and "st-stale" not in services["svc-new"]


def test_several_files_conflict_only_among_live_sources_or_only_stale_ones(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    client = Client(server.url)
    now = client.engine.server_time()
    published(server.url, tmp_path / "old", "old", {"reload.yaml": RELOAD}, now - HOUR)
    published(server.url, tmp_path / "blue", "blue", {"reload.yaml": RELOAD}, now)
    published(server.url, tmp_path / "green", "green", {"a/reload.yaml": RELOAD}, now)

    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        http = Api(base)
        with assert_unchanged(redis_client):
            both = http.post("/api/v1/flows/reload/runs", {"params": {}})
        assert both.status == 409
        message = both.body["detail"]
        assert message.startswith("several files define flow 'reload': ")
        assert "blue:reload.yaml (source blue, live)" in message
        assert "green:a/reload.yaml (source green, live)" in message
        assert "old:reload.yaml (source old, stale, last seen " in message
        assert "Two live sources define it" in message
        assert "`flows sources remove old`" in message and "remove blue" not in message

        silent_since(client, "green", now - 600)  # green's service stopped ten minutes ago
        started = http.post("/api/v1/flows/reload/runs", {"params": {}})
        assert started.status == 201, started.body
        record = json.loads(client.engine.call("run.get", started.body["id"]))
        assert record["file"] == str((tmp_path / "blue").resolve() / "reload.yaml")

        silent_since(client, "blue", now - 300)  # and blue's: only stale sources are left
        with assert_unchanged(redis_client):
            stale = http.post("/api/v1/flows/reload/runs", {"params": {}})
        assert stale.status == 409
        message = stale.body["detail"]
        assert "(source blue, stale, last seen " in message and ", live)" not in message
        assert "Two live sources" not in message
        assert "`flows sources remove blue`, `flows sources remove green`" in message


def test_a_stale_source_is_removed_through_the_api_and_a_live_one_only_by_force(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    client = Client(server.url)
    now = client.engine.server_time()
    published(server.url, tmp_path / "old", "old", {"reload.yaml": RELOAD, "legacy.yaml": LEGACY},
              now - HOUR)  # fmt: skip
    published(server.url, tmp_path / "new", "new", {"reload.yaml": RELOAD}, now)

    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        http = Api(base)
        listed = http.get("/api/v1/sources").body["items"]
        assert [(s["name"], s["live"], s["files"]) for s in listed] == [
            ("new", True, 1), ("old", False, 2),
        ]  # fmt: skip
        assert listed[1]["last_seen"] == pytest.approx(now - HOUR, abs=1)
        assert [s["id"] for s in listed[1]["services"]] == ["svc-old"]

        with assert_unchanged(redis_client):
            assert http.post("/api/v1/sources/old/remove", token=None).status == 401
            unknown = http.post("/api/v1/sources/olf/remove")
            assert unknown.status == 404
            assert unknown.body["detail"] == (
                "no source 'olf' has published flow files; did you mean 'old'? (sources: new, old)"
            )
            live = http.post("/api/v1/sources/new/remove", {"force": False})
            assert live.status == 409
            assert live.body["detail"].startswith("source 'new' is live: its service svc-new on ")
            assert live.body["detail"].endswith('stop the service first (it is stale once no '
                                                'service of it has ticked for 60 s), or send '
                                                '{"force": true}')  # fmt: skip
            assert http.post("/api/v1/sources/new/remove", {"forced": True}).status == 422

        removed = http.post("/api/v1/sources/old/remove")
        assert removed.status == 200, removed.body
        assert off_document(http, "post", "/sources/{source}/remove", removed) is None
        assert removed.body == {"source": "old", "removed": True, "files": 2, "was_live": False}
        assert {f["source"] for f in http.get("/api/v1/flows").body["items"]} == {"new"}
        assert http.post("/api/v1/flows/legacy/runs", {"params": {}}).status == 404

        forced = http.post("/api/v1/sources/new/remove", {"force": True})
        assert forced.body == {"source": "new", "removed": True, "files": 1, "was_live": True}
        assert http.get("/api/v1/flows").body["items"] == []
        audit = [e["action"] for e in http.get("/api/v1/audit").body["items"]]
        assert audit[:2] == ["remove_source", "remove_source"]
    assert redis_client.keys("ql:catalog*") == []
