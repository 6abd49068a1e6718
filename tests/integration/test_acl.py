"""The least-privilege users of ``docs/pages/acl.md`` on a real server, and passwords kept secret.

* the engine commands each user is granted are exactly what the Lua sources call (worker and
  scheduler) or the read-only part of it (viewer);
* the documented ``ACL SETUSER`` lines, run as they are, let a worker process, a worker pool and
  the scheduler service do their work (its notification senders too), and a viewer read but not
  write;
* none of them may load a Functions library (which would choose what the engine's name runs for
  every user of the server): an operator loads the engine (``flows engine load``), and a
  process that finds it missing says so in one line;
* a worker and a pool started with a password in ``FLOWS_REDIS_URL`` never show it: not in their
  log output, not in the command line (``/proc/<pid>/cmdline``) of any of their processes;
* the commands and the dashboard's pages and API each user is documented for work under it,
  and the server's ACL log shows no command refused to them (what Python sends outside the
  engine, the notifications' and the audit log's reads, is in the lines too).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
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
from scheduler.engine.backoff import EXIT_CONFIG
from scheduler.engine.client import Client
from scheduler.engine.connections import connect
from scheduler.engine.errors import EngineError
from scheduler.engine.faults import PermissionDenied
from scheduler.engine.safety import check_eviction_policy
from scheduler.engine.scripts import Engine, join_includes, library_name, lua_dir
from scheduler.notify import outbox
from scheduler.notify.outbox import Deliverer
from scheduler.secrets import Secrets

ROOT = Path(__file__).resolve().parents[2]
ACL_DOC = ROOT / "docs" / "pages" / "acl.md"
TASKS = Path(__file__).resolve().parent
DEADLINE = 60.0
USERS = ("flows-worker", "flows-scheduler", "flows-viewer")


def documented_lines() -> dict[str, str]:
    """user -> its ``ACL SETUSER`` line in docs/pages/acl.md."""
    lines = re.findall(r"^ACL SETUSER (\S+) .*$", ACL_DOC.read_text(), re.MULTILINE)
    found = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^ACL SETUSER (\S+) .*$", ACL_DOC.read_text(), re.MULTILINE)
    }
    assert sorted(lines) == sorted(USERS), lines
    return found


def granted(line: str) -> set[str]:
    return {word[1:] for word in line.split() if word.startswith("+")}


def engine_commands() -> set[str]:
    """Every Redis command the engine's Lua sources call."""
    source = join_includes(lua_dir())
    return {name.lower() for name in re.findall(r"redis\.p?call\(\s*'(\w+)'", source)}


def passive(r: redis.Redis, names: set[str]) -> set[str]:
    """Of ``names``, the commands that neither write nor publish (by the server's own flags)."""
    info = r.execute_command("COMMAND", "INFO", *sorted(names))
    flags = {name: set(entry["flags"]) for name, entry in info.items()}
    return {name for name in names if not flags[name] & {"write", "pubsub"}}


def test_the_documented_users_cover_exactly_what_the_engine_calls(
    redis_client: redis.Redis,
) -> None:
    lines = documented_lines()
    engine = engine_commands()
    assert engine, "no redis.call found in the engine"
    for user in ("flows-worker", "flows-scheduler"):
        missing = engine - granted(lines[user])
        assert not missing, f"{user} lacks commands the engine calls: {sorted(missing)}"
    reads = passive(redis_client, engine)
    viewer = granted(lines["flows-viewer"])
    assert reads <= viewer, f"the viewer lacks read commands: {sorted(reads - viewer)}"
    writes = (engine - reads) & viewer
    assert not writes, f"the viewer may write or publish: {sorted(writes)}"
    for line in lines.values():
        assert "-@all" in line and "resetkeys" in line and "resetchannels" in line
        assert "+config" not in line and "+@" not in line and "allkeys" not in line
        assert "+function|load" not in line and "+function " not in f"{line} "


