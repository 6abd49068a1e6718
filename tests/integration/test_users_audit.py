"""Users, roles and the audit log over real HTTP: tokens made by `flows user add`, kept only as
hashes; a viewer reads but cannot cancel, an operator cancels and approves (recorded as
itself), an admin manages queues; every change, through the API or the command line, is in
the audit log."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows
from helpers import assert_unchanged, dumped
from ui_support import TOKEN, Api, serve

from flows.access.users import UserError, Users, token_hash
from flows.ui.roles import RoleAuth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

GATE = """\
version: 1
name: gate
steps:
  build: {run: "true"}
  approve: {wait: {signal: approve}, needs: build}
  ship: {run: "true", needs: approve}
"""


def add_user(cli: CliRunner, name: str, role: str) -> str:
    result = flows(cli, "user", "add", name, "--role", role)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def start(cli: CliRunner, tmp_path: Path) -> str:
    (tmp_path / "gate.yaml").write_text(GATE)
    result = flows(cli, "run", "--detach", str(tmp_path / "gate.yaml"))
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_roles_decide_and_the_audit_log_remembers(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    tokens = {name: add_user(cli, name, role) for name, role in
              (("vera", "viewer"), ("otto", "operator"), ("ann", "admin"))}  # fmt: skip
    assert all(t.startswith("flows_") and len(t) > 40 for t in tokens.values())
    listed = json.loads(flows(cli, "user", "list", "--json").stdout)
    assert [(u["name"], u["role"], u["by"]) for u in listed] == [
        ("ann", "admin", "ada"), ("otto", "operator", "ada"), ("vera", "viewer", "ada"),
    ]  # fmt: skip
    for key, held in dumped(redis_client):  # tokens are kept only as hashes
        assert not any(t.encode() in held for t in tokens.values()), key
    run_id = start(cli, tmp_path)
    with serve(client, RoleAuth(None, reads_open=False, users=Users(client))) as base:
        vera, otto, ann = (Api(base, tokens[n]) for n in ("vera", "otto", "ann"))
        assert vera.get(f"/api/v1/runs/{run_id}").status == 200
        assert Api(base, None).get(f"/api/v1/runs/{run_id}").status == 401
        assert Api(base, "flows_not-a-token-of-anyone").get("/api/v1/runs").status == 403
        with assert_unchanged(redis_client):
            refused = vera.post(f"/api/v1/runs/{run_id}/cancel")
            assert refused.status == 403
            assert refused.body["detail"] == (
                f"user vera is a viewer: POST /api/v1/runs/{run_id}/cancel needs operator"
            )
            assert otto.post("/api/v1/queues/default/pause").status == 403  # admin's
            assert otto.post("/api/v1/sources/pipelines/remove").status == 403  # admin's too
        # The step awaits its approval once build ran: an operator approves as itself.
        flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
        approved = otto.post(
            f"/api/v1/runs/{run_id}/steps/approve/signal", {"data": {}, "by": "mallory"}
        )
        assert approved.status == 200, approved.body
        history = client.jobs[f"{run_id}:approve"].history
        assert any(h.get("what") == "signaled" and h.get("by") == "otto" for h in history)
        assert ann.post("/api/v1/queues/default/pause").status == 200
        assert ann.post("/api/v1/queues/default/unpause").status == 200
        second = start(cli, tmp_path)
        assert otto.post(f"/api/v1/runs/{second}/cancel").status == 200
        entries = otto.get("/api/v1/audit").body["items"]
        page = vera.get("/audit")
        # Revoked: the token stops working at once.
        assert flows(cli, "user", "revoke", "otto").exit_code == 0
        assert otto.post(f"/api/v1/runs/{run_id}/cancel").status == 403
    cancel = next(e for e in entries if e["action"] == "cancel_run")
    assert (cancel["who"], cancel["role"], cancel["via"]) == ("otto", "operator", "api")
    assert cancel["target"] == f"run_id={second}" and cancel["address"] == "127.0.0.1"
    assert [e["action"] for e in entries[:4]] == [
        "cancel_run", "run", "unpause_queue", "pause_queue",
    ]  # fmt: skip
    assert entries[1]["via"] == "cli" and entries[1]["who"] == "ada"
    assert not any(e["who"] == "vera" for e in entries)  # refused: nothing changed, no entry
    assert page.status == 200 and "cancel_run" in page.body
    # The command line's changes, with who ran them.
    assert flows(cli, "cancel", run_id).exit_code == 0
    shown = json.loads(flows(cli, "audit", "--json", "-n", "2").stdout)
    assert [(e["action"], e["target"], e["via"], e["who"]) for e in shown] == [
        ("cancel", run_id, "cli", "ada"),
        ("user revoke", "otto", "cli", "ada"),
    ]
    actions = [e["action"] for e in json.loads(flows(cli, "audit", "--json").stdout)]
    assert actions[:2] == ["cancel", "user revoke"] and actions.count("user add") == 3


def test_bad_user_commands_are_one_line_and_change_nothing(
    cli: CliRunner, redis_client: redis.Redis
) -> None:
    add_user(cli, "vera", "viewer")
    cases = [
        (["user", "add", "x", "--role", "root"], 2, "'root' is not one of"),
        (["user", "add", "vera", "--role", "admin"], 1, "user vera exists: revoke it first"),
        (["user", "revoke", "nobody"], 1, "no user nobody"),
        # A malformed name is a usage error, as a malformed argument is everywhere else.
        (["user", "add", "has space", "--role", "admin"], 2, "'has space' is not a user name"),
        (["user", "add", "vera\n", "--role", "admin"], 2, "'vera\\x0a' is not a user name"),
        (["user", "add", "u" * 65, "--role", "admin"], 2, "1 to 64 of A-Z a-z 0-9 _ . @ -"),
        (["user", "revoke", "has space"], 2, "Invalid value for 'NAME': 'has space' is not"),
        # What was typed is quoted, its escape sequences shown, not sent to the terminal.
        (["user", "add", "a\x1b]0;pwned\x07", "--role", "admin"], 2, "'a\\x1b]0;pwned\\x07'"),
        (["user", "revoke", "b\x1b[2J\nc"], 2, "'b\\x1b[2J\\x0ac' is not a user name"),
    ]
    for args, code, message in cases:
        with assert_unchanged(redis_client):
            result = flows(cli, *args)
        assert result.exit_code == code and message in result.output, result.output
        assert "\x1b" not in result.output


def test_a_user_name_is_the_whole_text_not_its_first_line(
    client: Client, redis_client: redis.Redis
) -> None:
    """The store's rule took "vera\n" (a pattern's end matches before a final newline)."""
    with assert_unchanged(redis_client), pytest.raises(UserError, match="is not a user name"):
        Users(client).add("vera\n", "viewer")


def test_open_reads_refuse_a_token_that_is_sent_and_wrong(
    cli: CliRunner, client: Client, redis_client: redis.Redis
) -> None:
    vera = add_user(cli, "vera", "viewer")
    # As `flows ui` builds it on loopback: reads open, the server's token and the users.
    with serve(client, RoleAuth(TOKEN, reads_open=True, users=Users(client))) as base:
        for path in ("/api/v1/runs", "/metrics", "/", "/audit", "/api/v1/events"):
            wrong = Api(base, "flows_not-a-token-of-anyone").get(path)
            assert wrong.status == 403, (path, wrong.body)
            assert "not this server's nor a user's" in wrong.body["detail"]
            if path == "/api/v1/events":
                continue  # a stream: answered 200, it never ends
            # another scheme is a proxy's in front (HTTP Basic), its browser sends it with
            # every request: left to the proxy, as without users
            basic = Api(base, None).get(path, headers={"Authorization": "Basic eDp5"})
            assert basic.status == 200, (path, basic.body)
            for token in (None, TOKEN, vera):  # none at all, the server's, a user's
                assert Api(base, token).get(path).status == 200, (path, token)


def test_an_operator_cannot_sign_an_approval_with_another_name(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A user's signal is the user's: its data may not name another approver (a step reading
    `steps.approve.outputs.approved_by` believes it), and an approval names the user, whatever
    the body's `by` says."""
    otto = add_user(cli, "otto", "operator")
    run_id = start(cli, tmp_path)
    flows(cli, "worker", "--queues", "default", "--burst", "--processes", "0")
    path = f"/api/v1/runs/{run_id}/steps/approve"
    with serve(client, RoleAuth(None, reads_open=False, users=Users(client))) as base:
        api = Api(base, otto)
        with assert_unchanged(redis_client):
            forged = api.post(f"{path}/signal", {"data": {"approved_by": "boss"}, "by": "boss"})
        assert forged.status == 422, forged.body
        assert forged.body["detail"] == (
            f"run {run_id}, step approve: the data's approved_by is 'boss', but the signal is "
            "given by 'otto': an approval names who gives it (flows approve sets it)"
        )
        approved = api.post(f"{path}/approve", {"note": "ok", "by": "boss"})
        assert approved.status == 200, approved.body
    assert client.jobs[f"{run_id}:approve"].result == {"note": "ok", "approved_by": "otto"}
    entry = json.loads(flows(cli, "audit", "--json", "-n", "1").stdout)[0]
    assert (entry["who"], entry["role"], entry["action"]) == ("otto", "operator", "approve_wait")


