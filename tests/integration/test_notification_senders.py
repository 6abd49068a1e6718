"""Several scheduler services send one namespace's notifications, each with its own secrets:
every event is sent once, by a service that can send it, and given up, with the reasons, only
when none could for a while.

Two real services (each its own folder and source, its own secrets) share the embedded server
and a real HTTP receiver on loopback; real runs fail and leave their events in the outbox. Time
is passed in: no test waits for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from flows_cli_support import flows
from notify_support import Receiver, receiver_fixture
from scheduler_support import make_service

from scheduler.engine.client import Client
from scheduler.notify import outbox
from scheduler.notify.channels import send_webhook, verify
from scheduler.notify.outbox import PARKED, Deliverer
from scheduler.secrets import Secrets
from scheduler.service.loop import SchedulerService

ALPHA_KEY = "alpha-signing-key"
BETA_KEY = "beta-signing-key"
T0 = 1_800_000_000.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiver_fixture()


def secrets(values: dict[str, str]) -> Secrets:
    """Only these values: nothing from this process's environment or /run/secrets."""
    return Secrets(values, environ={}, dirs=())


def service(
    client: Client, tmp_path: Path, source: str, values: dict[str, str], **options: Any
) -> SchedulerService:
    """A scheduler service of source ``source`` whose sender knows only ``values``."""
    folder = tmp_path / source
    folder.mkdir()
    deliverer = Deliverer(
        client,
        secrets=secrets(values),
        consumer=f"host-{source}:{source}",
        **options,
    )
    return make_service(client, folder, service_id=source, deliverer=deliverer)


def failed_run(cli: CliRunner, folder: Path, name: str, *rules: str) -> str:
    """A run of flow ``name`` (in ``folder``, with these ``notify:`` rules) whose one step
    failed; its id."""
    path = folder / f"{name}.yaml"
    lines = ["version: 1", f"name: {name}", "notify:", *(f"  - {r}" for r in rules)]
    path.write_text("\n".join([*lines, "steps:", '  load: {run: "exit 3"}', ""]))
    result = flows(cli, "run", "--detach", str(path))
    assert result.exit_code == 0, result.output
    done = flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    assert done.exit_code == 0, done.output
    return result.stdout.strip()


