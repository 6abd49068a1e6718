"""``flows doctor``, ``flows workers --queue``, ``flows job`` (who ran it), ``flows failed``
(dropped) and ``flows queues`` (backlog, leased) through click's runner against the session's real
server."""

from __future__ import annotations

import json
import re
import time

import pytest
import redis
from cli_support import flows
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.access import audit
from flows.cli.jobs import JOB_STATES
from flows.ui.auth import Auth
from scheduler.engine.client import Client


def test_doctor_exits_0_on_a_clean_namespace(url: str, client: Client) -> None:
    client.queues["q"].put("K", {})
    for args in ([], ["--deep"], ["--deep", "--repair"]):
        result = flows("doctor", "--redis", url, *args)
        assert result.exit_code == 0, result.output
        assert "no problems" in result.output


def test_doctor_reports_by_kind_then_repairs(
    url: str, client: Client, redis_client: redis.Redis
) -> None:
    jid = client.queues["q"].put("K", {}, jid="j1")
    [job] = client.queues["q"].pop()
    redis_client.zrem("ql:w:cli-test:jobs", jid)
    redis_client.zadd("ql:q:q-work", {"ghost": 1})
    light = flows("doctor", "--redis", url)
    assert light.exit_code == 1
    assert "orphan-lock" in light.output and jid in light.output
    assert "ghost" not in light.output  # the light check reads the running set only
    deep = json.loads(flows("doctor", "--redis", url, "--deep", "--json").output)
    assert deep["clean"] is False and deep["repairs"] == []
    assert {kind: [f["jid"] for f in found] for kind, found in deep["findings"].items()} == {
        "missing-job": ["ghost"],
        "orphan-lock": [jid],
    }
    repaired = flows("doctor", "--redis", url, "--deep", "--repair")
    assert repaired.exit_code == 1  # problems were found (and repaired)
    assert "Repairs" in repaired.output and "repaired" in repaired.output
    assert flows("doctor", "--redis", url, "--deep").exit_code == 0
    assert job.try_complete()


def test_an_entry_that_is_no_jid_is_listed_around_then_removed(
    url: str, client: Client, redis_client: redis.Redis
) -> None:
    """An outside writer's entry the engine refuses as a jid: `flows jobs` lists the jobs
    around it, `flows doctor` shows it (its control character made visible) and removes it."""
    client.queues["q"].put("K", {}, jid="j1")
    redis_client.zadd("ql:q:q-work", {"bad\x1bjid": 0, "two words": 0})
    listed = flows("jobs", "--redis", url, "--json")
    assert listed.exit_code == 0, listed.output
    assert [j["jid"] for j in json.loads(listed.output)] == ["j1"]
    deep = flows("doctor", "--redis", url, "--deep")
    assert deep.exit_code == 1 and "bad-id (2)" in deep.output and "\x1b" not in deep.output
    assert "two words" in deep.output
    assert flows("doctor", "--redis", url, "--deep", "--repair").exit_code == 1
    assert redis_client.zrange("ql:q:q-work", 0, -1) == []
    assert redis_client.lrange("ql:q:q-fifo", 0, -1) == ["j1"]
    assert flows("doctor", "--redis", url, "--deep").exit_code == 0


