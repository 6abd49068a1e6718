"""Notifications end to end: a real flow run, the engine's outbox, and real receivers on loopback
(an HTTP server, an aiosmtpd SMTP server). Backoff is driven by a passed-in clock."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent
from typing import Any
from unittest.mock import ANY

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows
from helpers import assert_unchanged, dumped
from notify_support import Receiver, SmtpServer, receiver_fixture, smtp_fixture
from scheduler_support import make_service
from ui_support import TOKEN, Api, off_document, serve

from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.connections import connect
from scheduler.notify import channels, outbox
from scheduler.notify.channels import DeliveryError, send_email, verify
from scheduler.notify.events import Context, Event
from scheduler.notify.outbox import Deliverer
from scheduler.secrets import Secrets

HOOK_SECRET = "s3cret-hook-key"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiver_fixture()


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    yield from smtp_fixture()


@pytest.fixture
def cli(
    server: EmbeddedServer, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> CliRunner:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    monkeypatch.setenv("HOOK_SECRET", HOOK_SECRET)
    monkeypatch.setenv("SMTP_LOGIN", "ops:pw")
    monkeypatch.setenv("FLOWS_DASHBOARD_URL", "http://127.0.0.1:8080")
    return CliRunner()


def write(folder: Path, text: str) -> Path:
    path = folder / "flow.yaml"
    path.write_text(dedent(text))
    return path


def failing_flow(folder: Path, receiver: Receiver, smtp: SmtpServer) -> Path:
    return write(
        folder,
        f"""
        version: 1
        name: nightly
        notify:
          - on: [failure, awaiting]
            webhook: {{url: "{receiver.url}/hook", secret: HOOK_SECRET}}
          - on: [failure]
            email: {{to: [ops@example.com], smtp: "{smtp.url}", starttls: false}}
        steps:
          extract: {{run: "echo extracting"}}
          load: {{run: "echo 'disk full' >&2; exit 3", needs: extract}}
          report: {{run: "echo done", needs: load}}
        """,
    )


def test_a_failing_run_sends_one_signed_webhook_and_one_mail(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver, smtp: SmtpServer
) -> None:
    result = flows(cli, "run", str(failing_flow(tmp_path, receiver, smtp)))
    assert result.exit_code == 1
    [post] = receiver.wait_for(1)
    [mail] = smtp.mailbox.wait_for(1)
    body = post.json()
    assert post.path == "/hook"
    assert body["event"] == "failure" and body["scope"] == "run" and body["flow"] == "nightly"
    assert body["failure"]["message"].find("disk full") >= 0 or body["failure"]["group"]
    timestamp = post.headers["X-Flows-Timestamp"]
    assert post.headers["X-Flows-Signature"].startswith("sha256=")
    assert verify(HOOK_SECRET, timestamp, post.body, post.headers["X-Flows-Signature"])
    assert not verify("wrong", timestamp, post.body, post.headers["X-Flows-Signature"])
    assert post.headers["X-Flows-Event-Id"] == body["id"]
    assert body["url"].startswith("http://127.0.0.1:8080/runs/nightly@")
    assert mail["To"] == "ops@example.com"
    assert mail["X-Flows-Event-Id"] == body["id"]  # one event, two channels, one id
    assert "failed" in mail["Subject"] and body["run"] in mail["Subject"]
    # Exactly one of each, and nothing left to send.
    assert len(receiver.received) == 1 and len(smtp.mailbox.messages) == 1
    listed = json.loads(flows(cli, "notifications", "--json").stdout)
    assert listed["failed"] == [] and listed["waiting"] == []
    assert sorted(s["channel"].split()[0] for s in listed["recent"]) == ["email", "webhook"]
    # flows run's sender left the group once it had sent everything
    outbox_key = client.engine.key_prefix + "notify:outbox"
    assert client.engine.redis.xinfo_consumers(outbox_key, "deliver") == []


def test_an_awaiting_step_notifies_with_its_approve_command(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    path = write(
        tmp_path,
        f"""
        version: 1
        name: gate
        steps:
          approve:
            wait: {{signal: approve}}
            notify:
              - on: [awaiting]
                slack: {{url: "{receiver.url}/slack"}}
              - on: [awaiting]
                webhook: {{url: "{receiver.url}/hook"}}
        """,
    )
    result = flows(cli, "run", "--detach", str(path))
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    assert Deliverer(client, dashboard="http://dash:8080").tick() == 2
    posts = {p.path: p for p in receiver.wait_for(2)}
    hook = posts["/hook"].json()
    assert hook["event"] == "awaiting" and hook["step"] == "approve"
    assert hook["approve"]["command"] == f"flows approve {shlex.quote(run_id)} approve"
    assert hook["approve"]["url"] == f"http://dash:8080/runs/{run_id}/steps/approve"
    assert "X-Flows-Signature" not in posts["/hook"].headers  # no secret: unsigned
    text = posts["/slack"].json()["text"]
    assert (
        f"flows approve {shlex.quote(run_id)} approve" in text and "is waiting for approval" in text
    )


def test_a_slack_message_shows_a_failure_s_markup_as_text(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    """A job's words reach Slack as text: `<!channel>` would page the whole channel and
    `<url|words>` would dress a link up as anything, so `&`, `<` and `>` go escaped."""
    path = write(
        tmp_path,
        f"""
        version: 1
        name: loud
        notify:
          - on: [failure]
            slack: {{url: "{receiver.url}/slack"}}
        steps:
          a: {{run: "echo '<!channel> <https://evil.example/|Approve> & co' >&2; exit 1"}}
        """,
    )
    flows(cli, "run", "--detach", str(path))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    assert Deliverer(client, consumer="t").tick() == 1
    text = receiver.wait_for(1)[0].json()["text"]
    assert "&lt;!channel&gt; &lt;https://evil.example/|Approve&gt; &amp; co" in text
    assert "<" not in text and ">" not in text


@pytest.mark.parametrize(
    ("status", "final"), [(404, True), (401, True), (429, False), (408, False)]
)
def test_a_4xx_refusal_of_the_request_is_given_up_at_once_unless_it_says_later(
    cli: CliRunner,
    client: Client,
    tmp_path: Path,
    receiver: Receiver,
    smtp: SmtpServer,
    status: int,
    final: bool,
) -> None:
    """A 404 or 401 says the request itself is wrong (a hook removed, a token revoked): a retry
    gets the same answer, so the channel is given up on the first; 408 and 429 say later."""
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    result = flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    assert result.exit_code == 0, result.output
    receiver.status = status
    secrets = Secrets(environ={"HOOK_SECRET": HOOK_SECRET})
    deliverer = Deliverer(client, secrets=secrets, consumer="t", clock=lambda: 1000.0)
    assert deliverer.tick() == 1  # the mail went; the webhook did not
    if final:
        assert outbox.waiting(client) == []
        [given_up] = outbox.failed(client)
        webhook = next(c for c in given_up["channels"] if c["channel"].startswith("webhook"))
        assert (webhook["status"], webhook["attempts"]) == ("failed", 1)
        assert webhook["error"].endswith("(a refusal of the request itself: not retried)")
    else:
        [waiting] = outbox.waiting(client)
        assert waiting["attempts"] == 1 and f"HTTP {status}" in next(
            iter(waiting["errors"].values())
        )
        assert outbox.failed(client) == []


def test_the_log_line_of_a_given_up_event_says_how_to_send_it_again(
    cli: CliRunner,
    client: Client,
    tmp_path: Path,
    receiver: Receiver,
    smtp: SmtpServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The scheduler service's log is where an operator first sees an event given up: the line
    names the command that sends it again."""
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    result = flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    assert result.exit_code == 0, result.output
    receiver.status = 404
    secrets = Secrets(environ={"HOOK_SECRET": HOOK_SECRET})
    deliverer = Deliverer(client, secrets=secrets, consumer="t", clock=lambda: 1000.0)
    with caplog.at_level("WARNING"):
        deliverer.tick()
    [given_up] = outbox.failed(client)
    [line] = [r.getMessage() for r in caplog.records if "undelivered" in r.getMessage()]
    assert line.endswith(f"; `flows notifications --retry {given_up['id']}` sends it again"), line


