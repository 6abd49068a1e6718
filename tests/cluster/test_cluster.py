"""A real Redis Cluster: any node's URL, one hash slot per namespace, several namespaces served
by one ``flows worker`` / ``flows scheduler`` command, and clear one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import pytest
from cluster_cli import flows_command
from redis.crc import key_slot

from benchmarks.topology import Cluster
from scheduler import Client
from scheduler.engine import scripts
from scheduler.engine.errors import ForeignEngine, NamespaceNotInOneSlot

pytestmark = pytest.mark.slow  # starts `flows` processes: seconds each

FLOW = """\
version: 1
name: two
queue: etl
steps:
  first:
    run: echo "n=1" >> "$FLOWS_OUTPUT"
  second:
    run: test "${{ steps.first.outputs.n }}" = 1
    needs: [first]
"""

TICKING = """\
version: 1
name: tick
queue: etl
schedule: {cron: "* * * * *", overlap: allow}
steps:
  only: {run: "true"}
"""


def namespaces_on_shards(cluster: Cluster, count: int, stem: str) -> list[str]:
    """``count`` namespace names whose slots are served by ``count`` different masters."""
    chosen: dict[int, str] = {}
    for i in range(10_000):
        name = f"{stem}{i}"
        master = cluster.node_of_slot(key_slot(f"{{{name}}}:".encode()))
        chosen.setdefault(master.port, name)
        if len(chosen) == count:
            return list(chosen.values())
    raise AssertionError("no namespaces found on distinct shards")


def test_any_node_serves_a_namespace_whose_slot_is_elsewhere(cluster: Cluster) -> None:
    [name] = namespaces_on_shards(cluster, 1, "anynode")
    owner = cluster.node_of_slot(key_slot(f"{{{name}}}:".encode()))
    for node in cluster.nodes:  # masters, replicas, and the owner itself
        with Client(node.url, namespace=name) as client:
            jid = client.queues["q"].put("tasks.x", {"from": node.port})
            assert client.jobs[jid].data == {"from": node.port}
    keys = owner.client().keys(f"{{{name}}}:*")
    assert any(key.startswith(f"{{{name}}}:j:") for key in keys)
    for master in cluster.masters():
        if master is not owner:
            assert master.client().keys(f"{{{name}}}:*") == []


def test_the_default_namespace_is_refused_with_how_to_name_one(cluster: Cluster) -> None:
    with pytest.raises(NamespaceNotInOneSlot, match="--namespace NAME"):
        Client(cluster.nodes[0].url)
    with pytest.raises(NamespaceNotInOneSlot, match="no hash tag"):
        Client(cluster.nodes[0].url, namespace="billing:")
    result = flows_command("queues", "--redis", cluster.nodes[1].url)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: a Redis Cluster needs a named namespace (the default 'ql:' spreads over every"
        " slot): give --namespace NAME or set $FLOWS_NAMESPACE (keys then go under {NAME}: in"
        " one hash slot)"
    ]
    assert "Traceback" not in result.stderr


def test_the_cluster_scheme_takes_several_seed_nodes(cluster: Cluster) -> None:
    seeds = ",".join(["127.0.0.1:1", cluster.nodes[2].address])  # the first seed is down
    result = flows_command(
        "queues", "--json", "--redis", f"redis+cluster://{seeds}", "--namespace", "seeds"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_two_namespaces_on_two_shards_run_flows_with_one_worker_command(
    cluster: Cluster, tmp_path: Path
) -> None:
    first, second = namespaces_on_shards(cluster, 2, "flowrun")
    flow = tmp_path / "two.yaml"
    flow.write_text(FLOW)
    run_ids = {}
    for namespace, node in ((first, cluster.nodes[0]), (second, cluster.nodes[1])):
        submitted = flows_command(
            "run", str(flow), "--detach", "--redis", node.url, "--namespace", namespace
        )
        assert submitted.returncode == 0, submitted.stderr
        run_ids[namespace] = submitted.stdout.split()[0]
    # One command, a third node's address, both namespaces: a worker process for each.
    worked = flows_command(
        "worker",
        "-q",
        "etl",
        "--burst",
        "--processes",
        "0",
        "--redis",
        cluster.nodes[2].url,
        "--namespace",
        f"{first},{second}",
    )
    assert worked.returncode == 0, worked.stderr
    for namespace, run_id in run_ids.items():
        status = flows_command(
            "status", run_id, "--json", "--redis", cluster.nodes[3].url, "--namespace", namespace
        )
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["status"] == "succeeded"
        assert [step["status"] for step in report["steps"]] == ["success", "success"]
        doctor = flows_command(
            "doctor", "--deep", "--redis", cluster.nodes[4].url, "--namespace", namespace
        )
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_scheduler_services_fire_each_tick_once_in_each_namespace(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespaces = namespaces_on_shards(cluster, 2, "ticks")
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "tick.yaml").write_text(dedent(TICKING))
    both = ",".join(namespaces)
    tick = 1_800_000_000.0  # a minute boundary
    for now in (tick - 30, tick + 1, tick + 61):
        for node in cluster.nodes[:2]:  # two services, each serving every namespace
            result = flows_command(
                "scheduler",
                "--once",
                "--now",
                str(now),
                "--flows-dir",
                str(folder),
                "--redis",
                node.url,
                "--namespace",
                both,
            )
            assert result.returncode == 0, result.stderr
    for namespace in namespaces:
        runs = flows_command(
            "runs", "--json", "--redis", cluster.nodes[5].url, "--namespace", namespace
        )
        assert runs.returncode == 0, runs.stderr
        ticks = sorted(float(run["tick"]) for run in json.loads(runs.stdout))
        assert ticks == [tick, tick + 60]


def test_a_worker_refuses_a_cluster_whose_other_master_may_evict(cluster: Cluster) -> None:
    entry = cluster.nodes[0]
    other = next(node for node in cluster.masters() if node is not entry)
    other.client().config_set("maxmemory-policy", "allkeys-lru")
    try:
        result = flows_command("worker", "-q", "q", "--burst", "--processes", "0",
                               "--redis", entry.url, "--namespace", "evict")  # fmt: skip
    finally:
        other.client().config_set("maxmemory-policy", "noeviction")
    assert result.returncode == 78  # no restart mends it, as on one server
    assert "maxmemory-policy is 'allkeys-lru'" in result.stderr
    assert "Traceback" not in result.stderr


def test_flows_ui_serves_a_namespace_from_any_node(cluster: Cluster) -> None:
    from ui_support import TOKEN, Api, serve

    from flows.ui.auth import Auth

    [name] = namespaces_on_shards(cluster, 1, "ui")
    owner = cluster.node_of_slot(key_slot(f"{{{name}}}:".encode()))
    other = next(node for node in cluster.masters() if node is not owner)
    with Client(other.url, namespace=name) as client:
        jid = client.queues["q"].put("tasks.x", {"n": 1})
        with serve(client, Auth(TOKEN, reads_open=True)) as base:
            api = Api(base)
            assert api.get(f"/api/v1/jobs/{jid}").body["data"] == {"n": 1}
            [queue] = api.get("/api/v1/queues").body["items"]
            assert (queue["name"], queue["waiting"]) == ("q", 1)
            assert api.post("/api/v1/queues/q/pause").status == 200
            assert client.queues["q"].paused()
            metrics = api.get("/metrics").body
            assert 'flows_jobs{queue="q",state="waiting"} 1.0' in metrics


def test_a_library_swapped_on_any_master_is_seen_by_a_look_again(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engine.check_library counts the code writes of every master, and reads the code of
    each again once one moved (the library is loaded on every master)."""
    monkeypatch.setattr(scripts, "LIBRARY_CHECK_EVERY", 0.0)
    [name] = namespaces_on_shards(cluster, 1, "look")
    masters = cluster.masters()
    other = next(
        m for m in masters if m is not cluster.node_of_slot(key_slot(f"{{{name}}}:".encode()))
    )
    with Client(masters[0].url, namespace=name) as client:
        client.queues["q"].put("tasks.x", {})
        client.engine.check_library()
        client.engine.check_library()  # nothing moved: nothing read again
        swapped = scripts.functions_library() + "-- not this release's text\n"
        other.client().execute_command("FUNCTION", "LOAD", "REPLACE", swapped)
        try:
            with pytest.raises(ForeignEngine):
                client.engine.check_library()
        finally:
            other.client().execute_command(
                "FUNCTION", "LOAD", "REPLACE", scripts.functions_library()
            )