def test_workers_by_queue_and_who_ran_a_job(url: str, client: Client) -> None:
    info = {"host": "node-7", "pid": 4242, "queues": ["q"], "started": 1.0}
    client.engine.call("worker.register", "cli-test", json.dumps(info))
    client.engine.call("worker.register", "other", json.dumps({**info, "queues": ["r"]}))
    listeners = json.loads(flows("workers", "--redis", url, "--queue", "q", "--json").output)
    assert [(w["name"], w["host"], w["pid"]) for w in listeners] == [("cli-test", "node-7", 4242)]
    assert "other" in flows("workers", "--redis", url).output
    # A worker last heard from two minutes ago (by the server's clock) is marked silent.
    seconds, _ = client.redis.time()
    client.engine.call("worker.register", "ghost", json.dumps(info), now=float(seconds) - 120)
    listed = json.loads(flows("workers", "--redis", url, "--json").output)
    assert {w["name"]: w["silent"] for w in listed} == {
        "cli-test": False,
        "other": False,
        "ghost": True,
    }
    rows = flows("workers", "--redis", url).output.splitlines()
    assert [row for row in rows if "SILENT 2m" in row] == [r for r in rows if "ghost" in r]
    jid = client.queues["q"].put("K", {}, jid="j2")
    [job] = client.queues["q"].pop()
    job.complete(result={"rows": 3})
    shown = flows("job", jid, "--redis", url)
    assert "cli-test (host node-7, pid 4242)" in shown.output
    assert json.loads(flows("job", jid, "--redis", url, "--json").output)["ran_by"] == {
        "worker": "cli-test",
        "host": "node-7",
        "pid": 4242,
    }


def test_workers_of_a_queue_nobody_listens_on_say_why(url: str, client: Client) -> None:
    """An empty `flows workers -q QUEUE` reads as "nothing to see": a note on stderr says the
    queue does not exist (with the one likely meant) or that no live worker listens on it."""
    info = {"host": "node-7", "pid": 4242, "queues": ["reports", "fresh"], "started": 1.0}
    client.engine.call("worker.register", "cli-test", json.dumps(info))
    for queue in ("reports", "idle", "dead"):
        client.queues[queue].put("K", {})
    seconds, _ = client.redis.time()  # a worker last heard from two minutes ago is silent
    ghost = {**info, "queues": ["dead"]}
    client.engine.call("worker.register", "ghost", json.dumps(ghost), now=float(seconds) - 120)
    for json_flag in ((), ("--json",)):
        typo = flows("workers", "--redis", url, "-q", "reprots", *json_flag)
        assert typo.exit_code == 0, typo.output
        assert typo.stderr == "note: no queue 'reprots' (did you mean 'reports'?)\n"
        idle = flows("workers", "--redis", url, "-q", "idle", *json_flag)
        assert idle.exit_code == 0, idle.output
        assert idle.stderr == "note: no live worker listens on queue 'idle'\n"
        dead = flows("workers", "--redis", url, "-q", "dead", *json_flag)
        assert dead.exit_code == 0, dead.output
        assert dead.stderr == (
            "note: no live worker listens on queue 'dead' (1 silent worker, most likely dead)\n"
        )
    assert json.loads(flows("workers", "--redis", url, "-q", "idle", "--json").stdout) == []
    # A listened-on queue gets no note, even one no job has used yet.
    for queue in ("reports", "fresh"):
        listed = flows("workers", "--redis", url, "-q", queue)
        assert listed.exit_code == 0 and "cli-test" in listed.stdout
        assert listed.stderr == ""


def test_failed_shows_what_the_bound_dropped(url: str, client: Client) -> None:
    client.config["max-failed-per-group"] = 2
    for n in range(5):
        jid = client.queues["q"].put("K", {}, jid=f"f{n}")
        client.jobs[jid].fail("boom", "it broke")
    groups = flows("failed", "--redis", url)
    assert groups.exit_code == 0
    [row] = [line for line in groups.output.splitlines() if "boom" in line]
    assert row.replace("│", " ").split() == ["boom", "2", "3"]
    listing = json.loads(flows("failed", "boom", "--redis", url, "--json").output)
    assert (listing["total"], listing["dropped"]) == (2, 3)
    assert "3 older ones dropped" in flows("failed", "boom", "--redis", url).output