def test_a_failing_delivery_is_retried_with_backoff_then_kept_and_shown(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver, smtp: SmtpServer
) -> None:
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    result = flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    assert result.exit_code == 0, result.output
    receiver.status = 500
    now = [1000.0]
    deliverer = Deliverer(
        client,
        secrets=Secrets(environ={"HOOK_SECRET": HOOK_SECRET}),
        consumer="t",
        max_attempts=3,
        clock=lambda: now[0],
    )
    assert deliverer.tick() == 1  # the mail went; the webhook did not
    assert len(receiver.received) == 1 and len(smtp.mailbox.messages) == 1
    now[0] += 1  # before the backoff (5s): nothing is tried
    assert deliverer.tick() == 0 and len(receiver.received) == 1
    now[0] += 5
    deliverer.tick()
    assert len(receiver.received) == 2 and len(smtp.mailbox.messages) == 1  # the mail is not resent
    [waiting] = outbox.waiting(client)
    assert waiting["attempts"] == 2 and "HTTP 500" in next(iter(waiting["errors"].values()))
    now[0] += 10
    deliverer.tick()  # the third attempt: given up, kept
    assert outbox.waiting(client) == []
    [given_up] = outbox.failed(client)
    assert given_up["attempts"] == 3
    assert given_up["undelivered"][0]["channel"].startswith("webhook http://127.0.0.1")
    # Each channel's outcome is kept: the mail went on the first attempt, the webhook never.
    statuses = {c["channel"].split()[0]: c for c in given_up["channels"]}
    assert statuses["email"]["status"] == "delivered" and statuses["email"]["attempts"] == 1
    assert statuses["webhook"]["status"] == "failed" and statuses["webhook"]["attempts"] == 3
    assert statuses["webhook"]["error"].endswith("HTTP 500 Internal Server Error")
    shown = flows(cli, "notifications", "--failed")
    assert given_up["id"] in shown.stdout and "HTTP 500" in shown.stdout
    assert "email ops@example.com: delivered" in shown.stdout
    # Sent again on request, to a receiver that now takes it.
    receiver.status = 200
    with assert_unchanged(client.engine.redis):
        refused = flows(cli, "notifications", "--retry", "0-1")
    assert refused.exit_code == 1 and "no given-up notification 0-1" in refused.output
    for typed in ("", "yesterday", "1-0\x1b]0;pwned\x07"):  # not an id: a usage error
        with assert_unchanged(client.engine.redis):
            refused = flows(cli, "notifications", "--retry", typed)
        assert refused.exit_code == 2 and "is not a notification id" in refused.output
        assert "\x1b" not in refused.output
    assert flows(cli, "notifications", "--retry", given_up["id"]).exit_code == 0
    [again] = outbox.waiting(client)
    assert again["retry_of"] == given_up["id"] and again["id"] != given_up["id"]
    assert [c["channel"].split()[0] for c in again["channels"]] == ["webhook"]
    deliverer.tick()
    # Only the channel that had not taken it: the mail is not sent a second time.
    assert outbox.failed(client) == [] and outbox.waiting(client) == []
    assert len(receiver.received) == 4 and len(smtp.mailbox.messages) == 1
    assert receiver.received[-1].json()["event"] == "failure"