@pytest.fixture
def passwords(server: EmbeddedServer) -> Iterator[dict[str, str]]:
    """The documented users, created on the session's server with fresh passwords, and the
    engine loaded by the operator (as ``flows engine load`` does: they may not)."""
    admin = connect(server.url)
    made = {user: secrets.token_urlsafe(24) for user in USERS}
    Engine(admin).load()
    try:
        for user, line in documented_lines().items():
            words = line.replace("CHANGE-ME", made[user]).split()[2:]
            admin.execute_command("ACL", "SETUSER", *words)
        yield made
    finally:
        for user in USERS:
            admin.execute_command("ACL", "DELUSER", user)
        admin.close()


def url_for(server: EmbeddedServer, user: str, password: str) -> str:
    return f"unix://{user}:{quote(password, safe='')}@{server.socket_path}"


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    env["FLOWS_REDIS_URL"] = url
    env["FLOWS_DATA_DIR"] = os.environ.get("FLOWS_DATA_DIR", "")
    return env


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def _cmdlines(pid: int) -> list[bytes]:
    """The command lines of ``pid`` and its descendants, each prefixed with its pid."""
    lines = []
    for member in _family(pid):
        try:
            lines.append(f"{member} ".encode() + Path(f"/proc/{member}/cmdline").read_bytes())
        except OSError:
            continue
    return lines