def test_failed_json_carries_the_dropped_counts_the_table_shows(url: str, client: Client) -> None:
    client.config["max-failed-per-group"] = 2
    for n in range(5):
        jid = client.queues["q"].put("K", {}, jid=f"f{n}")
        client.jobs[jid].fail("boom", "it broke")
    jid = client.queues["q"].put("K", {}, jid="other")
    client.jobs[jid].fail("alone", "it broke too")
    assert json.loads(flows("failed", "--redis", url, "--json").stdout) == [
        {"group": "alone", "total": 1, "dropped": 0},
        {"group": "boom", "total": 2, "dropped": 3},
    ]
    # A group whose kept jobs were all put back still shows what it dropped, as the table does.
    assert flows("unfail", "boom", "-q", "q", "--redis", url).exit_code == 0
    assert json.loads(flows("failed", "--redis", url, "--json").stdout) == [
        {"group": "alone", "total": 1, "dropped": 0},
        {"group": "boom", "total": 0, "dropped": 3},
    ]
    [row] = [line for line in flows("failed", "--redis", url).stdout.splitlines() if "boom" in line]
    assert row.replace("│", " ").split() == ["boom", "0", "3"]


def test_failed_of_a_group_without_failed_jobs_names_the_one_likely_meant(
    url: str, client: Client
) -> None:
    # Group names are case-sensitive: an empty listing of a misspelt one read as "no failures".
    jid = client.queues["q"].put("K", {}, jid="f-typo")
    client.jobs[jid].fail("TimeoutError", "too slow")
    for args in (("timeouterror",), ("timeouterror", "--json")):
        listing = flows("failed", *args, "--redis", url)
        assert listing.exit_code == 0
        assert listing.stderr == (
            "note: no failed jobs in group 'timeouterror' (did you mean 'TimeoutError'?)\n"
        )
    assert "its groups: TimeoutError" in flows("failed", "zzz", "--redis", url).stderr
    assert flows("failed", "TimeoutError", "--redis", url).stderr == ""


def test_queues_show_backlog_and_leased(url: str, client: Client) -> None:
    for _ in range(3):
        client.queues["q"].put("K", {})
    client.queues["q"].pop()
    [row] = json.loads(flows("queues", "--redis", url, "--json").output)
    assert (row["backlog"], row["leased"], row["due"]) == (2, 1, 0)


def _one_job_in_each_state(client: Client, queue: str) -> dict[str, str]:
    q = client.queues[queue]
    jids: dict[str, str] = {}
    # Stalled last: a later pop would reclaim its expired lock.
    for state in ("running", "buried", "complete", "failed", "stalled"):
        jid = q.put("K", {}, jid=f"{queue}-{state}")
        [job] = q.pop(now=time.time() - 3600 if state == "stalled" else "")
        assert job.jid == jid
        if state == "buried":
            job.bury("aside")
        elif state == "complete":
            job.complete()
        elif state == "failed":
            job.fail(f"broken-{queue}", "it broke")
        jids[state] = jid
        if state == "failed":
            for index in (1, 2):
                q.put("K", {}, jid=f"{queue}-key-{index}", concurrency_key="k")
            q.pop(2)  # the first runs, the second is parked for the key's slot
            jids["parked"] = f"{queue}-key-2"
    jids["waiting"] = q.put("K", {}, jid=f"{queue}-waiting")
    jids["scheduled"] = q.put("K", {}, jid=f"{queue}-scheduled", delay=3600)
    jids["depends"] = q.put("K", {}, jid=f"{queue}-depends", depends=[jids["waiting"]])
    jids["recurring"] = q.recur("K", {}, 3600, jid=f"{queue}-recurring")
    return jids


def test_jobs_of_a_queue_are_only_that_queue_s_in_every_state(url: str, client: Client) -> None:
    mine = _one_job_in_each_state(client, "mine")
    _one_job_in_each_state(client, "other")
    for state in JOB_STATES:
        listed = json.loads(
            flows("jobs", "--redis", url, "--state", state, "-q", "mine", "--json").stdout
        )
        assert mine[state] in [j["jid"] for j in listed], state
        assert {j["queue"] for j in listed} == {"mine"}, state
        nowhere = flows("jobs", "--redis", url, "--state", state, "-q", "nosuchqueue", "--json")
        assert json.loads(nowhere.stdout) == [], state
        assert "note: no queue 'nosuchqueue'" in nowhere.stderr
        both = json.loads(flows("jobs", "--redis", url, "--state", state, "--json").stdout)
        assert {j["queue"] for j in both} == {"mine", "other"}, state
        # Every state renders as a table, and each job on its own.
        assert flows("jobs", "--redis", url, "--state", state, "-q", "mine").exit_code == 0
        if state != "recurring":
            shown = flows("job", mine[state], "--redis", url)
            assert shown.exit_code == 0 and mine[state] in shown.stdout, shown.output