def test_a_delivery_cut_short_is_sent_again_with_the_same_id(
    client: Client, cli: CliRunner, tmp_path: Path, receiver: Receiver, smtp: SmtpServer
) -> None:
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    sent: list[str] = []

    def crash(config: object, event: object, name: str, context: object, secrets: object) -> None:
        raise KeyboardInterrupt  # the process dies mid-send: nothing is acknowledged

    with pytest.raises(KeyboardInterrupt):
        Deliverer(client, consumer="svc", senders={"webhook": crash, "email": crash}).tick()
    again = Deliverer(client, consumer="svc", secrets=Secrets(environ={"HOOK_SECRET": "k"}))
    assert again.tick() == 2
    sent = [p.json()["id"] for p in receiver.wait_for(1)]
    assert sent == [smtp.mailbox.wait_for(1)[0]["X-Flows-Event-Id"]]


def test_a_login_outside_ascii_is_refused_by_the_secret_s_name_alone(smtp: SmtpServer) -> None:
    config = {"smtp": smtp.url, "to": ["ops@example.com"], "starttls": False, "login": "SMTP_LOGIN"}
    event = Event(id="1733450000000-0", kind="failure", run="nightly@x", jid="nightly@x:a", at=0)
    secrets = Secrets(environ={"SMTP_LOGIN": "ops:p\u00e4ss"})
    with pytest.raises(DeliveryError) as refused:
        send_email(config, event, "ops", Context(), secrets)
    assert str(refused.value) == (
        "secret SMTP_LOGIN holds a character outside ASCII, which an SMTP login cannot carry"
    )


def test_a_mail_sent_again_keeps_its_message_id(smtp: SmtpServer) -> None:
    config = {"smtp": smtp.url, "to": ["ops@example.com"], "starttls": False}
    event = Event(id="1733450000000-0", kind="failure", run="nightly@x", jid="nightly@x:a", at=0)
    other = Event(id="1733450000001-0", kind="failure", run="nightly@x", jid="nightly@x:b", at=0)
    for sent in (event, event, other):  # a delivery, its re-delivery, another event
        send_email(config, sent, "ops", Context(flow="nightly"), Secrets(environ={}))
    send_email({**config, "to": ["dev@example.com"]}, event, "dev", Context(), Secrets(environ={}))
    first, again, another, elsewhere = (m["Message-ID"] for m in smtp.mailbox.wait_for(4))
    assert first == again  # nothing random, nothing from the clock
    assert first.startswith("<1733450000000.0.") and first.endswith("@redis-flows>")
    assert len({first, another, elsewhere}) == 3


def test_the_api_and_the_page_show_what_was_given_up(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver, smtp: SmtpServer
) -> None:
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    receiver.status = 503
    deliverer = Deliverer(client, consumer="t", max_attempts=1)
    deliverer.tick()
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        listed = api.get("/api/v1/notifications").body
        [given_up] = listed["failed"]
        assert given_up["undelivered"][0]["error"].endswith("HTTP 503 Service Unavailable")
        assert {s["status"] for s in listed["recent"]} == {"delivered", "failed"}  # its last
        page = api.get("/notifications")
        assert page.status == 200 and given_up["id"] in page.body and "HTTP 503" in page.body
        with assert_unchanged(client.engine.redis):
            assert (
                api.post(f"/api/v1/notifications/{given_up['id']}/retry", token=None).status == 401
            )
            assert api.post("/api/v1/notifications/0-1/retry").status == 404
            malformed = api.post("/api/v1/notifications/%1b%5d0;x/retry")
            assert malformed.status == 422 and "event_id" in str(malformed.body)
        statuses = {c["channel"].split()[0]: c["status"] for c in given_up["channels"]}
        assert statuses == {"webhook": "failed", "email": "delivered"}
        assert "ops@example.com: delivered" in page.body
        receiver.status = 200
        retried = api.post(f"/api/v1/notifications/{given_up['id']}/retry")
        assert retried.status == 200, retried.body
        assert off_document(api, "post", "/notifications/{event_id}/retry", retried) is None
        deliverer.tick()
        assert api.get("/api/v1/notifications").body["failed"] == []
        assert len(smtp.mailbox.messages) == 1  # the mail had gone: not sent again


def listing(cli: CliRunner, api: Api, recent: int) -> dict[str, Any]:
    """``flows notifications --json -n RECENT``, checked to be what the API answers."""
    result = flows(cli, "notifications", "--json", "-n", str(recent))
    assert result.exit_code == 0, result.output
    listed: dict[str, Any] = json.loads(result.stdout)
    assert api.get(f"/api/v1/notifications?recent={recent}").body == listed
    return listed


