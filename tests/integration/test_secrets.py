"""Secrets end to end: a flow whose steps print, log, return and fail with their secrets, run by
a real worker; then every key of the namespace (DUMP, and its content read by type), every API
response and every notification is searched for each value: none holds one."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent
from typing import Any
from urllib.parse import quote

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows
from helpers import assert_unchanged
from notify_support import Receiver, receiver_fixture
from ui_support import TOKEN, Api, serve

from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.notify.outbox import Deliverer
from scheduler.secrets import remember
from scheduler.worker.capture import HOLD_LINE, JobOutput, LogShipper

FROM_ENV = "env-Pa55word-" + uuid.uuid4().hex[:8]
FROM_FILE = "file-K3y-" + uuid.uuid4().hex[:8]
FROM_ENV_FILE = "envfile-T0ken-" + uuid.uuid4().hex[:8]
VALUES = (FROM_ENV, FROM_FILE, FROM_ENV_FILE)

TASKS = """
import logging
from scheduler.secrets import secret

def leak(job):
    value = secret("API_TOKEN")
    print("printing", value)
    logging.getLogger("leaky").warning("logging %s", value)
    return {"token": value, "nested": [value, {"k": "x" + value}]}
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiver_fixture()


@pytest.fixture
def cli(
    server: EmbeddedServer,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> CliRunner:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    monkeypatch.setenv("FLOWS_ENV_FILE", "")  # --env-file sets it: gone again after the test
    monkeypatch.setenv("DB_PASSWORD", FROM_ENV)
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "SSH_KEY").write_text(FROM_FILE + "\n")
    monkeypatch.setenv("FLOWS_SECRETS_DIR", str(folder))
    monkeypatch.syspath_prepend(str(tmp_path))
    return CliRunner()


def leaky_flow(folder: Path, receiver: Receiver) -> Path:
    module = f"leaky_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(dedent(TASKS))
    (folder / "worker.env").write_text(f"# the worker's\nexport API_TOKEN='{FROM_ENV_FILE}'\n")
    path = folder / "flow.yaml"
    path.write_text(
        dedent(
            f"""
            version: 1
            name: leaky
            secrets: [DB_PASSWORD, SSH_KEY, API_TOKEN]
            notify:
              - on: [failure, success]
                webhook: {{url: "{receiver.url}/hook", secret: API_TOKEN}}
            steps:
              shout:
                run: |
                  echo "password is $DB_PASSWORD and key $SSH_KEY"
                  echo "to stderr: $API_TOKEN" >&2
                  echo "leaked=$DB_PASSWORD" >> "$FLOWS_OUTPUT"
              python:
                job: {module}.leak
              fail:
                needs: [shout]
                retry: {{attempts: 2, delay: 0}}
                run: echo "failing with $DB_PASSWORD / $SSH_KEY" >&2; exit 4
                notify:
                  - on: [failure, retries_exhausted]
                    slack: {{url: "{receiver.url}/slack"}}
            """
        )
    )
    return path


def namespace_texts(r: redis.Redis) -> Iterator[tuple[str, bytes]]:
    """Every key's DUMP (uncompressed) and its content as read by its type."""
    for key in r.scan_iter(count=1000):
        dumped = r.execute_command("DUMP", key, NEVER_DECODE=True)
        yield key, dumped or b""
        kind = r.type(key)
        content: Any
        if kind == "string":
            content = r.get(key)
        elif kind == "hash":
            content = r.hgetall(key)
        elif kind == "list":
            content = r.lrange(key, 0, -1)
        elif kind == "set":
            content = sorted(r.smembers(key))
        elif kind == "zset":
            content = r.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            content = r.xrange(key)
        else:
            content = ""
        yield key, json.dumps(content, default=str).encode()