def test_a_list_cut_at_its_limit_says_so(url: str, client: Client) -> None:
    """`--limit 4` over two queues of 6 and 6 waiting jobs shows 4 (the first queue's): a
    note says more exist, so the other queue's jobs are not taken for none."""
    for queue in ("qa", "qb"):
        for i in range(6):
            client.queues[queue].put("K", {}, jid=f"{queue}-{i}")
    cut = flows("jobs", "--redis", url, "--limit", "4")
    assert cut.exit_code == 0
    assert "note: the list stops at --limit 4; more jobs in state waiting exist" in cut.stderr
    whole = flows("jobs", "--redis", url, "--limit", "12")
    assert "note:" not in whole.stderr and "qb-5" in whole.stdout


def test_a_list_of_runs_cut_at_its_limit_says_so(url: str, client: Client) -> None:
    """`flows runs` shows 20 runs by default: a note says older ones exist (as `flows jobs`
    says it), also at the largest --limit, so the listing is not taken for all there is."""
    for i in range(25):
        run_id = f"many@r{i:02d}"
        job = {"jid": f"{run_id}:a", "queue": "q", "klass": "K", "data": "{}"}
        client.engine.call("flow.submit", run_id, json.dumps({"flow": "many"}), json.dumps([job]))
    cut = flows("runs", "--redis", url)
    assert cut.exit_code == 0
    assert cut.stderr == (
        "note: the list stops at --limit 20; older runs exist (--flow FLOW lists one flow's)\n"
    )
    assert "note:" not in flows("runs", "--redis", url, "--limit", "25").stderr
    cut = flows("runs", "--redis", url, "--flow", "many", "--limit", "24", "--all")
    assert cut.stderr == "note: the list stops at --limit 24; older runs exist\n"
    listed = json.loads(flows("runs", "--redis", url, "--limit", "24", "--json").stdout)
    assert len(listed) == 24


def test_a_misspelt_job_of_a_run_is_answered_with_the_one_likely_meant(
    url: str, client: Client
) -> None:
    now = float(client.redis.time()[0])
    jobs = [{"jid": f"typo@r:{step}", "queue": "q", "klass": "K", "data": "{}"} for step in "ab"]
    jobs[0]["jid"] = "typo@r:fetch"
    client.engine.call(
        "flow.submit", "typo@r", json.dumps({"flow": "typo"}), json.dumps(jobs), now=now
    )
    for command in ("job", "explain"):
        shown = flows(command, "typo@r:fetc", "--redis", url)
        assert shown.exit_code == 1
        assert shown.output.endswith("(did you mean 'typo@r:fetch'?)\n"), shown.output
    shown = flows("job", "nowhere@r:fetc", "--redis", url)  # no such run: no hint
    assert shown.output == "Error: no job 'nowhere@r:fetc'\n"


def test_status_tells_a_missed_deadline_of_the_run_and_of_a_step(url: str, client: Client) -> None:
    now = float(client.redis.time()[0])
    run = {"flow": "late", "deadline": 60}
    jobs = [
        {"jid": "late@r:slow", "queue": "q", "klass": "K", "data": "{}", "deadline": 5},
        {"jid": "late@r:quick", "queue": "q", "klass": "K", "data": "{}"},
    ]
    client.engine.call("flow.submit", "late@r", json.dumps(run), json.dumps(jobs), now=now)
    client.engine.call("pop.lean", "q", "cli-test", 1, now=now)
    client.engine.call("deadline.sweep", now=now + 100)
    shown = flows("status", "late@r", "--redis", url)
    assert shown.exit_code == 0, shown.output
    missed = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now + 100))
    assert f"deadline 1m missed at {missed}" in shown.output
    assert f"step slow: deadline missed at {missed}" in shown.output
    assert "step quick: deadline" not in shown.output
    document = json.loads(flows("status", "late@r", "--redis", url, "--json").output)
    steps = {s["step"]: s["deadline_missed"] for s in document["steps"]}
    assert steps == {"slow": now + 100, "quick": None}
    assert document["deadline_missed"] == now + 100