def test_an_event_is_one_document_in_the_cli_the_api_and_the_page(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver, smtp: SmtpServer
) -> None:
    """A run's failure whose webhook keeps refusing: waiting, then given up after its 10th
    attempt. `flows notifications --json` and the API give the same documents, which name the
    event as its webhook body does, with times as numbers and counts as integers; the last
    attempt is logged as the give-up it is."""
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    [(event_id, fields)] = client.engine.redis.xrange(client.engine.key_prefix + "notify:outbox")
    assert fields["kind"] == "run_failure"  # the engine's name: shown as a failure of the run
    run_id, at = fields["run"], float(fields["at"])
    receiver.status = 502
    now = [1000.0]
    deliverer = Deliverer(
        client,
        secrets=Secrets(environ={"HOOK_SECRET": HOOK_SECRET}),
        consumer="t",
        clock=lambda: now[0],
    )
    tried_at = []
    for attempt in range(1, outbox.MAX_ATTEMPTS):
        deliverer.tick()
        tried_at.append(now[0])
        now[0] += outbox.backoff(attempt)
    hook, mail = f"webhook {receiver.url}/hook", "email ops@example.com"
    error = f"POST {receiver.url}/hook: HTTP 502 Bad Gateway"
    delivered = {
        "rule": 1,
        "event": "failure",
        "channel": mail,
        "status": "delivered",
        "attempts": 1,
        "due": None,
        "error": "",
    }
    waiting = {
        "id": event_id,
        "kind": "failure",
        "scope": "run",
        "run": run_id,
        "step": None,
        "jid": f"{run_id}:load",
        "at": at,
        "exhausted": None,
        "rules": None,
        "retry_of": None,
        "attempts": 9,
        "due": now[0],
        "failed_at": None,
        "channels": [
            {
                "rule": 0,
                "event": "failure",
                "channel": hook,
                "status": "retrying",
                "attempts": 9,
                "due": now[0],
                "error": error,
            },
            delivered,
        ],
        "errors": {"0": error},
        "undelivered": [{"rule": 0, "event": "failure", "channel": hook, "error": error}],
    }

    def send(status: str, attempt: int, when: float) -> dict[str, Any]:
        return {
            "log_id": ANY,
            "id": event_id,
            "event": "failure",
            "run": run_id,
            "jid": f"{run_id}:load",
            "channel": hook,
            "status": status,
            "attempt": attempt,
            "error": error,
            "at": when,
            "by": "t",
            "retry_of": None,
        }

    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        listed = listing(cli, api, recent=2)
        assert listed == {
            "failed": [],
            "waiting": [waiting],
            "recent": [send("retrying", 9, tried_at[8]), send("retrying", 8, tried_at[7])],
            "unsendable": [],
        }
        deliverer.tick()  # the 10th attempt, refused: the last
        listed = listing(cli, api, recent=2)
        hook_given_up = {**waiting["channels"][0], "status": "failed", "attempts": 10, "due": None}
        assert listed == {
            "failed": [
                {
                    **waiting,
                    "attempts": 10,
                    "due": None,
                    "failed_at": now[0],
                    "channels": [hook_given_up, delivered],
                }
            ],
            "waiting": [],
            "recent": [send("failed", 10, now[0]), send("retrying", 9, tried_at[8])],
            "unsendable": [],
        }
        page = api.get("/notifications").body
    # The receivers were told the same name and scope.
    posts = [p.json() for p in receiver.received]
    assert len(posts) == 10 and {(p["event"], p["scope"], p["id"]) for p in posts} == {
        ("failure", "run", event_id)
    }
    assert "run_failure" not in page
    assert f"<td>{event_id}</td><td>failure</td><td>run</td>" in page
    assert "<td>failed</td><td>10</td>" in page and "<td>retrying</td><td>10</td>" not in page
    table = flows(cli, "notifications", "-n", "1").stdout
    assert "run_failure" not in table and "retrying" not in table
    assert re.search(rf"{event_id} +│ failure +│ run +│", table)
    assert re.search(r"│ failed +│ 10 +│ t +│", table)