def _wait(done: object, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if done():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _put_sleepers(client: Client, queue: str, count: int, seconds: float) -> list[str]:
    data = {"seconds": seconds, "_flows": {"pythonpath": [str(TASKS)]}}
    return [client.queues[queue].put("worker_tasks.sleeps", data) for _ in range(count)]


def _run_sampled(command: list[str], url: str, log: Path) -> tuple[int, str, list[bytes]]:
    """Run ``command`` with ``url`` in its environment until it exits, sampling the command lines
    of it and its children (pool children start after it) all along. (exit code, log, samples)."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=_env(url), stdout=out, stderr=subprocess.STDOUT)
        seen: list[bytes] = []
        try:
            _wait(
                lambda: seen.extend(_cmdlines(process.pid)) or process.poll() is not None,
                f"{Path(command[0]).name} to finish",
            )
        finally:
            process.kill() if process.poll() is None else None
            process.wait()
    return process.returncode, log.read_text(), seen


def test_a_worker_under_the_worker_user_runs_jobs_and_never_shows_its_password(
    server: EmbeddedServer, redis_client: redis.Redis, passwords: dict[str, str], tmp_path: Path
) -> None:
    producer = Client(url_for(server, "flows-scheduler", passwords["flows-scheduler"]))
    jids = _put_sleepers(producer, "acl", 3, 0.5)
    password = passwords["flows-worker"]
    code, text, seen = _run_sampled(
        [sys.executable, "-m", "scheduler.worker", "-q", "acl", "--burst", "--threads", "3"],
        url_for(server, "flows-worker", password),
        tmp_path / "worker.log",
    )
    assert code == 0, text
    assert all(producer.jobs[jid].state == "complete" for jid in jids), text
    assert seen and not any(password.encode() in line for line in seen)
    assert password not in text and quote(password, safe="") not in text
    producer.close()


def test_a_pool_under_the_worker_user_never_shows_its_password(
    server: EmbeddedServer, redis_client: redis.Redis, passwords: dict[str, str], tmp_path: Path
) -> None:
    producer = Client(url_for(server, "flows-scheduler", passwords["flows-scheduler"]))
    jids = _put_sleepers(producer, "acl-pool", 4, 1.0)
    password = passwords["flows-worker"]
    code, text, seen = _run_sampled(
        [
            str(Path(sys.executable).with_name("flows")),
            "worker",
            "-q",
            "acl-pool",
            "--processes",
            "2",
            "--burst",
        ],
        url_for(server, "flows-worker", password),
        tmp_path / "pool.log",
    )
    assert code == 0, text
    assert all(producer.jobs[jid].state == "complete" for jid in jids), text
    children = {line.split(b" ", 1)[0] for line in seen if b"scheduler.worker" in line}
    assert len(children) >= 2, "the pool's worker processes were never seen"
    assert not any(password.encode() in line for line in seen)
    assert password not in text and quote(password, safe="") not in text
    producer.close()


def _start_service(folder: Path, env: dict[str, str], service_id: str) -> subprocess.Popen[bytes]:
    """The scheduler service on ``folder`` as ``env``'s user, ticking every 0.1 s."""
    command = [sys.executable, "-m", "scheduler", "--flows-dir", str(folder)]
    return subprocess.Popen(
        [*command, "--tick-interval", "0.1", "--id", service_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_the_scheduler_service_runs_under_its_user(
    server: EmbeddedServer, redis_client: redis.Redis, passwords: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "acl.yaml").write_text(
        "version: 1\nname: acl\nqueue: acl\nschedule: {cron: '* * * * *'}\n"
        "steps:\n  a: {job: tasks.a}\n"
    )
    password = passwords["flows-scheduler"]
    env = _env(url_for(server, "flows-scheduler", password))
    process = _start_service(folder, env, "acl-service")
    viewer = Client(url_for(server, "flows-viewer", passwords["flows-viewer"]))
    try:
        _wait(
            lambda: viewer.redis.exists("ql:schedule:acl") or process.poll() is not None,
            "the service's first scan",
        )
        _wait(
            lambda: (
                viewer.redis.zscore("ql:schedulers", "acl-service") is not None
                or process.poll() is not None
            ),
            "the service's first tick",
        )
        assert process.poll() is None
        cmdline = b"".join(_cmdlines(process.pid))
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=DEADLINE)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text
    assert "refuses to run" not in text and "cannot read the server's maxmemory-policy" not in text
    assert password.encode() not in cmdline and password not in text
    viewer.close()


def test_the_scheduler_service_stops_when_its_login_is_refused(
    server: EmbeddedServer, redis_client: redis.Redis, passwords: dict[str, str], tmp_path: Path
) -> None:
    # The server lost its ACL users (restarted without its ACL file): the service retried every
    # step for ever and advised to "start the server". A worker stops with exit 78; so does it.
    folder = tmp_path / "flows"
    folder.mkdir()
    env = _env(url_for(server, "flows-scheduler", passwords["flows-scheduler"]))
    process = _start_service(folder, env, "acl-refused")
    try:
        _wait(
            lambda: (
                redis_client.zscore("ql:schedulers", "acl-refused") is not None
                or process.poll() is not None
            ),
            "the service's first tick",
        )
        redis_client.execute_command("ACL", "DELUSER", "flows-scheduler")
        output, _ = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    text = output.decode(errors="replace")
    assert process.returncode == EXIT_CONFIG, text
    assert "refused the login as user 'flows-scheduler'" in text, text
    assert "start the server" not in text and "Traceback" not in text, text


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiver_fixture()


def test_notification_senders_work_under_the_scheduler_user(
    redis_client: redis.Redis, server: EmbeddedServer, passwords: dict[str, str], receiver: Receiver
) -> None:
    run = "acl@20261128T000000Z"
    signed = {"url": f"{receiver.url}/signed", "secret": "ACL_HOOK_KEY"}
    rules = [
        {"on": ["failure"], "step": None, "webhook": {"url": f"{receiver.url}/open"}},
        {"on": ["failure"], "step": None, "webhook": signed},
    ]
    job = {"jid": f"{run}:a", "queue": "acl", "klass": "K", "data": "{}", "notify": "run"}
    admin = Client(redis=redis_client)
    submitted = admin.engine.call(
        "flow.submit", run, json.dumps({"flow": "acl", "notify": rules}), json.dumps([job])
    )
    assert submitted == "submitted"
    [popped] = json.loads(admin.engine.call("pop", "acl", "w", 1))
    admin.engine.call("fail", popped["jid"], "w", "boom", "it broke")
    url = url_for(server, "flows-scheduler", passwords["flows-scheduler"])
    with Client(url) as first, Client(url) as second:
        # One sender lacks the signing key: it sends the open webhook and leaves the other
        # (claimed, released, acknowledged: every stream command under the documented user).
        lacking = Deliverer(first, secrets=Secrets(environ={}, dirs=()), consumer="a")
        holding = Deliverer(
            second, secrets=Secrets({"ACL_HOOK_KEY": "k"}, environ={}, dirs=()), consumer="b"
        )
        assert lacking.tick(1000.0) == 1 and holding.tick(1000.0) == 1
        assert not lacking.due() and not holding.due()
    assert sorted(p.path for p in receiver.received) == ["/open", "/signed"]
    assert outbox.waiting(admin) == [] and outbox.failed(admin) == []


def test_only_an_operator_loads_the_engine(
    server: EmbeddedServer, redis_client: redis.Redis, passwords: dict[str, str]
) -> None:
    redis_client.function_flush()  # a new release: its library is not on the server yet
    try:
        for user in ("flows-worker", "flows-scheduler"):
            url = url_for(server, user, passwords[user])
            with assert_unchanged(redis_client), Client(url) as client:
                with pytest.raises(PermissionDenied) as refused:
                    client.queues["q"].put("tasks.a", {})
                with pytest.raises(redis.exceptions.NoPermissionError):  # nor replace one
                    client.redis.execute_command("FUNCTION", "LOAD", "REPLACE", "#!lua name=x\n")
            assert f"ACL user {user!r} may not load it" in str(refused.value)
            assert "`flows engine load`" in str(refused.value)
            result = flows(CliRunner(env={"FLOWS_REDIS_URL": url}), "engine", "load")
            assert result.exit_code == 1 and "Traceback" not in result.output
            assert "`flows engine load`" in result.output and passwords[user] not in result.output
        assert redis_client.function_list() == []
        operator = flows(CliRunner(env={"FLOWS_REDIS_URL": server.url}), "engine", "load")
        assert operator.output == f"{library_name()}: loaded\n"
        with Client(url_for(server, "flows-worker", passwords["flows-worker"])) as worker:
            assert worker.queues["q"].put("tasks.a", {})
    finally:
        Engine(redis_client).load()


def test_the_viewer_reads_but_cannot_write(
    server: EmbeddedServer, redis_client: redis.Redis, passwords: dict[str, str]
) -> None:
    worker = Client(url_for(server, "flows-worker", passwords["flows-worker"]), worker_name="w")
    jid = worker.queues["q"].put("tasks.a", {"n": 1})
    viewer = Client(url_for(server, "flows-viewer", passwords["flows-viewer"]))
    assert viewer.jobs[jid].state == "waiting"
    assert any(q["name"] == "q" for q in viewer.queues.counts())
    assert viewer.queues["q"].jobs.waiting() == [jid]
    for attempt in (
        lambda: viewer.queues["q"].put("tasks.a", {}),
        lambda: viewer.queues["q"].pop(),
        lambda: viewer.jobs.cancel(jid),
        lambda: viewer.redis.flushall(),
        lambda: viewer.redis.config_get("requirepass"),
    ):
        with pytest.raises((redis.ResponseError, EngineError)):
            attempt()
    assert viewer.jobs[jid].state == "waiting"
    worker.close()
    viewer.close()


def test_the_eviction_check_reads_info_when_config_is_denied(
    server: EmbeddedServer, passwords: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    worker = connect(url_for(server, "flows-worker", passwords["flows-worker"]))
    with pytest.raises(redis.ResponseError):
        worker.config_get("maxmemory-policy")
    assert check_eviction_policy(worker) == "noeviction"
    admin = connect(server.url)
    admin.execute_command(
        "ACL", "SETUSER", "flows-blind", "on", ">blind", "~ql:*", "-@all", "+ping", "+fcall"
    )
    try:
        blind = connect(url_for(server, "flows-blind", "blind"))
        assert check_eviction_policy(blind) is None  # neither CONFIG nor INFO: a warning
        assert "cannot read the server's maxmemory-policy" in caplog.text
        blind.close()
    finally:
        admin.execute_command("ACL", "DELUSER", "flows-blind")
        admin.close()
    worker.close()


# What a flows user may be refused without a defect: the eviction check's CONFIG GET falls back
# to INFO (above), and redis-py names its library (CLIENT SETINFO, Redis 7.2+) when it may.
EXPECTED_REFUSALS = {"config|get", "client|setinfo"}


def refused(admin: redis.Redis) -> list[tuple[str, str]]:
    """(user, command) of every refusal in the server's ACL log, beyond the expected ones."""
    entries = admin.execute_command("ACL", "LOG", "128")
    found = []
    for entry in entries:
        if not isinstance(entry, dict):  # RESP2 on Redis 7.0: a flat list of names and values
            entry = dict(zip(entry[::2], entry[1::2], strict=True))
        fields = entry
        if fields.get("username") in USERS and fields.get("object") not in EXPECTED_REFUSALS:
            found.append((str(fields["username"]), str(fields["object"])))
    return found


@pytest.fixture
def acl_log(redis_client: redis.Redis) -> Iterator[redis.Redis]:
    """The admin's client, with the server's ACL log emptied first."""
    redis_client.execute_command("ACL", "LOG", "RESET")
    yield redis_client


def _a_failed_run(server: EmbeddedServer, passwords: dict[str, str], tmp_path: Path) -> str:
    """A run whose one step failed, submitted and worked under the documented users (the submit
    is in the audit log); its id."""
    flow = tmp_path / "acl-read.yaml"
    flow.write_text(
        "version: 1\nname: acl-read\nqueue: acl-read\nsteps:\n  a: {run: 'echo hello; exit 3'}\n"
    )
    env = {"FLOWS_REDIS_URL": url_for(server, "flows-scheduler", passwords["flows-scheduler"])}
    result = flows(CliRunner(env=env), "run", "--detach", str(flow))
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    code, text, _ = _run_sampled(
        [sys.executable, "-m", "scheduler.worker", "-q", "acl-read", "--burst"],
        url_for(server, "flows-worker", passwords["flows-worker"]),
        tmp_path / "worker.log",
    )
    assert code == 0, text
    return run_id


def _read_everything(api: Api, run_id: str) -> dict[str, int]:
    """path -> status of every page and API read the dashboard offers on ``run_id``."""
    jid = f"{run_id}:a"
    paths = [
        "/", "/runs", f"/runs/{run_id}", "/flows", "/queues", "/workers", "/failures",
        "/backfills", "/notifications", "/audit", f"/jobs/{jid}",
        "/api/v1/runs", f"/api/v1/runs/{run_id}", f"/api/v1/runs/{run_id}/explain",
        f"/api/v1/runs/{run_id}/logs", f"/api/v1/runs/{run_id}/timeline", f"/api/v1/jobs/{jid}",
        f"/api/v1/jobs/{jid}/explain", f"/api/v1/jobs/{jid}/logs", "/api/v1/queues",
        "/api/v1/workers", "/api/v1/schedules", "/api/v1/failures", "/api/v1/sources",
        "/api/v1/backfills", "/api/v1/notifications", "/api/v1/audit", "/api/v1/flows",
        "/metrics",
    ]  # fmt: skip
    return {path: api.get(path).status for path in paths}


def test_the_viewer_reads_every_page_and_listing(
    server: EmbeddedServer, acl_log: redis.Redis, passwords: dict[str, str], tmp_path: Path
) -> None:
    run_id = _a_failed_run(server, passwords, tmp_path)
    url = url_for(server, "flows-viewer", passwords["flows-viewer"])
    cli = CliRunner(env={"FLOWS_REDIS_URL": url})
    for command in (
        ["status", run_id], ["runs"], ["jobs", "--state", "failed"], ["job", f"{run_id}:a"],
        ["logs", run_id], ["explain", run_id], ["failed"], ["queues"], ["workers"],
        ["schedules"], ["backfills"], ["sources"], ["notifications"], ["audit"], ["doctor"],
    ):  # fmt: skip
        result = flows(cli, *command)
        assert result.exit_code == 0, (command, result.output)
    with Client(url) as viewer, serve(viewer, Auth(None, reads_open=True)) as base:
        statuses = _read_everything(Api(base, None), run_id)
    assert {path: status for path, status in statuses.items() if status != 200} == {}
    assert refused(acl_log) == []


def test_a_dashboard_that_writes_works_under_the_scheduler_user(
    server: EmbeddedServer, acl_log: redis.Redis, passwords: dict[str, str], tmp_path: Path
) -> None:
    run_id = _a_failed_run(server, passwords, tmp_path)
    url = url_for(server, "flows-scheduler", passwords["flows-scheduler"])
    with Client(url) as scheduler, serve(scheduler, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        for path in ("/api/v1/queues/acl-read/pause", "/api/v1/queues/acl-read/unpause",
                     f"/api/v1/runs/{run_id}/retry"):  # fmt: skip
            answer = api.post(path)
            assert answer.status == 200, (path, answer.body)
        statuses = _read_everything(api, run_id)
        assert api.post(f"/api/v1/runs/{run_id}/cancel").status == 200
        audited = [entry["action"] for entry in api.get("/api/v1/audit").body["items"]]
    assert {path: status for path, status in statuses.items() if status != 200} == {}
    assert len(audited) >= 4
    cli = CliRunner(env={"FLOWS_REDIS_URL": url})
    for command in (["notifications"], ["audit"], ["status", run_id]):
        result = flows(cli, *command)
        assert result.exit_code == 0, (command, result.output)
    assert refused(acl_log) == []


def test_a_command_a_user_lacks_outside_the_engine_is_named_in_one_line(
    server: EmbeddedServer, redis_client: redis.Redis
) -> None:
    password = secrets.token_urlsafe(24)
    line = documented_lines()["flows-viewer"].replace("CHANGE-ME", password)
    words = [w for w in line.split()[3:] if w not in ("+hvals", "+xrange", "+xrevrange")]
    redis_client.execute_command("ACL", "SETUSER", "flows-narrow", *words)
    try:
        cli = CliRunner(env={"FLOWS_REDIS_URL": url_for(server, "flows-narrow", password)})
        result = flows(cli, "notifications")
    finally:
        redis_client.execute_command("ACL", "DELUSER", "flows-narrow")
    assert result.exit_code == 1
    assert "may not run Redis command 'hvals'; use a user granted it" in result.output
    assert "Traceback" not in result.output and password not in result.output


def test_flows_run_under_the_worker_user_sends_its_notifications(
    server: EmbeddedServer,
    acl_log: redis.Redis,
    passwords: dict[str, str],
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    flow = tmp_path / "acl-notify.yaml"
    flow.write_text(
        "version: 1\nname: acl-notify\nqueue: acl-notify\n"
        f"notify: [{{on: [failure], webhook: {{url: '{receiver.url}/hook'}}}}]\n"
        "steps:\n  a: {run: 'exit 1'}\n"
    )
    url = url_for(server, "flows-worker", passwords["flows-worker"])
    result = flows(CliRunner(env={"FLOWS_REDIS_URL": url}), "run", str(flow))
    assert result.exit_code == 1, result.output
    assert "Error" not in result.output, result.output
    assert [p.path for p in receiver.wait_for(1)] == ["/hook"]
    assert refused(acl_log) == []


def test_a_sender_whose_login_is_refused_says_as_whom(
    server: EmbeddedServer, redis_client: redis.Redis, passwords: dict[str, str]
) -> None:
    """The notifications' sender talks to Redis's streams itself: a login refused there (the
    server lost its ACL users) was redis-py's words, without the user; the service stops over
    whichever step meets it first, so its one line depended on which did. Said as every engine
    call says it."""
    url = url_for(server, "flows-scheduler", passwords["flows-scheduler"])
    with Client(url) as client:
        sender = Deliverer(client, secrets=Secrets(environ={}, dirs=()), consumer="a")
        assert sender.tick(1000.0) == 0
        redis_client.execute_command("ACL", "DELUSER", "flows-scheduler")
        with pytest.raises(redis.RedisError) as refused:
            sender.tick(1001.0)
    assert "refused the login as user 'flows-scheduler'" in str(refused.value)