def test_status_tells_a_wait_past_its_timeout_as_explain_and_the_api_do(
    url: str, client: Client
) -> None:
    """Past its timeout and before housekeeping ran, a wait has timed out: every surface says
    so in the engine's words, at the server's clock."""
    now = client.engine.server_time()
    wait = {"signal": "approve", "timeout": 60, "on_timeout": "skip"}
    jobs = [{"jid": "gate@r:approve", "queue": "q", "klass": "K", "data": "{}", "wait": wait}]
    run = json.dumps({"flow": "gate"})
    # It became ready 63 s ago: it timed out 3 s ago.
    client.engine.call("flow.submit", "gate@r", run, json.dumps(jobs), now=now - 63)
    outcome = (
        "the scheduler's next housekeeping skips it (on_timeout skip); a signal before then "
        "still completes it"
    )
    shown = flows("status", "gate@r", "--redis", url)
    assert shown.exit_code == 0, shown.output
    line = next(x for x in shown.output.splitlines() if x.startswith("approve: "))
    found = re.fullmatch(r"approve: awaiting signal 'approve', timed out (\d+)s ago: (.*)", line)
    assert found is not None, shown.output
    assert int(found[1]) in (3, 4) and found[2] == outcome
    assert "times out" not in shown.output
    explained = flows("explain", "gate@r", "--redis", url)
    assert f"): {outcome}." in explained.output, explained.output
    assert "timed out at " in explained.output
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        reply = Api(base).get("/api/v1/runs/gate@r/explain?step=approve").body
    [job] = reply["steps"][0]["jobs"]
    assert job["reason"] == "timed-out" and job["sentence"].endswith(f"): {outcome}.")
    client.engine.call("wait.sweep")  # the housekeeping: skipped, no longer awaiting
    assert "approve: " not in flows("status", "gate@r", "--redis", url).output