def test_a_printed_secret_is_found_nowhere(
    cli: CliRunner,
    server: EmbeddedServer,
    redis_client: redis.Redis,
    tmp_path: Path,
    receiver: Receiver,
) -> None:
    path = leaky_flow(tmp_path, receiver)
    result = flows(cli, "run", "--env-file", str(tmp_path / "worker.env"), str(path))
    assert result.exit_code == 1, result.output
    client = Client(server.url)
    run_id = json.loads(client.engine.call("runs", "leaky", 0, 1))[0]["id"]
    shout = client.jobs[f"{run_id}:shout"]
    assert shout.state == "complete" and shout.result == {"leaked": "***"}
    python = client.jobs[f"{run_id}:python"]
    assert python.result == {"token": "***", "nested": ["***", {"k": "x***"}]}
    failed = client.jobs[f"{run_id}:fail"]
    assert failed.state == "failed" and "failing with *** / ***" in failed.failure["message"]
    lines = " ".join(
        flows(cli, "logs", run_id, step).stdout for step in ("shout", "python", "fail")
    )
    assert "password is *** and key ***" in lines and "to stderr: ***" in lines
    assert "printing ***" in lines and "logging ***" in lines
    # The notifications went out (signed with a secret) and hold no value either.
    Deliverer(client).drain(10)
    # The run's failure to the webhook, the step's exhausted retries to Slack: one each.
    assert sorted(p.path for p in receiver.wait_for(2)) == ["/hook", "/slack"]
    assert (
        "failing with *** / ***"
        in receiver.received[0].body.decode() + receiver.received[1].body.decode()
    )
    # Every key, every API response, every notification and the CLI's views: 0 matches.
    redis_client.config_set("rdbcompression", "no")  # DUMP as the bytes it holds
    try:
        texts = list(namespace_texts(redis_client))
    finally:
        redis_client.config_set("rdbcompression", "yes")
    assert len(texts) > 20
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        paths = [
            "/api/v1/runs",
            f"/api/v1/runs/{run_id}",
            f"/api/v1/runs/{run_id}/logs",
            "/api/v1/failures",
            "/api/v1/notifications",
            f"/runs/{run_id}",
            "/notifications",
        ]
        for step in ("shout", "python", "fail"):
            paths += [
                f"/api/v1/jobs/{run_id}:{step}",
                f"/api/v1/jobs/{run_id}:{step}/logs",
                f"/jobs/{run_id}:{step}",
                f"/runs/{run_id}/steps/{step}",
            ]
        for group in api.get("/api/v1/failures").body["items"]:
            paths.append(f"/api/v1/failures/{group['group']}")
        replies = [(p, api.get(p)) for p in paths]
    assert all(reply.status == 200 for _, reply in replies), [(p, r.status) for p, r in replies]
    texts += [(p, json.dumps(r.body).encode()) for p, r in replies]
    texts += [(r.path, r.body) for r in receiver.received]
    texts += [
        (f"flows job {s}", flows(cli, "job", f"{run_id}:{s}").stdout.encode())
        for s in ("shout", "python", "fail")
    ]
    texts += [("flows status", flows(cli, "status", run_id).stdout.encode())]
    for value in VALUES:
        found = [where for where, text in texts if value.encode() in text]
        assert found == [], f"{value} found in {found}"