def test_a_revoked_users_open_event_streams_end(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A stream is authorized once, when it opens: the revoke must reach the streams a user
    holds open too (a job's log lines, the engine's events), not only its next request."""
    vera = add_user(cli, "vera", "viewer")
    run_id = start(cli, tmp_path)
    jid = f"{run_id}:build"  # not run: its log stream stays open
    client.engine.call("log.append", jid, 1, 0, 1, 1.0, "stdout", "", "a line")
    events, logs = "/api/v1/events", f"/api/v1/jobs/{jid}/logs/stream"
    got: dict[str, list[tuple[str, object]]] = {"events": [], "logs": [], "server's": []}
    with serve(client, RoleAuth(TOKEN, reads_open=False, users=Users(client))) as base:

        def follow(path: str, token: str, into: str) -> None:
            got[into].extend(Api(base, token).events(path))

        threads = [
            threading.Thread(target=follow, args=(events, vera, "events"), daemon=True),
            threading.Thread(target=follow, args=(logs, vera, "logs"), daemon=True),
            threading.Thread(target=follow, args=(logs, TOKEN, "server's"), daemon=True),
        ]
        for thread in threads:
            thread.start()
        for _ in range(200):  # open: the engine's events subscribed, the lines read
            if redis_client.pubsub_numsub("ql:log")[0][1] and got["logs"] and got["server's"]:
                break
            threading.Event().wait(0.05)
        assert got["logs"][0][0] == "line" and got["server's"][0][0] == "line"
        assert flows(cli, "user", "revoke", "vera").exit_code == 0
        for thread in threads[:2]:
            thread.join(15)
        assert not any(t.is_alive() for t in threads[:2]), "a revoked user's stream goes on"
        revoked = ("revoked", {"detail": "the token was revoked: this stream ends"})
        assert got["events"] == [revoked] and got["logs"][-1] == revoked
        # The server's own token is not taken back: its stream goes on to the job's end.
        assert threads[2].is_alive()
        assert flows(cli, "cancel", run_id).exit_code == 0
        threads[2].join(15)
        assert got["server's"][-1] == ("end", {"jid": jid})


def test_a_retry_or_rerun_worked_here_is_audited_however_the_run_ends(
    cli: CliRunner, tmp_path: Path
) -> None:
    """`flows retry RUN` and `flows rerun RUN STEP` put jobs back, then work the run here: their
    exit code says how the run went, and a run that fails again was still changed. A re-run of
    a release's approval gate opens it again: who did that is in the log."""
    (tmp_path / "gate.yaml").write_text(
        "version: 1\nname: gate\nsteps:\n  check: {run: 'test ! -e fail'}\n"
    )
    (tmp_path / "fail").touch()
    first = flows(cli, "run", str(tmp_path / "gate.yaml"))
    assert first.exit_code == 1, first.output
    run_id = first.output.split("submitted run ")[1].split()[0]
    assert flows(cli, "retry", run_id).exit_code == 1  # put back, and failed again
    (tmp_path / "fail").unlink()
    assert flows(cli, "rerun", run_id, "check").exit_code == 0
    shown = json.loads(flows(cli, "audit", "--json").stdout)
    assert [(e["action"], e["target"], e["who"]) for e in shown] == [
        ("rerun", f"{run_id} check", "ada"),
        ("retry", run_id, "ada"),
        ("run", run_id, "ada"),
    ]


def test_an_add_that_cannot_write_its_token_writes_nothing(
    server: EmbeddedServer, redis_client: redis.Redis
) -> None:
    """The user and its token were two writes: when the second failed (here a user that may
    only read the tokens; a process killed between them alike), the user stayed, with no
    token that works and a name that could not be added again."""
    password = uuid.uuid4().hex
    redis_client.execute_command(
        "ACL", "SETUSER", "flows-no-tokens", "on", f">{password}", "resetkeys", "~ql:users",
        "%R~ql:users:tokens", "-@all", "+hsetnx", "+hset", "+hdel", "+hexists", "+hget",
        "+hgetall", "+watch", "+unwatch", "+multi", "+exec", "+discard", "+ping",
    )  # fmt: skip
    try:
        url = f"unix://flows-no-tokens:{password}@{server.socket_path}"
        with (
            Client(url) as limited,
            assert_unchanged(redis_client),
            pytest.raises(redis.RedisError, match="No permissions to access a key"),
        ):
            Users(limited).add("otto", "operator")
    finally:
        redis_client.execute_command("ACL", "DELUSER", "flows-no-tokens")
    users = Users(Client(server.url))
    assert users.find(users.add("otto", "operator")) is not None


def test_a_revoke_that_read_before_a_re_add_leaves_no_token_working(
    client: Client, redis_client: redis.Redis
) -> None:
    """A revoke reads the user's tokens, then deletes them with the user. Before, another
    revoke and an add of the same name between the two let it delete the new user but not its
    new token: a stray token that worked again as soon as the name was added once more (with
    whatever role). The steps are interleaved here by hand on the server."""
    users = Users(client)
    first = users.add("otto", "operator")
    with client.engine.redis.pipeline(transaction=True) as pipe:
        pipe.watch(users.key, users.tokens_key)
        users._revoking(pipe, "otto")  # read otto's tokens (first); its writes queued
        users.revoke("otto")  # meanwhile, elsewhere: revoked and added again
        second = users.add("otto", "viewer")
        with pytest.raises(redis.WatchError):  # what it read changed: it writes nothing
            pipe.execute()
    found = users.find(second)
    assert found is not None and found.role == "viewer" and users.find(first) is None
    # And the public revoke, which reads again after such a change, revokes every token.
    users.revoke("otto")
    third = users.add("otto", "admin")
    assert [users.find(t) for t in (first, second)] == [None, None]
    assert users.find(third) is not None
    assert set(redis_client.hvals(users.tokens_key)) == {"otto"}
    assert len(redis_client.hkeys(users.tokens_key)) == 1


def test_tokens_left_naming_a_user_stop_working_when_it_is_revoked_or_added(
    client: Client, redis_client: redis.Redis
) -> None:
    """Tokens an earlier version's race left naming a user (in the tokens' hash, as that race
    left them): a revoke removes them all with the user, and an add of a name that has none
    removes those naming it, so they never work for the new user."""
    users = Users(client)
    token = users.add("vera", "viewer")
    stray = ["flows_stray-" + uuid.uuid4().hex for _ in range(2)]
    redis_client.hset(users.tokens_key, mapping={token_hash(s): "vera" for s in stray})
    redis_client.hset(users.tokens_key, token_hash("flows_stray-of-ann"), "ann")
    assert users.find(stray[0]) is not None  # they work while vera does
    users.revoke("vera")
    assert [users.find(t) for t in (token, *stray)] == [None, None, None]
    assert users.find(users.add("ann", "admin")) is not None
    assert users.find("flows_stray-of-ann") is None  # left before ann was added: not ann's
    assert set(redis_client.hvals(users.tokens_key)) == {"ann"}


def test_a_cache_clear_or_doctor_repair_that_changed_something_is_audited(
    cli: CliRunner, client: Client, redis_client: redis.Redis
) -> None:
    """`flows cache clear` forgets entries and `flows doctor --repair` rewrites indexes: each is
    recorded once when it changed something (the doctor exits 1 then: it found problems), and
    not when it found nothing to clear or repair."""
    t0 = 1_700_000_000.0
    call = client.engine.call
    call("worker.register", "w", "{}", now=t0)
    call("put", "w", "q", "j1", "K", "{}", 0, now=t0)
    call("pop", "q", "w", 1, now=t0)
    assert json.loads(call("cache.use", "j1", "w", "q", "key1", 1e10, 1, now=t0)) == {"hit": False}
    call("complete", "j1", "w", "q", "", "result", "{}", now=t0 + 1)
    assert flows(cli, "cache", "clear", "key").exit_code == 0
    assert flows(cli, "cache", "clear").exit_code == 0  # nothing left: nothing changed
    assert flows(cli, "doctor", "--deep", "--repair").exit_code == 0  # nothing found
    redis_client.zadd("ql:q:q-work", {"ghost": 1})
    assert flows(cli, "doctor", "--deep").exit_code == 1  # found, not repaired
    repaired = flows(cli, "doctor", "--deep", "--repair")
    assert repaired.exit_code == 1, repaired.output  # found, and repaired
    shown = json.loads(flows(cli, "audit", "--json").stdout)
    assert [(e["action"], e["target"], e["who"], e["via"]) for e in shown] == [
        ("doctor", "--deep --repair", "ada", "cli"),
        ("cache clear", "key", "ada", "cli"),
    ]


def test_every_write_the_api_has_refuses_no_token_and_a_viewer_s(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Every write the API describes, whatever it is, read from its own OpenAPI document: a
    write added later is held to the same rule. Only the webhook takes no token (its signature
    is its credential, and it has none here)."""
    viewer = add_user(cli, "vera", "viewer")
    run_id = start(cli, tmp_path)
    values = {"run_id": run_id, "step": "approve", "jid": f"{run_id}:build", "queue": "default",
              "name": "gate", "group": "g", "event_id": "1-0", "flow": "gate",
              "source": "s", "backfill_id": "b", "worker": "w"}  # fmt: skip
    with serve(client, RoleAuth(TOKEN, reads_open=True, users=Users(client))) as base:
        paths = Api(base).get("/api/v1/openapi.json").body["paths"]
        writes = [(method.upper(), path.format(**values))
                  for path, operations in paths.items()
                  for method in operations if method not in ("get", "head")]  # fmt: skip
        assert len(writes) >= 20
        with assert_unchanged(redis_client):
            for method, path in writes:
                for token, refused in ((None, 401), (viewer, 403)):
                    reply = Api(base, token).request(method, path, {})
                    if path == "/api/v1/hooks/gate":
                        assert reply.status == 404, (path, reply.body)
                    else:
                        assert reply.status == refused, (method, path, token, reply.body)


def test_forgetting_a_gone_worker_is_an_admins_and_is_audited(
    cli: CliRunner, client: Client, redis_client: redis.Redis
) -> None:
    """`POST /api/v1/workers/{name}/forget` (the workers page's Forget) manages the workers as
    pausing a queue manages queues: an admin's; an operator is refused and nothing changes; a
    live worker is refused (409) with the engine's reason."""
    tokens = {name: add_user(cli, name, role) for name, role in
              (("otto", "operator"), ("ann", "admin"))}  # fmt: skip
    info = json.dumps({"host": "node-7", "pid": 4242, "queues": ["q"], "started": 1.0})
    seconds, _ = client.redis.time()
    client.engine.call("worker.register", "killed", info, now=float(seconds) - 120)
    client.engine.call("worker.register", "alive", info)
    with serve(client, RoleAuth(None, reads_open=False, users=Users(client))) as base:
        otto, ann = (Api(base, tokens[n]) for n in ("otto", "ann"))
        with assert_unchanged(redis_client):
            assert otto.post("/api/v1/workers/killed/forget").status == 403
            live = ann.post("/api/v1/workers/alive/forget")
            assert live.status == 409 and "it may be working" in live.body["detail"]
            assert ann.post("/api/v1/workers/nobody/forget").status == 404
        forgot = ann.post("/api/v1/workers/killed/forget")
        assert (forgot.status, forgot.body) == (200, {"worker": "killed", "forgotten": True})
        entry = ann.get("/api/v1/audit").body["items"][0]
    assert sorted(w["name"] for w in client.workers.documents()) == ["alive"]
    assert (entry["action"], entry["target"], entry["who"]) == (
        "forget_worker",
        "worker=killed",
        "ann",
    )