def test_the_cli_json_and_the_api_give_one_shape_per_fact(url: str, client: Client) -> None:
    """What `flows ... --json` prints and what ``GET /api/v1/...`` answers for the same fact
    (a run listed, a run, a job of a run, a plain job, queues, workers, failure groups and a
    group's jobs) is one document: the same keys and values."""
    info = {"host": "node-7", "pid": 4242, "queues": ["q"], "started": 1.0}
    client.engine.call("worker.register", "cli-test", json.dumps(info))
    run = json.dumps({"flow": "shape"})
    jobs = [
        {"jid": "shape@r:a", "queue": "q", "klass": "K", "data": "{}"},
        {"jid": "shape@r:b", "queue": "q", "klass": "K", "data": "{}", "depends": ["shape@r:a"]},
    ]
    client.engine.call("flow.submit", "shape@r", run, json.dumps(jobs))
    [first] = client.queues["q"].pop()
    first.complete(result={"rows": 3})
    plain = client.queues["p"].put("K", {}, jid="plain")
    [job] = client.queues["p"].pop()
    job.fail("broken", "it broke")

    def cli(*args: str) -> object:
        result = flows(*args, "--redis", url, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        pairs = [
            (cli("runs"), api.get("/api/v1/runs").body["items"]),
            (cli("status", "shape@r"), api.get("/api/v1/runs/shape@r").body),
            (cli("job", "shape@r:a"), api.get("/api/v1/jobs/shape@r:a").body),
            (cli("job", plain), api.get(f"/api/v1/jobs/{plain}").body),
            (cli("queues"), api.get("/api/v1/queues").body["items"]),
            (cli("workers"), api.get("/api/v1/workers").body["items"]),
            (cli("failed"), api.get("/api/v1/failures").body["items"]),
            (cli("failed", "broken")["jobs"], api.get("/api/v1/failures/broken").body["items"]),
        ]
    for from_cli, from_api in pairs:
        assert from_cli == from_api
    done = cli("job", "shape@r:a")
    assert done["run"] == "shape@r" and done["ran_by"]["worker"] == "cli-test"
    failed = cli("job", plain)
    assert failed["run"] is None and failed["actions"] == ["retry", "cancel"]


EMPTY_LISTINGS = [
    ("runs",),
    ("runs", "--flow", "nothing"),
    ("jobs",),
    ("jobs", "--state", "failed"),
    ("jobs", "--state", "recurring"),
    ("queues",),
    ("workers",),
    ("failed",),
    ("throttles",),
    ("schedules",),
    ("backfills",),
    ("sources",),
    ("notifications",),
    ("cache", "list"),
    ("audit",),
    ("user", "list"),
]


def test_every_listing_says_in_words_that_it_is_empty(url: str) -> None:
    """On an empty namespace each listing says so in one line on stderr, not as a table without
    rows (which reads as a hang, or hides a typo); stdout stays empty, as ``--json``'s list."""
    for args in EMPTY_LISTINGS:
        result = flows(*args, "--redis", url)
        assert result.exit_code == 0, (args, result.output)
        assert result.stdout == "", args
        assert len(result.stderr.splitlines()) == 1, (args, result.stderr)
        assert re.match(r"(no|the|nothing) ", result.stderr), (args, result.stderr)


def test_audit_times_are_local_as_every_other_time_the_commands_print(
    url: str, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`flows audit` printed UTC, unmarked, beside `flows job`'s local times: one clock."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30: no minute of it is UTC's
    time.tzset()
    try:
        assert flows("throttle", "set", "t", "2", "--redis", url).exit_code == 0
        [entry] = json.loads(flows("audit", "--redis", url, "--json").stdout)
        shown = flows("audit", "--redis", url).stdout
        local = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["at"]))
    finally:
        monkeypatch.undo()
        time.tzset()
    utc = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(entry["at"]))
    assert local in shown and utc not in shown, shown


def test_a_run_s_table_piped_is_as_wide_as_its_rows_as_every_table(
    url: str, client: Client
) -> None:
    """Piped (no terminal, no $COLUMNS), `flows status` laid its table out for 80 columns and
    left columns out; every other table is as wide as its rows there, for grep."""
    step = "extract_everything_from_the_upstream_warehouse_in_one_go_" + "x" * 7
    run_id = "a_flow_with_a_long_enough_name_to_fill_a_line@20260101T000000Z-3f9a1c"
    job = {"jid": f"{run_id}:{step}", "queue": "q", "klass": "K", "data": "{}"}
    client.engine.call("flow.submit", run_id, json.dumps({"flow": "long"}), json.dumps([job]))
    shown = flows("status", run_id, "--redis", url)
    assert shown.exit_code == 0, shown.output
    assert "left out" not in shown.stdout, shown.stdout
    assert f"Run {run_id} running" in shown.stdout
    [row] = [line for line in shown.stdout.splitlines() if step in line]
    assert "waiting" in row and "0/1" in row, shown.stdout