def test_each_event_is_sent_once_by_the_service_that_holds_its_secret(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    alpha = service(client, tmp_path, "alpha", {"ALPHA_KEY": ALPHA_KEY})
    beta = service(client, tmp_path, "beta", {"BETA_KEY": BETA_KEY})
    alpha_run = failed_run(
        cli,
        alpha.flows_dir,
        "alpha",
        f'{{on: [failure], webhook: {{url: "{receiver.url}/alpha", secret: ALPHA_KEY}}}}',
    )
    beta_run = failed_run(
        cli,
        beta.flows_dir,
        "beta",
        f'{{on: [failure], webhook: {{url: "{receiver.url}/beta", secret: BETA_KEY}}}}',
    )
    # The alpha service reads both events first: it sends its own, leaves beta's in the group.
    assert alpha.deliver(T0) == 1
    [left] = outbox.waiting(client)
    assert left["run"] == beta_run
    [channel] = left["channels"]
    assert channel["status"] == "left"
    assert "host-alpha:alpha: secret BETA_KEY not found" in channel["error"]
    pending = client.engine.redis.xpending_range(
        client.engine.key_prefix + "notify:outbox", "deliver", "-", "+", 10
    )
    assert [p["consumer"] for p in pending] == [PARKED]
    # The beta service takes it, and sends it; then nothing is sent again, whoever looks.
    assert beta.deliver(T0 + 1) == 1
    for later in (T0 + 2, T0 + 100, T0 + 4000):
        assert alpha.deliver(later) == 0 and beta.deliver(later) == 0
    posts = {p.path: p for p in receiver.received}
    assert sorted(posts) == ["/alpha", "/beta"] and len(receiver.received) == 2
    for path, key, run_id in (("/alpha", ALPHA_KEY, alpha_run), ("/beta", BETA_KEY, beta_run)):
        post = posts[path]
        assert post.json()["run"] == run_id
        signature = post.headers["X-Flows-Signature"]
        assert verify(key, post.headers["X-Flows-Timestamp"], post.body, signature)
    assert outbox.waiting(client) == [] and outbox.failed(client) == []
    sends = outbox.recent(client)
    assert {(s["run"], s["status"], s["by"]) for s in sends} == {
        (alpha_run, "delivered", "host-alpha:alpha"),
        (beta_run, "left", "host-alpha:alpha"),
        (beta_run, "delivered", "host-beta:beta"),
    }


def test_an_event_split_between_two_services_sends_each_channel_once(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    alpha = service(client, tmp_path, "alpha", {"ALPHA_KEY": ALPHA_KEY})
    beta = service(client, tmp_path, "beta", {"BETA_URL": f"{receiver.url}/beta"})
    failed_run(
        cli,
        alpha.flows_dir,
        "split",
        f'{{on: [failure], webhook: {{url: "{receiver.url}/alpha", secret: ALPHA_KEY}}}}',
        "{on: [failure], slack: {url_secret: BETA_URL}}",
    )
    receiver.status = 502  # both receivers refuse at first
    assert alpha.deliver(T0) == 0  # its webhook refused; the Slack URL is not its to know
    assert beta.deliver(T0) == 0  # the other way round
    assert alpha.deliver(T0 + 1) == 0 and beta.deliver(T0 + 1) == 0  # backoff: not due yet
    [waiting] = outbox.waiting(client)
    statuses = {c["channel"].split()[0]: (c["status"], c["attempts"]) for c in waiting["channels"]}
    assert statuses == {"webhook": ("retrying", 1), "slack": ("retrying", 1)}
    receiver.status = 200
    assert beta.deliver(T0 + 5) == 1  # its Slack channel is due: sent; the webhook is not its
    assert alpha.deliver(T0 + 5) == 1  # then the webhook, by the one that can sign it
    for later in (T0 + 60, T0 + 4000):
        assert alpha.deliver(later) == 0 and beta.deliver(later) == 0
    paths = [p.path for p in receiver.received]
    assert sorted(paths) == ["/alpha", "/alpha", "/beta", "/beta"]  # refused once, sent once
    assert outbox.waiting(client) == [] and outbox.failed(client) == []


def test_an_event_no_service_can_send_is_given_up_with_their_reasons(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    options = {"give_up_after": 600.0, "recheck_after": 60.0}
    alpha = service(client, tmp_path, "alpha", {"ALPHA_KEY": ALPHA_KEY}, **options)
    beta = service(client, tmp_path, "beta", {"BETA_KEY": BETA_KEY}, **options)
    run_id = failed_run(
        cli,
        alpha.flows_dir,
        "gamma",
        f'{{on: [failure], webhook: {{url: "{receiver.url}/hook", secret: GAMMA_KEY}}}}',
        f'{{on: [failure], webhook: {{url: "{receiver.url}/open"}}}}',
    )
    assert alpha.deliver(T0) == 1  # the unsigned one goes at once
    assert beta.deliver(T0 + 1) == 0  # beta looks at the signed one: cannot either
    # Each looks again only after recheck_after; both have until give_up_after.
    assert alpha.deliver(T0 + 30) == 0 and beta.deliver(T0 + 30) == 0
    [waiting] = outbox.waiting(client)
    [signed] = [c for c in waiting["channels"] if c["status"] == "left"]
    assert "host-alpha:alpha: secret GAMMA_KEY" in signed["error"]
    assert "host-beta:beta: secret GAMMA_KEY" in signed["error"]
    for later in (T0 + 100, T0 + 300):
        alpha.deliver(later)
        beta.deliver(later)
    assert outbox.failed(client) == []
    alpha.deliver(T0 + 600)
    beta.deliver(T0 + 600)
    assert outbox.waiting(client) == []
    [given_up] = outbox.failed(client)
    assert given_up["run"] == run_id
    channels = {c["channel"].split()[1]: c for c in given_up["channels"]}
    assert channels[f"{receiver.url}/open"]["status"] == "delivered"
    hook = channels[f"{receiver.url}/hook"]
    assert hook["status"] == "failed" and hook["attempts"] == 0
    assert hook["error"].startswith("no sender could send it in 10 min (")
    assert "host-beta:beta: secret GAMMA_KEY not found" in hook["error"]
    # The give-up is a send record of its own, with the same reasons, by the one that gave up.
    [last] = [s for s in outbox.recent(client) if s["status"] == "failed"]
    assert (last["attempt"], last["error"], last["by"]) == (0, hook["error"], "host-alpha:alpha")
    shown = flows(cli, "notifications", "--failed")
    assert "no sender could send it" in shown.stdout and "delivered" in shown.stdout
    # Once a service has the secret, the event sent again reaches the channel that missed it
    # only: the open webhook took it already.
    assert beta.deliverer is not None
    beta.deliverer.secrets = secrets({"GAMMA_KEY": "gamma"})
    assert flows(cli, "notifications", "--retry", given_up["id"]).exit_code == 0
    assert alpha.deliver(T0 + 700) == 0 and beta.deliver(T0 + 700) == 1
    assert [p.path for p in receiver.received] == ["/open", "/hook"]
    assert outbox.waiting(client) == [] and outbox.failed(client) == []


def test_a_sender_without_a_channel_leaves_it_to_one_that_has_it(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    hooks_only = service(client, tmp_path, "hooks", {}, senders={"webhook": send_webhook})
    everything = service(client, tmp_path, "all", {})
    failed_run(
        cli,
        hooks_only.flows_dir,
        "mixed",
        f'{{on: [failure], slack: {{url: "{receiver.url}/slack"}}}}',
    )
    assert hooks_only.deliver(T0) == 0
    [waiting] = outbox.waiting(client)
    assert waiting["channels"][0]["error"] == "host-hooks:hooks: no slack channel here"
    assert everything.deliver(T0) == 1
    assert [p.path for p in receiver.received] == ["/slack"]
    listed = json.loads(flows(cli, "notifications", "--json").stdout)
    assert listed["waiting"] == [] and listed["failed"] == []
