"""A notification channel the scheduler service can never send (its secret missing here, the
URL a secret holds malformed) is said at once: logged when the service loads the flow file,
listed by ``flows notifications`` from the service's health, and its first send's log line says
why it was not sent. A real service on the session's server, real secrets stores; time is
passed in."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from flows_cli_support import flows
from notify_support import Receiver, receiver_fixture
from scheduler_support import make_service
from test_notification_senders import T0, failed_run, secrets

from scheduler.engine.client import Client
from scheduler.notify.outbox import Deliverer
from scheduler.secrets import Secrets, read_env_file
from scheduler.service.loop import SchedulerService

FLOW = """\
version: 1
name: nightly
schedule: {cron: "0 3 * * *"}
notify:
  - on: [failure]
    webhook: {url: "https://hooks.example.com/flows", secret: HOOK_SECRET}
  - on: [failure]
    slack: {url_secret: SLACK_URL}
  - on: [failure]
    webhook: {url: "https://hooks.example.com/fine"}
steps:
  load: {run: "true"}
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiver_fixture()


def _service(client: Client, folder: Path, values: dict[str, str]) -> SchedulerService:
    deliverer = Deliverer(client, secrets=secrets(values), consumer="host-a:pipelines")
    return make_service(client, folder, service_id="host-a", deliverer=deliverer)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_channel_that_cannot_be_sent_is_said_when_its_file_is_loaded(
    cli: CliRunner, client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "pipelines"
    folder.mkdir()
    path = folder / "nightly.yaml"
    path.write_text(FLOW)
    service = _service(client, folder, {"SLACK_URL": "hooks.slack.com/services/T0/B0/X"})
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        service.scan(T0)
        said = _warnings(caplog)
        caplog.clear()
        service.scan(T0 + 1)  # unchanged: not said again
        assert _warnings(caplog) == []
    assert len(said) == 2, said
    webhook, slack = sorted(said, key=lambda line: "slack" in line)
    assert webhook.startswith(
        f"{path}: notification channel webhook https://hooks.example.com/flows cannot be sent "
        "by this service: secret HOOK_SECRET not found"
    ), webhook
    assert slack.startswith(
        f"{path}: notification channel slack (secret SLACK_URL) cannot be sent by this "
        "service: secret SLACK_URL does not hold an http(s) URL"
    ), slack
    assert "hooks.slack.com/services" not in slack  # a URL kept secret stays so
    # The service's health says it: `flows notifications` lists it, --json too.
    service.tick(T0 + 2)
    listed = flows(cli, "notifications")
    assert listed.exit_code == 0, listed.output
    assert "Channels a scheduler service cannot send" in listed.output
    assert "webhook https://hooks.example.com/flows" in listed.output
    assert "secret HOOK_SECRET not found" in listed.output
    document = json.loads(flows(cli, "notifications", "--json").stdout)
    unsendable = {(u["service"], u["file"], u["channel"]) for u in document["unsendable"]}
    assert unsendable == {
        ("host-a", str(path), "webhook https://hooks.example.com/flows"),
        ("host-a", str(path), "slack (secret SLACK_URL)"),
    }
    # Changed so that it can send them: said no more, listed no more.
    path.write_text(FLOW.replace("secret: HOOK_SECRET", "").replace(
        "slack: {url_secret: SLACK_URL}", 'slack: {url: "https://hooks.example.com/slack"}'
    ))  # fmt: skip
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        service.scan(T0 + 3)
        assert _warnings(caplog) == []
    service.tick(T0 + 60)
    document = json.loads(flows(cli, "notifications", "--json").stdout)
    assert document["unsendable"] == []


def test_the_first_send_a_sender_cannot_make_says_why_in_its_log(
    cli: CliRunner, client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "pipelines"
    folder.mkdir()
    service = _service(client, folder, {})
    failed_run(
        cli,
        folder,
        "broken",
        '{on: [failure], webhook: {url: "https://hooks.example.com/x", secret: HOOK_SECRET}}',
    )
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        assert service.deliver(T0) == 0
        assert service.deliver(T0 + 70) == 0  # looked at again a minute later: not said again
    said = [m for m in _warnings(caplog) if "notification channel" in m]
    assert len(said) == 1, said
    assert said[0].startswith(
        "notification channel webhook https://hooks.example.com/x cannot be sent by "
        "host-a:pipelines: secret HOOK_SECRET not found"
    ), said[0]
    assert "another sender" in said[0] and "30 min" in said[0]


def test_a_server_that_lost_its_data_gets_its_notifications_sent_again(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    """A server restarted empty (no persistence, a failover to an empty replica, FLUSHALL) has
    lost the outbox's consumer group that a running service made: its sender made it again
    at once, instead of failing every pass with NOGROUP until the service restarted."""
    folder = tmp_path / "pipelines"
    folder.mkdir()
    service = _service(client, folder, {})
    hook = f'{{on: [failure], webhook: {{url: "{receiver.url}/hook"}}}}'
    failed_run(cli, folder, "first", hook)
    assert service.deliver(T0) == 1
    client.redis.flushall()
    failed_run(cli, folder, "second", hook)
    assert service.deliver(T0 + 1) == 1
    assert sorted(p.json()["flow"] for p in receiver.wait_for(2)) == ["first", "second"]


def test_the_list_follows_a_secret_added_or_removed_while_the_file_stays(
    cli: CliRunner, client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A secret added to the service's env file later (or removed) changes the list at the
    next scan, though the flow file did not change: no restart needed."""
    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "nightly.yaml").write_text(FLOW)
    env_file = tmp_path / "secrets.env"
    env_file.write_text("SLACK_URL=https://hooks.slack.com/services/T0/B0/X\n")
    values = read_env_file(env_file)
    store = Secrets(values, environ={}, dirs=(), env_file=env_file)
    deliverer = Deliverer(client, secrets=store, consumer="host-a:pipelines")
    service = make_service(client, folder, service_id="host-a", deliverer=deliverer)

    def listed(now: float) -> list[str]:
        service.scan(now)
        service.tick(now)
        document = json.loads(flows(cli, "notifications", "--json").stdout)
        return [u["channel"] for u in document["unsendable"]]

    assert listed(T0) == ["webhook https://hooks.example.com/flows"]
    env_file.write_text(f"{env_file.read_text()}HOOK_SECRET=s3cret\n")
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        assert listed(T0 + 60) == []
        assert _warnings(caplog) == []
        env_file.write_text("HOOK_SECRET=s3cret\n")  # SLACK_URL taken away
        assert listed(T0 + 120) == ["slack (secret SLACK_URL)"]
        assert len(_warnings(caplog)) == 1  # said once when it became unsendable
        assert listed(T0 + 180) == ["slack (secret SLACK_URL)"]
        assert len(_warnings(caplog)) == 1  # not again while nothing changed


def test_a_secret_put_in_a_secrets_folder_later_drops_the_channel_out(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "nightly.yaml").write_text(FLOW)
    secrets_dir = tmp_path / "run-secrets"
    secrets_dir.mkdir()
    (secrets_dir / "SLACK_URL").write_text("https://hooks.slack.com/services/T0/B0/X\n")
    store = Secrets({}, environ={}, dirs=(secrets_dir,))
    deliverer = Deliverer(client, secrets=store, consumer="host-a:pipelines")
    service = make_service(client, folder, service_id="host-a", deliverer=deliverer)
    service.scan(T0)
    service.tick(T0)
    document = json.loads(flows(cli, "notifications", "--json").stdout)
    assert [u["channel"] for u in document["unsendable"]] == [
        "webhook https://hooks.example.com/flows"
    ]
    (secrets_dir / "HOOK_SECRET").write_text("s3cret\n")
    service.scan(T0 + 60)
    service.tick(T0 + 60)
    assert json.loads(flows(cli, "notifications", "--json").stdout)["unsendable"] == []
