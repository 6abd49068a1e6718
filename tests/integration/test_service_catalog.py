"""The scheduler service publishes every flow file of its folder, scheduled or not, so that
`flows ui` started without --flows-dir (on any machine) lists and starts them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

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
    assert result.exit_code == 0, result.output


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