def test_a_missing_secret_fails_the_step_naming_it(
    cli: CliRunner, server: EmbeddedServer, tmp_path: Path
) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(
        "version: 1\nname: needy\nsecrets: [NOT_SET_ANYWHERE]\nsteps:\n  a: {run: 'true'}\n"
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1
    job = Client(server.url).jobs.get(
        json.loads(Client(server.url).engine.call("runs", "needy", 0, 1))[0]["id"] + ":a"
    )
    assert job is not None and job.failure["group"] == "flows-secret"
    assert job.failure["message"].startswith("secret NOT_SET_ANYWHERE not found")


def test_a_bad_env_file_is_a_one_line_error_and_changes_nothing(
    cli: CliRunner, redis_client: redis.Redis, tmp_path: Path
) -> None:
    (tmp_path / "bad.env").write_text("NAME=ok\nthis is not an assignment\n")
    (tmp_path / "flow.yaml").write_text("version: 1\nname: x\nsteps:\n  a: {run: 'true'}\n")
    with assert_unchanged(redis_client):
        result = flows(
            cli, "run", "--env-file", str(tmp_path / "bad.env"), str(tmp_path / "flow.yaml")
        )
    assert result.exit_code == 1
    assert result.output.strip().endswith("bad.env:2: expected NAME=value")


CUT_TASKS = """
from scheduler.secrets import secret

def long_line(job):
    print("c" * 16381 + secret("DB_PASSWORD"))
"""


def test_a_secret_a_cut_goes_through_is_masked_at_the_cut(
    cli: CliRunner, server: EmbeddedServer, tmp_path: Path
) -> None:
    """A log line is kept to 16384 bytes and a failure message to its last 16384 characters:
    before, they were cut first and masked after, so the cut left the start (log) or the end
    (failure) of a secret in clear."""
    module = f"cut_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(dedent(CUT_TASKS))
    path = tmp_path / "flow.yaml"
    path.write_text(
        dedent(
            f"""
            version: 1
            name: cut
            secrets: [DB_PASSWORD]
            steps:
              shell:
                run: printf '%16380s%s\\n' '' "$DB_PASSWORD"
              python:
                job: {module}.long_line
              fail:
                run: printf 'x%s\\n%16379s\\n' "$DB_PASSWORD" ''; exit 4
            """
        )
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    run_id = json.loads(Client(server.url).engine.call("runs", "cut", 0, 1))[0]["id"]
    lines = {
        step: [
            json.loads(line)["text"]
            for line in flows(cli, "logs", run_id, step, "--json").stdout.splitlines()
        ]
        for step in ("shell", "python")
    }
    assert lines["shell"] == [" " * 16380 + "***"]
    assert lines["python"] == ["c" * 16381 + "***"]
    failure = Client(server.url).jobs[f"{run_id}:fail"].failure
    assert failure is not None and failure["message"].startswith("...\n")
    assert FROM_ENV[-3:] not in failure["message"]
    assert not failure["message"].startswith("...\n" + FROM_ENV[-1])


ODD = 'od"d\\Pa55-' + uuid.uuid4().hex[:12]  # a quote and a backslash: JSON and repr escape them

ENCODED_TASKS = """
import json
from urllib.parse import quote
from scheduler.secrets import secret

def encode(job):
    value = secret("ODD_SECRET")
    print(json.dumps({"password": value}))
    print("repr", repr(value))
    print("url", quote(value, safe=""))
    print("split", value[:10])
    print(value[10:], "end")
    return {"json": json.dumps(value)}
"""


def test_a_secret_printed_encoded_or_split_is_masked(
    cli: CliRunner,
    server: EmbeddedServer,
    redis_client: redis.Redis,
    tmp_path: Path,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, only a value as it is was masked: its base64 (as `base64` prints it, alone or
    inside a longer text such as a Basic auth header), its URL-encoding, its JSON-escaped or
    repr() text and a value printed over two lines were kept, logged and sent in clear."""
    monkeypatch.setenv("ODD_SECRET", ODD)
    module = f"encoded_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(dedent(ENCODED_TASKS))
    path = tmp_path / "flow.yaml"
    path.write_text(
        dedent(
            f"""
            version: 1
            name: encoded
            secrets: [DB_PASSWORD, ODD_SECRET]
            steps:
              shell:
                run: |
                  echo -n $DB_PASSWORD | base64
                  printf 'user:%s' "$DB_PASSWORD" | base64
                  printf 'us:%s\\n' "$DB_PASSWORD" | base64 | tr '+/' '-_'
              python:
                job: {module}.encode
              fail:
                run: |
                  printf 'Authorization: Basic '; printf 'ada:%s' "$ODD_SECRET" | base64; exit 3
                notify:
                  - on: [failure]
                    webhook: {{url: "{receiver.url}/hook"}}
            """
        )
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    client = Client(server.url)
    run_id = json.loads(client.engine.call("runs", "encoded", 0, 1))[0]["id"]
    logs = {
        step: [
            json.loads(line)["text"]
            for line in flows(cli, "logs", run_id, step, "--json").stdout.splitlines()
        ]
        for step in ("shell", "python", "fail")
    }
    # Inside a longer text, what the value alone decides is masked: a character at its start
    # or end that also holds bits of the bytes around it shows.
    shown = [r"\*\*\*", r"dXNlcjp\*\*\*.=", r"dXM6\*\*\*Cg=="]
    assert len(logs["shell"]) == 3, logs["shell"]
    assert all(map(re.fullmatch, shown, logs["shell"])), logs["shell"]
    assert logs["python"] == [
        '{"password": "***"}',
        "repr '***'",
        "url ***",
        "split ***",
        "*** end",
    ], logs["python"]
    (basic,) = logs["fail"]
    assert re.fullmatch(r"Authorization: Basic YWRhOm\*\*\*.=", basic), basic
    assert client.jobs[f"{run_id}:python"].result == {"json": '"***"'}
    failure = client.jobs[f"{run_id}:fail"].failure
    assert failure is not None and "Basic YWRhOm***" in failure["message"]
    Deliverer(client).drain(10)
    (sent,) = receiver.wait_for(1)
    assert "YWRhOm***" in sent.body.decode()
    # What the steps printed, in every form, is nowhere: not in a key, not in the notification.
    printed = [
        base64.b64encode(FROM_ENV.encode()),
        base64.b64encode(f"user:{FROM_ENV}".encode()),
        base64.urlsafe_b64encode(f"us:{FROM_ENV}\n".encode()),
        base64.b64encode(f"ada:{ODD}".encode()),
        json.dumps(ODD).encode(),
        repr(ODD).encode(),
        quote(ODD, safe="").encode(),
        ODD[:10].encode(),
        ODD[10:].encode(),
    ]
    texts = [*namespace_texts(redis_client), ("notification", sent.body)]
    for form in printed:
        found = [where for where, text in texts if form in text]
        assert found == [], f"{form!r} found in {found}"


PEM_BODY = uuid.uuid4().hex + uuid.uuid4().hex[:8]  # 40 characters
PEM_LAST = uuid.uuid4().hex[:4]  # a last line under 8 characters
PEM = f"-----BEGIN TEST KEY-----\n{PEM_BODY}\n{PEM_LAST}\n-----END TEST KEY-----"


def test_a_secret_split_anywhere_or_printed_as_hex_or_base64_twice_is_masked(
    cli: CliRunner, server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a part under 8 characters of a secret a line break split showed (3 + 18 and
    17 + 4 characters here), and so did a line under 8 characters of a secret of several
    lines, its hex (`xxd -p`, lower or upper case) and its base64 of base64."""
    folder = tmp_path / "secrets"
    (folder / "PEM_KEY").write_text(PEM + "\n")
    path = tmp_path / "flow.yaml"
    path.write_text(
        dedent(
            """
            version: 1
            name: split
            secrets: [DB_PASSWORD, PEM_KEY]
            steps:
              shell:
                run: |
                  printf 'token: %.3s\\n' "$DB_PASSWORD"; printf '%s end\\n' "${DB_PASSWORD#???}"
                  printf 'token: %.17s\\n' "$DB_PASSWORD"
                  printf '%s end\\n' "${DB_PASSWORD#?????????????????}"
                  printf '%s\\n' "$PEM_KEY"
                  printf %s "$DB_PASSWORD" | xxd -p
                  printf %s "$DB_PASSWORD" | xxd -p -u
                  printf %s "$DB_PASSWORD" | base64 -w0 | base64
              fail:
                run: |
                  printf 'token: %.3s\\n' "$DB_PASSWORD"; printf '%s end\\n' "${DB_PASSWORD#???}"
                  exit 3
            """
        )
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    client = Client(server.url)
    run_id = json.loads(client.engine.call("runs", "split", 0, 1))[0]["id"]
    logs = [
        json.loads(line)["text"]
        for line in flows(cli, "logs", run_id, "shell", "--json").stdout.splitlines()
    ]
    assert logs == ["token: ***", "*** end"] * 2 + ["***"] * 7, logs
    failure = client.jobs[f"{run_id}:fail"].failure
    assert failure is not None, failure
    assert "token: ***\n*** end" in failure["message"], failure["message"]
    assert FROM_ENV[:3] not in failure["message"], failure["message"]


def test_a_line_held_back_for_a_split_secret_goes_after_a_second(server: EmbeddedServer) -> None:
    """A line whose end may be the start of a secret waits for the next line of its stream,
    a second at most (the shipper's next look lets it go): a job that prints nothing more for
    a while still shows it."""
    value = "Held-" + uuid.uuid4().hex[:12]
    remember([value])
    engine = Client(server.url).engine
    shipper = LogShipper(engine, max_lines=100)
    output = JobOutput(shipper, "jid-held", 1)
    output.line(f"token: {value[:3]}")
    assert not shipper.pending  # held: the next line may be the rest of it
    output.line("on stderr", "stderr")  # another stream's line: the held one goes first
    output.line(f"again: {value[:3]}")
    shipper._release_held(time.monotonic() + HOLD_LINE / 2)
    assert shipper._pending[("jid-held", 1)][3::4] == ["token: Hel", "on stderr"]
    shipper._release_held(time.monotonic() + HOLD_LINE)
    assert shipper._pending[("jid-held", 1)][3::4][2:] == ["again: Hel"]
    output.line(f"{value[3:]}!")  # too late for the held line: its start showed
    output.close()
    assert shipper._pending[("jid-held", 1)][3::4][3:] == ["***!"]


def test_a_secret_split_before_a_cr_lf_or_a_cut_line_is_masked(
    cli: CliRunner, server: EmbeddedServer, tmp_path: Path
) -> None:
    """Before, the start of a secret at the end of a line ending in "\\r\\n" showed (the "\\r"
    hid it: `token: env-P` then `*** end`), and so did a start held back when the next line
    was too long and cut (it went unjoined)."""
    path = tmp_path / "flow.yaml"
    path.write_text(
        dedent(
            """
            version: 1
            name: crlf
            secrets: [DB_PASSWORD]
            steps:
              shell:
                run: |
                  printf 'token: %.5s\\r\\n' "$DB_PASSWORD"
                  printf '%s end\\r\\n' "${DB_PASSWORD#?????}"
                  printf 'plain\\r\\n'
                  printf 'token: %.5s\\n' "$DB_PASSWORD"
                  printf '%s%16380s\\n' "${DB_PASSWORD#?????}" ''
            """
        )
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    run_id = json.loads(Client(server.url).engine.call("runs", "crlf", 0, 1))[0]["id"]
    logs = [
        json.loads(line)["text"]
        for line in flows(cli, "logs", run_id, "shell", "--json").stdout.splitlines()
    ]
    assert logs[:4] == ["token: ***\r", "*** end\r", "plain\r", "token: ***"], logs[:4]
    assert logs[4].startswith("*** ") and logs[4].strip() == "***", logs[4][:40]
    assert len(logs) == 5 and not any(FROM_ENV[:5] in line for line in logs)