def test_retrying_an_event_sent_again_names_the_entry_it_became(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver, smtp: SmtpServer
) -> None:
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    receiver.status = 503
    deliverer = Deliverer(
        client,
        secrets=Secrets(environ={"HOOK_SECRET": HOOK_SECRET}),
        consumer="t",
        max_attempts=1,
    )
    deliverer.tick()
    [old] = [e["id"] for e in outbox.failed(client)]
    first = flows(cli, "notifications", "--retry", old)
    assert first.exit_code == 0, first.output
    [again] = outbox.waiting(client)
    new = again["id"]
    assert first.stderr == f"notification {old} is back in the outbox as {new}\n"
    assert (again["retry_of"], again["rules"]) == (old, [0])  # the webhook's rule only
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)

        def refused(event_id: str) -> str:
            with assert_unchanged(client.engine.redis):
                result = flows(cli, "notifications", "--retry", event_id)
                reply = api.post(f"/api/v1/notifications/{event_id}/retry")
            assert result.exit_code == 1 and reply.status == 404
            message: str = reply.body["detail"]
            assert result.stderr == f"Error: {message}\n"
            return message

        said = f"notification {old} was sent again already, as {new}"
        assert refused(old) == f"{said}, which is waiting to be sent"
        assert refused(new) == f"notification {new} is waiting to be sent: it was not given up"
        deliverer.tick()  # refused again: given up again
        [given_up] = outbox.failed(client)
        assert (given_up["id"], given_up["retry_of"], given_up["rules"]) == (new, old, [0])
        assert refused(old) == f"{said}, given up in turn: retry {new}"
        receiver.status = 200
        retried = api.post(f"/api/v1/notifications/{new}/retry").body
        [newest] = [e["id"] for e in outbox.waiting(client)]
        assert retried == {"id": new, "retried": True, "retried_as": newest}
        deliverer.tick()
        assert outbox.waiting(client) == [] and outbox.failed(client) == []
        [sent] = [s for s in outbox.recent(client) if s["status"] == "delivered" and s["retry_of"]]
        assert (sent["id"], sent["retry_of"]) == (newest, new)
        gone = "which is neither waiting nor given up any more (see its latest sends)"
        assert refused(old) == f"notification {old} was sent again already, as {newest}, {gone}"
        assert refused(new) == f"notification {new} was sent again already, as {newest}, {gone}"
        assert refused("0-1") == "no given-up notification 0-1"