def test_audit_by_a_name_no_user_has_says_why_nothing_matched(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name outside the users store's rule matches only a $FLOWS_USER given as such: when
    nothing matches, the listing says the name is not a user name instead of only "nothing"."""
    note = (
        "nothing by ada lovelace in the audit log ('ada lovelace' is not a user name (1 to 64 of "
        "A-Z a-z 0-9 _ . @ -): no user of the dashboard is named so, only a $FLOWS_USER or a "
        "login name may be)"
    )
    for args in [(), ("--json",)]:
        result = flows("audit", "--user", "ada lovelace", *args, "--redis", url)
        assert result.exit_code == 0, result.output
        assert result.stderr.strip() == note
    monkeypatch.setenv("FLOWS_USER", "ada lovelace")
    assert flows("throttle", "set", "t", "2", "--redis", url).exit_code == 0
    found = flows("audit", "--user", "ada lovelace", "--json", "--redis", url)
    assert [e["who"] for e in json.loads(found.stdout)] == ["ada lovelace"]
    assert found.stderr == ""


NOT_ONE_LINE = "): one line of text is expected (a tab is allowed)"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "an empty name: no one is recorded so (leave --user out for everyone's entries)"),
        ("ada\nadmin", "holds a control character (\\n" + NOT_ONE_LINE),
        ("a\x1b[2Jb", "holds a control character (\\x1b" + NOT_ONE_LINE),
    ],
)
def test_audit_by_a_name_nobody_can_be_recorded_as_is_a_usage_error(
    name: str, why: str, url: str, redis_client: redis.Redis
) -> None:
    """Who is recorded is one line ($FLOWS_USER that is not is refused, the API's `by` too), and
    never empty: `--user` of any other name is refused as they are, not searched for."""
    with assert_unchanged(redis_client):
        result = flows("audit", "--user", name, "--redis", url)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == f"Error: Invalid value for '--user': {why}"
    assert "Traceback" not in result.output


def test_a_finding_about_a_run_is_listed_without_an_empty_jid_column(
    url: str, client: Client, redis_client: redis.Redis
) -> None:
    client.engine.call(
        "flow.submit",
        "drift-1",
        json.dumps({"flow": "drift"}),
        json.dumps([{"jid": "drift-1:a", "queue": "q", "klass": "K", "data": "{}"}]),
    )
    redis_client.hset("ql:run-counts:drift-1", mapping={"a:waiting": 5})
    deep = flows("doctor", "--redis", url, "--deep")
    assert deep.exit_code == 1, deep.output
    section = deep.output.split("run-counts (1):", 1)[1]
    header = next(line for line in section.splitlines() if "detail" in line)
    assert "run drift-1" in section and "jid" not in header, deep.output
    # counted as words are: one problem, one job, one run
    assert "1 problem: 1 run-counts" in deep.output and "1 jobs" not in deep.output
    assert flows("doctor", "--redis", url, "--deep", "--repair").exit_code == 1
    assert flows("doctor", "--redis", url, "--deep").exit_code == 0


def test_a_silent_worker_is_forgotten_on_request_and_a_live_one_is_not(
    url: str, client: Client, redis_client: redis.Redis
) -> None:
    """A worker killed with kill -9 stayed listed as SILENT for max-worker-age (a day), and no
    command forgot it: `flows workers --forget NAME` does, audited; a live worker, one holding
    jobs and an unknown name are refused with why, changing nothing."""
    info = {"host": "node-7", "pid": 4242, "queues": ["q"], "started": 1.0}
    seconds, _ = client.redis.time()
    client.engine.call("worker.register", "killed", json.dumps(info), now=float(seconds) - 120)
    client.engine.call("worker.register", "alive", json.dumps(info))
    client.queues["q"].put("K", {}, jid="held")
    with Client(url, worker_name="holder") as holder:
        holder.queues["q"].pop(now=float(seconds) - 120)
    refusals = {
        "alive": "worker alive was seen 0s ago: it may be working",
        "holder": "worker holder holds 1 job",
        "nobody": "no worker nobody",
    }
    for name, said in refusals.items():
        with assert_unchanged(redis_client):
            refused = flows("workers", "--redis", url, "--forget", name)
        assert refused.exit_code == 1, refused.output
        assert said in refused.stderr and "Traceback" not in refused.output, refused.stderr
    with assert_unchanged(redis_client):
        bad = flows("workers", "--redis", url, "--forget", "two words")
    assert bad.exit_code == 2 and "worker name 'two words'" in bad.stderr, bad.stderr
    forgot = flows("workers", "--redis", url, "--forget", "killed")
    assert forgot.exit_code == 0, forgot.output
    assert forgot.stdout == "forgot worker killed\n"
    listed = json.loads(flows("workers", "--redis", url, "--json").stdout)
    assert sorted(w["name"] for w in listed) == ["alive", "holder"]
    entry = audit.recent(client, 1)[0]
    assert (entry["action"], entry["target"], entry["via"]) == ("workers", "--forget killed", "cli")