def test_retries_of_one_given_up_event_at_once_put_it_back_once(
    cli: CliRunner,
    client: Client,
    server: EmbeddedServer,
    tmp_path: Path,
    receiver: Receiver,
    smtp: SmtpServer,
) -> None:
    flows(cli, "run", "--detach", str(failing_flow(tmp_path, receiver, smtp)))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    receiver.status = 503
    secrets = Secrets(environ={"HOOK_SECRET": HOOK_SECRET})
    Deliverer(client, secrets=secrets, consumer="t", max_attempts=1).tick()
    [old] = [e["id"] for e in outbox.failed(client)]
    start = threading.Barrier(8)
    answers: list[str | None] = []

    def retry() -> None:
        with Client(redis=connect(server.url)) as own:  # each its own connection
            start.wait()
            answers.append(outbox.retry_failed(own, old))

    threads = [threading.Thread(target=retry) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [new] = [a for a in answers if a is not None]
    assert answers.count(None) == 7
    assert [e["id"] for e in outbox.waiting(client)] == [new] and outbox.failed(client) == []
    assert len(smtp.mailbox.messages) == 1  # the mail went once, the first time


def test_a_missed_deadline_is_told_once_and_shown(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    path = write(
        tmp_path,
        f"""
        version: 1
        name: late
        queue: nobody-works-here
        deadline: 30m
        notify:
          - on: [deadline]
            webhook: {{url: "{receiver.url}/hook"}}
        steps:
          slow: {{run: "true"}}
        """,
    )
    result = flows(cli, "run", "--detach", str(path))
    run_id = result.stdout.strip()
    submitted = float(json.loads(client.engine.call("run.get", run_id))["submitted"])
    service = make_service(client, tmp_path)
    # (the record's submit time is rounded to 14 digits: a second either side of the deadline)
    service.housekeep(submitted + 1799)
    assert Deliverer(client).tick() == 0
    service.housekeep(submitted + 1801)
    service.housekeep(submitted + 7200)  # once
    assert Deliverer(client).tick() == 1
    [post] = receiver.wait_for(1)
    body = post.json()
    assert (body["event"], body["scope"], body["run"]) == ("deadline", "run", run_id)
    assert body["summary"] == f"[late] Run {run_id} missed its deadline"
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        run = api.get(f"/api/v1/runs/{run_id}").body
        assert run["deadline"] == 1800 and run["deadline_missed"] == submitted + 1801
        assert 'id="deadline-missed"' in api.get(f"/runs/{run_id}").body
        # What the run page redraws from carries it too, with its badge's words.
        live = api.get(f"/runs/{run_id}/live").body
        at = datetime.fromtimestamp(submitted + 1801, UTC).strftime("%Y-%m-%d %H:%M:%S")
        assert live["deadline_missed"] == submitted + 1801
        assert live["deadline_title"] == f"deadline 30m missed at {at} UTC"
        assert live["steps"]["slow"]["label"] == "step slow: waiting"
        assert "flows_deadlines_missed_total 1.0" in api.get("/metrics").body


def test_a_steps_missed_deadline_is_shown_on_the_run(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        name: late-step
        queue: held
        steps:
          slow: {run: "true", deadline: 5m}
        """,
    )
    run_id = flows(cli, "run", "--detach", str(path)).stdout.strip()
    started = float(client.redis.time()[0])
    client.engine.call("pop.lean", "held", "somebody", 1, now=started)  # started, never ends
    service = make_service(client, tmp_path)
    service.housekeep(started + 299)
    assert json.loads(client.engine.call("run.read", run_id))["steps"][0]["deadline_missed"] is None
    service.housekeep(started + 301)
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        [step] = api.get(f"/api/v1/runs/{run_id}").body["steps"]
        assert step["deadline_missed"] == started + 301
        assert step["jobs"][0]["deadline_missed"] == started + 301
        assert "deadline_missed" not in api.get(f"/api/v1/runs/{run_id}").body  # the run's own
        assert "step slow: running, deadline missed" in api.get(f"/runs/{run_id}").body
        live = api.get(f"/runs/{run_id}/live").body
        assert live["deadline_missed"] is None and live["deadline_title"] is None
        assert live["steps"]["slow"]["deadline_missed"] == started + 301
        assert live["steps"]["slow"]["label"] == "step slow: running, deadline missed"
        assert 'id="step-deadline-missed"' in api.get(f"/runs/{run_id}/steps/slow").body


def failed_run_telling_slack(cli: CliRunner, folder: Path) -> None:
    """A run that failed, of a flow telling Slack at the URL in secret SLACK_URL, worked here."""
    path = write(
        folder,
        """
        version: 1
        name: quiet
        notify:
          - on: [failure]
            slack: {url_secret: SLACK_URL}
        steps:
          a: {run: "exit 1"}
        """,
    )
    flows(cli, "run", "--detach", str(path))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")


def test_a_url_kept_in_a_secret_is_stored_and_shown_nowhere(
    cli: CliRunner,
    client: Client,
    tmp_path: Path,
    receiver: Receiver,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hook_url = f"{receiver.url}/services/T000/B000/secret-part"
    monkeypatch.setenv("SLACK_URL", hook_url)
    failed_run_telling_slack(cli, tmp_path)
    receiver.status = 500
    deliverer = Deliverer(client, consumer="t")
    deliverer.tick()
    [waiting] = outbox.waiting(client)
    assert list(waiting["errors"].values()) == [
        "POST (the URL in secret SLACK_URL): HTTP 500 Internal Server Error"
    ]
    for key, held in dumped(redis_client):
        assert b"secret-part" not in held, key
    assert receiver.received[0].path == "/services/T000/B000/secret-part"
    both = "version: 1\nname: x\nnotify:\n  - slack: {url: 'http://a/b', url_secret: S}\n"
    (tmp_path / "both.yaml").write_text(both + "steps:\n  a: {run: 'true'}\n")
    result = flows(cli, "validate", str(tmp_path / "both.yaml"))
    assert result.exit_code == 1 and "exactly one of url and url_secret" in result.output


def test_a_channel_that_fails_is_logged_once_and_once_more_when_it_works_again(
    cli: CliRunner,
    client: Client,
    tmp_path: Path,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A channel that kept failing logged nothing for the half hour of its retries, until it
    was given up: now one warning at its first failure (naming it and why, its secret URL
    unsaid) and one line when it takes a notification again."""
    monkeypatch.setenv("SLACK_URL", f"{receiver.url}/services/T000/B000/secret-part")
    failed_run_telling_slack(cli, tmp_path)
    receiver.status = 500
    now = [1000.0]
    deliverer = Deliverer(client, consumer="t", clock=lambda: now[0])

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == outbox.log.name]

    with caplog.at_level(logging.INFO, logger=outbox.log.name):
        deliverer.tick()
        now[0] += 5
        deliverer.tick()
        assert len(receiver.received) == 2  # two attempts failed: one line
        assert said() == [
            "notification channel slack (secret SLACK_URL) fails: POST (the URL in secret"
            " SLACK_URL): HTTP 500 Internal Server Error (`flows notifications` lists what"
            " waits and what was given up)"
        ]
        receiver.status = 200
        now[0] += 10
        assert deliverer.tick() == 1
        now[0] += 3600
        deliverer.tick()  # nothing left: nothing said
    assert said()[1:] == [
        "notification channel slack (secret SLACK_URL) works again after 2 failures"
    ]
    assert [r.levelno for r in caplog.records if r.name == outbox.log.name] == [
        logging.WARNING,
        logging.INFO,
    ]
    assert "secret-part" not in caplog.text


def webhook_flow(folder: Path, url: str) -> Path:
    """A flow whose one step fails, with one webhook rule (signed) to ``url``."""
    return write(
        folder,
        f"""
        version: 1
        name: hooked
        notify:
          - webhook: {{url: "{url}", secret: HOOK_SECRET}}
        steps:
          a: {{run: "exit 1"}}
        """,
    )


def test_an_entry_in_flight_is_kept_and_one_that_waited_its_turn_is_claimed(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    """A sender reads a page of entries and sends them in turn. Behind a receiver that holds
    its first request open, the entries after it wait longer than a claim needs, and a second
    sender claims and sends them: the first must find that out before it sends them too. The
    entry being sent is not claimed: its sender renews its claim while the send lasts (before,
    the second sender claimed it too and it was sent twice)."""
    path = webhook_flow(tmp_path, f"{receiver.url}/hook")
    for _ in range(2):
        flows(cli, "run", "--detach", str(path))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    first, second = (Deliverer(client, consumer=name, claim_after=0.3) for name in ("a", "b"))
    receiver.hold.set()  # the first sender's first send hangs until released
    slow = threading.Thread(target=first.tick, daemon=True)
    slow.start()
    [in_flight] = [r.headers["X-Flows-Event-Id"] for r in receiver.wait_for(1)]
    receiver.hold.clear()
    claimed = 0
    for _ in range(100):  # idle past claim_after: the second sender claims the one waiting
        claimed = second.tick()
        if claimed:
            break
        threading.Event().wait(0.05)
    assert claimed == 1
    for _ in range(10):  # many claims' time later, the one in flight is still the first's
        assert second.tick() == 0
        threading.Event().wait(0.1)
    receiver.release.set()
    slow.join(30)
    sent = Counter(r.headers["X-Flows-Event-Id"] for r in receiver.received)
    [waited] = set(sent) - {in_flight}
    assert (sent[in_flight], sent[waited]) == (1, 1), sent
    assert outbox.waiting(client) == [] and outbox.failed(client) == []


class StallingRelay:
    """A unix socket that passes each connection on to a server's socket, and can stall the
    connections open at a time: what their clients send from then on is held until
    :meth:`thaw` (a network that stopped answering those connections, and only those)."""

    def __init__(self, path: Path, target: str) -> None:
        self.url = f"unix://{path}"
        self.target = target
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        self.listener.listen()
        self.links: list[socket.socket] = []
        self.stalled: set[socket.socket] = set()
        self.holding = threading.Event()  # a stalled connection's request is held
        self.thawed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.socket(socket.AF_UNIX)
            far.connect(self.target)
            self.links += (near, far)
            threading.Thread(target=self._pump, args=(near, far), daemon=True).start()
            threading.Thread(target=self._pump, args=(far, near), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if source in self.stalled:
                    self.holding.set()
                    self.thawed.wait(60)
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def stall(self) -> None:
        self.stalled.update(self.links)

    def thaw(self) -> None:
        self.thawed.set()

    def close(self) -> None:
        self.thaw()
        self.listener.close()
        for link in self.links:
            link.close()


def test_a_renewal_stuck_on_its_connection_neither_holds_the_sender_nor_renews_after(
    cli: CliRunner,
    client: Client,
    server: EmbeddedServer,
    tmp_path: Path,
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The claim of an entry being sent is renewed by a thread the sender waited for without
    a bound: a renewal whose connection stopped answering held the sender up after its send
    was over, until the connection timed out (5 s by default, or never). Now it waits a second
    at most, and a renewal that returns after the send changes and says nothing."""
    flows(cli, "run", "--detach", str(webhook_flow(tmp_path, f"{receiver.url}/hook")))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    folder = Path(tempfile.mkdtemp(prefix="relay", dir="/tmp"))  # a socket path is short
    relay = StallingRelay(folder / "s.sock", str(server.socket_path))
    try:
        sender = Deliverer(Client(relay.url), consumer="a", claim_after=0.4)
        receiver.hold.set()
        ticking = threading.Thread(target=sender.tick, daemon=True)
        ticking.start()
        [request] = receiver.wait_for(1)
        entry_id = request.headers["X-Flows-Event-Id"]
        relay.stall()  # the connection the renewals use stops answering
        assert relay.holding.wait(10)  # a renewal is stuck on it
        receiver.release.set()  # the send is over
        ticking.join(3.5)
        assert not ticking.is_alive()  # before, it waited for the stuck renewal to time out
        assert outbox.waiting(client) == [] and outbox.failed(client) == []
        read_at = dict(sender._read_at)
        relay.thaw()  # the stuck renewal returns: it changes nothing, says nothing
        for thread in threading.enumerate():
            if thread.name == f"notify-hold-{entry_id}":
                thread.join(10)
                assert not thread.is_alive()
        assert sender._read_at == read_at
        assert "taken by another sender" not in caplog.text
        assert "could not renew" not in caplog.text
    finally:
        relay.close()
        shutil.rmtree(folder)


def test_a_claim_after_of_no_time_is_refused(client: Client) -> None:
    """A sender renews its claim every quarter of ``claim_after`` while it sends: 0 would
    renew without pause."""
    for wrong in (0, -1.0):
        with pytest.raises(ValueError, match=r"claim_after must be a number of seconds above 0"):
            Deliverer(client, claim_after=wrong)


ROOT = str(Path(__file__).resolve().parents[2])
SENDER = """
import sys
from scheduler.engine.client import Client
from scheduler.notify.outbox import Deliverer
Deliverer(Client(sys.argv[1]), consumer="doomed", claim_after=0.3).tick()
"""


def test_an_entry_whose_sender_died_mid_send_is_sent_again_with_its_id(
    cli: CliRunner, client: Client, server: EmbeddedServer, tmp_path: Path, receiver: Receiver
) -> None:
    """A sender killed (SIGKILL) while the receiver holds its request renews its claim no
    more: another sender claims the entry once it is idle for ``claim_after`` and sends it,
    with the same id (at least once)."""
    flows(cli, "run", "--detach", str(webhook_flow(tmp_path, f"{receiver.url}/hook")))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    receiver.hold.set()
    doomed = subprocess.Popen(
        [sys.executable, "-c", SENDER, server.url],
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    try:
        [first] = receiver.wait_for(1)
        other = Deliverer(client, consumer="other", claim_after=0.3)
        assert other.tick() == 0  # held: its sender is alive and renews its claim
        receiver.hold.clear()
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    finally:
        if doomed.poll() is None:
            doomed.kill()
    sent = 0
    for _ in range(100):
        sent = other.tick()
        if sent:
            break
        threading.Event().wait(0.05)
    assert sent == 1
    again = receiver.received[-1]
    assert again.headers["X-Flows-Event-Id"] == first.headers["X-Flows-Event-Id"]
    assert len(receiver.received) == 2
    assert outbox.waiting(client) == [] and outbox.failed(client) == []


def test_a_redirect_is_a_refusal_not_a_delivery(
    cli: CliRunner, client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    flows(cli, "run", "--detach", str(webhook_flow(tmp_path, f"{receiver.url}/hook")))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    receiver.status, receiver.location = 302, f"{receiver.url}/elsewhere"
    deliverer = Deliverer(client, secrets=Secrets(environ={"HOOK_SECRET": HOOK_SECRET}))
    assert deliverer.tick() == 0
    # Followed, a POST redirected by a 302 becomes a GET without the body (and with the
    # signature, to wherever the receiver says): the event would be lost, yet counted sent.
    assert [(r.method, r.path) for r in receiver.received] == [("POST", "/hook")]
    [waiting] = outbox.waiting(client)
    [channel] = waiting["channels"]
    assert channel["status"] == "retrying"
    assert channel["error"] == (
        f"POST {receiver.url}/hook: HTTP 302 Found, to {receiver.url}/elsewhere: redirects "
        "are not followed (name the address it redirects to in the rule)"
    )


def test_a_url_with_a_password_is_refused_in_the_file_and_sent_as_basic_auth_from_a_secret(
    cli: CliRunner,
    client: Client,
    tmp_path: Path,
    receiver: Receiver,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Written in the file, the password would be stored with every run and shown with the
    # channel (flows notifications, the API, the page); urllib took it for part of the host,
    # so every attempt failed on a name lookup and none reached the receiver.
    base = receiver.url.removeprefix("http://")
    refused = webhook_flow(tmp_path, f"http://bob:pa55-word@{base}/hook")
    with assert_unchanged(redis_client):
        result = flows(cli, "run", "--detach", str(refused))
    assert result.exit_code == 1
    assert f"URL 'http://***@{base}/hook' holds a user or password" in result.output
    assert "url_secret" in result.output and "pa55-word" not in result.output
    mail = "notify:\n  - email: {to: [a@b.org], smtp: 'smtp://u:pw-x@mail:25'}\n"
    (tmp_path / "mail.yaml").write_text("version: 1\nname: m\nsteps:\n  a: {run: 'true'}\n" + mail)
    result = flows(cli, "validate", str(tmp_path / "mail.yaml"))
    assert result.exit_code == 1 and "pw-x" not in result.output
    assert "smtp://***@mail:25" in result.output and "login: NAME" in result.output

    # Kept in a secret, the URL's user and password are sent as HTTP Basic authentication.
    monkeypatch.setenv("SLACK_URL", f"http://bob:pa55%40word@{base}/services/T000")
    failed_run_telling_slack(cli, tmp_path)
    assert Deliverer(client, consumer="t").tick() == 1
    [received] = receiver.received
    assert received.path == "/services/T000"
    credentials = base64.b64encode(b"bob:pa55@word").decode()
    assert received.headers["Authorization"] == f"Basic {credentials}"
    for key, held in dumped(redis_client):
        assert b"pa55" not in held, key


@pytest.mark.parametrize("flaw", [" ", "\n", "\x01"])
def test_a_url_secret_that_is_no_url_is_said_without_its_value(
    cli: CliRunner,
    client: Client,
    tmp_path: Path,
    receiver: Receiver,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    flaw: str,
) -> None:
    # A value with a stray space or line in it (a pasted URL, a file written by hand):
    # http.client's refusal quotes the URL's path, the very part that is the credential.
    monkeypatch.setenv("SLACK_URL", f"{receiver.url}/services/T000/B000/secret{flaw}part")
    failed_run_telling_slack(cli, tmp_path)
    Deliverer(client, consumer="t").tick()
    [waiting] = outbox.waiting(client)
    assert list(waiting["errors"].values()) == [
        "secret SLACK_URL does not hold an http(s) URL: it holds white space or a control character"
    ]
    assert receiver.received == []
    shown = flows(cli, "notifications", "--json").stdout
    assert "secret" in shown and "T000" not in shown and "part" not in shown
    for key, held in dumped(redis_client):
        assert b"B000" not in held, key


def test_a_receiver_that_never_finishes_answering_is_cut_at_the_deadline(
    cli: CliRunner,
    client: Client,
    tmp_path: Path,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flows(cli, "run", "--detach", str(webhook_flow(tmp_path, f"{receiver.url}/hook")))
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    # A byte every 50 ms: each wait for one is short, the answer takes hours. Without a
    # deadline for the whole POST it held this sender (and every event after it) as long.
    receiver.trickle = True
    monkeypatch.setattr(channels, "DEADLINE", 0.5)
    deliverer = Deliverer(client, secrets=Secrets(environ={"HOOK_SECRET": HOOK_SECRET}))
    done = threading.Event()
    threading.Thread(target=lambda: (deliverer.tick(), done.set()), daemon=True).start()
    assert done.wait(20), "the sender is still waiting for the receiver's answer"
    [waiting] = outbox.waiting(client)
    [channel] = waiting["channels"]
    assert channel["status"] == "retrying"
    assert channel["error"] == f"POST {receiver.url}/hook: no whole answer in 0.5s"


def test_nothing_to_list_says_so_instead_of_empty_tables(cli: CliRunner, client: Client) -> None:
    given_up = flows(cli, "notifications", "--failed")
    assert (given_up.stdout, given_up.stderr) == ("", "no notification was given up\n")
    listed = flows(cli, "notifications")
    assert (listed.stdout, listed.stderr) == (
        "",
        "no notification was sent, is waiting or was given up\n",
    )
