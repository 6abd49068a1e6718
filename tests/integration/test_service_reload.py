"""Reloading: files added, changed, removed, broken, duplicated under --flows-dir."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from helpers import assert_unchanged
from scheduler_support import (
    MIN,
    T,
    make_service,
    registration,
    run_ids,
    skipped_ticks,
    write_flow,
)

from flows.expand.run_ids import run_id_for
from flows.runs.build import read_flow_file
from scheduler.engine.client import Client
from scheduler.service import catalog
from scheduler.service.loop import MAX_ROUNDS, SchedulerService
from scheduler.service.schedules import Schedules

HOUR = 60 * MIN


@pytest.fixture
def client(redis_client: redis.Redis) -> Iterator[Client]:
    with Client(redis=redis_client) as client:
        yield client


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    path.mkdir()
    return path


def test_added_changed_and_removed_files(client: Client, folder: Path) -> None:
    service = make_service(client, folder)
    assert service.scan(T - 1).registered == []
    path = write_flow(folder, "a")
    (folder / "nested").mkdir()
    write_flow(folder / "nested", "b", file="b.yml", cron="0 * * * *")
    (folder / "plain.yaml").write_text("version: 1\nname: plain\nsteps:\n  s: {run: echo}\n")
    report = service.scan(T - 1)
    assert sorted(report.registered) == ["a", "b"] and report.invalid == {}
    assert registration(client, "b").definition.file == str(folder / "nested" / "b.yml")
    assert sorted(r.name for r in Schedules(client).all()) == ["a", "b"]

    # Changed: the new cron applies from the next tick.
    write_flow(folder, "a", cron="3-59/10 * * * *")
    assert service.scan(T - 30).updated == ["a"]
    assert registration(client, "a").next == T + 3 * MIN
    assert registration(client, "a").definition.cron == ("3-59/10 * * * *",)

    # Touched, same content: nothing is registered again.
    os.utime(path, (T, T))
    report = service.scan(T + 2)
    assert (report.registered, report.updated, report.unregistered) == ([], [], [])

    # Removed: unregistered; a schedule dropped from a file likewise.
    path.unlink()
    (folder / "nested" / "b.yml").write_text("version: 1\nname: b\nsteps:\n  s: {run: echo}\n")
    assert sorted(service.scan(T + 3).unregistered) == ["a", "b"]
    assert Schedules(client).all() == []


def test_a_folder_without_a_schedule_is_said_once(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Getting started's hello flow has none: a service on its folder fires nothing, and says
    so rather than leave a newcomer waiting for a tick."""
    service = make_service(client, folder)
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        service.scan(T - 1)
        (folder / "plain.yaml").write_text("version: 1\nname: plain\nsteps:\n  s: {run: echo}\n")
        service.scan(T - 1)
        service.scan(T - 1)  # said once, not every scan
        write_flow(folder, "a")
        service.scan(T - 1)
    assert [r.getMessage() for r in caplog.records if "nothing" in r.getMessage()] == [
        f"no flow files (*.yaml, *.yml) in {folder}: nothing to fire",
        f"no flow file in {folder} has a schedule (1 read): nothing to fire",
    ]


def test_a_renamed_flow_moves_its_schedule(client: Client, folder: Path) -> None:
    service = make_service(client, folder)
    write_flow(folder, "old", file="flow.yaml")
    service.scan(T - 1)
    write_flow(folder, "new", file="flow.yaml")
    report = service.scan(T)
    assert (report.registered, report.unregistered) == (["new"], ["old"])


def test_a_file_moved_within_the_folder_is_registered_from_where_it_is(
    client: Client, folder: Path
) -> None:
    """The same text at another path: the schedule names the file where it now is (its runs
    resolve its sub-flows from there), and so does a later unregistration."""
    service = make_service(client, folder)
    old = write_flow(folder, "a", file="a.yaml")
    service.scan(T - 1)
    (folder / "nested").mkdir()
    new = old.rename(folder / "nested" / "moved.yaml")
    report = service.scan(T - 1)
    assert (report.registered, report.updated, report.unregistered) == ([], ["a"], [])
    held = registration(client, "a").definition
    assert (held.file, held.path) == (str(new), "nested/moved.yaml")
    # Scanned again, unmoved: nothing to register.
    assert service.scan(T - 1).updated == []
    # A second service on the folder, not yet told of the move, finds it registered as it is.
    assert make_service(client, folder).scan(T - 1).updated == []


def test_a_file_moved_and_changed_is_registered_from_where_it_is(
    client: Client, folder: Path
) -> None:
    service = make_service(client, folder)
    old = write_flow(folder, "a", file="a.yaml")
    service.scan(T - 1)
    old.unlink()
    (folder / "nested").mkdir()
    new = write_flow(folder / "nested", "a", file="moved.yaml", steps=2)
    report = service.scan(T - 1)
    assert (report.registered, report.updated, report.unregistered) == ([], ["a"], [])
    held = registration(client, "a").definition
    assert (held.file, held.path) == (str(new), "nested/moved.yaml")
    assert "s1:" in held.source  # the new text


@pytest.mark.parametrize(
    "broken",
    [
        "version: 1\nname: a\n  steps: [\n",  # YAML
        "version: 1\nname: 'a'  # moved\nsteps:\n  s: {run: echo, need: [x]}\n",  # schema
    ],
    ids=["yaml", "schema"],
)
def test_a_file_moved_and_broken_keeps_its_schedule(
    client: Client, folder: Path, broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken file keeps its last good registration until fixed, moved in the same change
    too: the flow it declares keeps its schedule, the log says so, and it keeps firing."""
    service = make_service(client, folder)
    old = write_flow(folder, "a", file="a.yaml")
    service.scan(T - 1)
    before = registration(client, "a").definition
    old.unlink()
    (folder / "nested").mkdir()
    new = folder / "nested" / "moved.yaml"
    new.write_text(broken)
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        # Only what the scans below say: the first scan's line is kept when an earlier test of
        # this process left the logger at INFO.
        caplog.clear()
        for _ in range(2):  # and at the next scan: still kept, logged once
            with assert_unchanged(client.redis):
                report = service.scan(T - 1)
            assert (report.registered, report.updated, report.unregistered) == ([], [], [])
            assert list(report.invalid) == [str(new)]
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"{new} does not validate; schedule a stays as registered from {old}")
    assert registration(client, "a").definition == before
    assert [e.path for e in catalog.entries(client)] == ["a.yaml"]  # as published, kept too
    assert [f.tick for f in service.tick(T).fired] == [T]  # the registered version fires
    # Fixed where it now is: registered from there.
    write_flow(folder / "nested", "a", file="moved.yaml", steps=2)
    report = service.scan(T + 1)
    assert (report.updated, report.unregistered, report.invalid) == (["a"], [], {})
    held = registration(client, "a").definition
    assert (held.file, held.path) == (str(new), "nested/moved.yaml")


def test_a_broken_file_says_what_it_keeps(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log line of a file that does not validate says what stays registered, truthfully:
    a file that declares a name no schedule has is not said to keep one."""
    service = make_service(client, folder)
    write_flow(folder, "a", file="a.yaml")
    service.scan(T - 1)
    other = folder / "c.yaml"
    other.write_text("version: 1\nname: c\nsteps:\n  s: {run: echo, need: [x]}\n")  # new
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        report = service.scan(T - 1)
    assert report.unregistered == [] and list(report.invalid) == [str(other)]
    said = [r.getMessage() for r in caplog.records]
    assert [m.split(":\n")[0] for m in said] == [
        f"{other} does not validate; no schedule is registered from it"
    ]


def _moved_and_unreadable(service: SchedulerService, folder: Path) -> tuple[Path, Path]:
    """Flow a registered by ``service`` from a.yaml, then moved to b.yaml and broken in one
    change, so badly that its name cannot be read: (a.yaml, b.yaml)."""
    old = write_flow(folder, "a", file="a.yaml")
    service.scan(T - 1)
    old.unlink()
    new = folder / "b.yaml"
    new.write_text("version: 1\nsteps: [\n")
    return old, new


def test_a_file_moved_and_broken_past_reading_its_name_keeps_the_schedule(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its schedule was unregistered (logged): a typo in a moved file stopped a schedule. The
    file that appeared as the registered one went may be it: the schedule stays registered,
    fires on the virtual clock, and the log says why, once, until the file validates."""
    service = make_service(client, folder)
    old, new = _moved_and_unreadable(service, folder)
    before = registration(client, "a").definition
    other = folder / "c.yaml"
    other.write_text("version: 1\nname: c\nsteps:\n  s: {run: echo, need: [x]}\n")
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        for _ in range(2):  # and at the next scan: still kept, logged once
            with assert_unchanged(client.redis):
                report = service.scan(T - 1)
            assert (report.registered, report.updated, report.unregistered) == ([], [], [])
            assert sorted(report.invalid) == [str(new), str(other)]
    said = sorted(r.getMessage().split(":\n")[0] for r in caplog.records)
    assert said == [
        f"{new} does not validate; schedule a stays as registered from {old}, which is gone,"
        " until this file validates (its flow's name cannot be read: it may be where that file"
        " moved)",
        f"{other} does not validate; no schedule is registered from it",
    ]
    assert registration(client, "a").definition == before
    assert [e.path for e in catalog.entries(client)] == ["a.yaml"]  # as published, kept too
    assert [f.tick for f in service.tick(T).fired] == [T]
    assert [f.tick for f in service.tick(T + 5 * MIN).fired] == [T + 5 * MIN]
    # Fixed where it now is, the same flow: registered from there.
    write_flow(folder, "a", file="b.yaml", steps=2)
    report = service.scan(T + 5 * MIN + 1)
    assert (report.updated, report.unregistered) == (["a"], [])
    assert registration(client, "a").definition.path == "b.yaml"


@pytest.mark.parametrize("then", ["fixed as another flow", "removed"])
def test_a_schedule_kept_for_an_unreadable_file_goes_once_it_is_not_that_flow(
    client: Client, folder: Path, then: str
) -> None:
    service = make_service(client, folder)
    _, new = _moved_and_unreadable(service, folder)
    assert service.scan(T - 1).unregistered == []
    if then == "removed":
        new.unlink()
    else:
        write_flow(folder, "b", file="b.yaml")
    report = service.scan(T - 1)
    assert report.unregistered == ["a"]
    assert [r.name for r in Schedules(client).all()] == ([] if then == "removed" else ["b"])


def test_a_first_scan_unregisters_a_gone_file_beside_an_unreadable_one(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A service's first scan has seen no file appear: a file whose name cannot be read is
    not taken for where a gone file moved (it may have been broken for months), so the
    schedule of a file removed while no service ran is unregistered. A file broken past
    reading its name where its schedule's file is keeps that schedule: it may be its own."""
    old = write_flow(folder, "a", file="a.yaml")
    write_flow(folder, "b", file="b.yaml")
    make_service(client, folder).scan(T - 1)
    old.unlink()
    junk = folder / "junk.yaml"
    junk.write_text("version: 1\nsteps: [\n")
    (folder / "b.yaml").write_text("version: 1\nsteps: [\n")
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        caplog.clear()
        report = make_service(client, folder).scan(T - 1)
    assert report.unregistered == ["a"]
    assert [r.name for r in Schedules(client).all()] == ["b"]
    said = sorted(r.getMessage().split(":\n")[0] for r in caplog.records)
    assert said == sorted(
        [
            f"unregistered schedule a ({old} no longer schedules it)",
            f"{folder / 'b.yaml'} does not validate; its schedule b stays as registered",
            f"{junk} does not validate; no schedule is registered from it",
        ]
    )


def test_a_file_removed_beside_an_old_unreadable_file_is_unregistered(
    client: Client, folder: Path
) -> None:
    """Only a file that appears as the registered one goes may be it: one broken before (a
    scan saw it) is another flow's, and removing a flow's file still removes its schedule."""
    service = make_service(client, folder)
    old = write_flow(folder, "a", file="a.yaml")
    (folder / "b.yaml").write_text("version: 1\nsteps: [\n")
    service.scan(T - 1)
    old.unlink()
    assert service.scan(T - 1).unregistered == ["a"]


def test_a_changed_file_keeps_its_due_ticks(client: Client, folder: Path) -> None:
    # A tick due but not yet fired when the file changes is not lost to the change.
    service = make_service(client, folder)
    write_flow(folder, "a", catchup="all", max_runs=100)
    service.scan(T - 1)
    write_flow(folder, "a", catchup="all", max_runs=100, steps=2)
    service.scan(T + 30)
    assert registration(client, "a").next == T
    [fired] = service.tick(T + 30).fired
    assert fired.tick == T
    assert client.jobs.get(f"{fired.run_id}:s1") is not None  # the new version fired


def test_a_time_zone_change_fires_the_tick_due_before_it(client: Client, folder: Path) -> None:
    """The tick due at noon UTC when the file moves the schedule to New York (noon there is
    17:00 UTC) came due under the registered definition: it fires as that one has it (its
    text), as a tick just before the scan would have, and the new zone applies after it."""
    service = make_service(client, folder)
    write_flow(folder, "a", cron="0 12 * * *")
    service.scan(T - 1)
    write_flow(folder, "a", cron="0 12 * * *", timezone="America/New_York", steps=2)
    report = service.scan(T + 20)
    assert report.updated == ["a"]
    assert run_ids(client, "a") == [run_id_for("a", T)]
    assert client.jobs.get(f"{run_id_for('a', T)}:s1") is None  # the registered version
    reg = registration(client, "a")
    assert (reg.next, reg.last_tick, reg.definition.timezone) == (
        T + 5 * HOUR,
        T,
        "America/New_York",
    )
    assert service.tick(T + 20).fired == []
    [fired] = service.tick(T + 5 * HOUR).fired
    assert client.jobs.get(f"{fired.run_id}:s1") is not None  # the new version from then on


def test_a_change_fires_its_due_tick_however_many_schedules_are_due_before_it(
    client: Client, folder: Path
) -> None:
    """The ticks a scan handles before it registers a changed cron are that schedule's alone:
    it reads them without paging through every due schedule, so more schedules of another
    source due before it than a tick pages through (rounds of one here) do not hide them."""
    service = make_service(client, folder, batch=1)
    write_flow(folder, "a", cron="0 12 * * *")
    service.scan(T - 1)
    stored = json.loads(client.engine.call("schedule.get", "a", 0))
    theirs = {**json.loads(stored["definition"]), "origin": "elsewhere"}
    pipe = client.engine.pipeline()
    for i in range(MAX_ROUNDS + 1):
        definition = json.dumps({**theirs, "flow": f"o{i}"})
        pipe.call("schedule.register", f"o{i}", definition, "-", T - MIN, "", "", now=T - 1)
    assert set(pipe.execute()) == {"registered"}
    write_flow(folder, "a", cron="0 12 * * *", timezone="America/New_York", steps=2)
    assert service.scan(T + 20).updated == ["a"]
    assert run_ids(client, "a") == [run_id_for("a", T)]
    assert registration(client, "a").next == T + 5 * HOUR


@pytest.mark.parametrize(
    ("catchup", "fired", "skipped"),
    [("none", [], 4), ("latest", [3], 3), ("all", [0, 1, 2, 3], 0)],
)
def test_a_time_zone_change_after_downtime_keeps_the_catch_up_policy(
    client: Client, folder: Path, catchup: str, fired: list[int], skipped: int
) -> None:
    """Four hourly ticks in UTC came due while no service ran; the file now says Kolkata
    (every hour at :30 UTC). The first scan after the outage handles those four under the
    catch-up policy they came due with, each fired or recorded as skipped, then moves on."""
    options = {"cron": "0 * * * *", "catchup": catchup, "window": "1d", "overlap": "allow"}
    if catchup == "all":
        options["max_runs"] = 100
    service = make_service(client, folder)
    write_flow(folder, "a", **options)
    service.scan(T - 1)
    write_flow(folder, "a", **options, timezone="Asia/Kolkata")
    now = T + 3 * HOUR + 2 * MIN
    assert service.scan(now).updated == ["a"]
    assert run_ids(client, "a") == sorted(run_id_for("a", T + h * HOUR) for h in fired)
    reg = registration(client, "a")
    assert (reg.next, skipped_ticks(reg)) == (T + 3 * HOUR + 30 * MIN, skipped)
    assert service.tick(now).fired == []


def test_a_broken_file_leaves_the_old_registration_in_place(client: Client, folder: Path) -> None:
    service = make_service(client, folder)
    path = write_flow(folder, "a")
    service.scan(T - 1)
    before = registration(client, "a")
    for broken in (
        "version: 1\nname: a\nsteps:\n  s: {run: echo, need: [x]}\n",  # schema
        "version: 1\nname: a\nschedule: {cron: '61 * * * *'}\nsteps:\n  s: {run: echo}\n",
        "version: 1\nname: a\n  steps: [\n",  # YAML
        "",
    ):
        path.write_text(broken)
        with assert_unchanged(client.redis, "ql:schedule*"):
            report = service.scan(T)
        assert list(report.invalid) == [str(path)]
        assert report.unregistered == []
    assert registration(client, "a").definition.hash == before.definition.hash
    # ...and it keeps firing the registered version.
    assert [f.tick for f in service.tick(T).fired] == [T]
    write_flow(folder, "a", steps=3)
    assert service.scan(T + 1).updated == ["a"]


def test_a_scan_told_to_stop_changes_nothing(client: Client, folder: Path) -> None:
    """Stopped before it read the folder, a scan neither registers what it did not judge nor
    unregisters what it did not see (the service stops at the next file: test_service_kill)."""
    service = make_service(client, folder)
    old = write_flow(folder, "a")
    service.scan(T - 1)
    old.unlink()
    write_flow(folder, "b")
    service.stop()
    with assert_unchanged(client.redis):
        report = service.scan(T)
    assert report.stopped
    assert (report.files, report.registered, report.unregistered) == (0, [], [])


def test_a_broken_file_is_reported_with_its_findings(client: Client, folder: Path) -> None:
    service = make_service(client, folder)
    path = folder / "x.yaml"
    path.write_text(
        "version: 1\nname: x\nschedule: {cron: '61 * * * *'}\nsteps:\n  s: {run: echo}\n"
    )
    message = service.scan(T).invalid[str(path)]
    assert f"{path}:3:" in message and "minute value 61 is out of range" in message


def test_a_file_too_large_for_its_schedule_is_a_finding_not_a_traceback(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file flows validate refuses for its size, and a scheduled one past what the engine
    registers (4 MiB): said as validate says it, its registration kept, no traceback logged."""
    service = make_service(client, folder)
    path = write_flow(folder, "a")
    service.scan(T - 1)
    before = registration(client, "a")
    text = path.read_text()
    padding = ("#" * 99 + "\n") * 45_000  # 4.5 MB of comments
    for content, said in (
        (text + padding * 3, f"{path}:1:1: error: the file is 13,500,"),
        (text + padding, f"{path}:4:1: error: the flow file is 4,500,"),
    ):
        path.write_text(content)
        caplog.clear()
        with (
            caplog.at_level(logging.INFO, logger="flows.scheduler"),
            assert_unchanged(client.redis, "ql:schedule*"),
        ):
            report = service.scan(T)
        assert said in report.invalid[str(path)], report.invalid
        assert "Traceback" not in caplog.text and "TooLarge" not in caplog.text, caplog.text
    assert registration(client, "a").definition.hash == before.definition.hash


def test_a_file_that_is_not_utf8_is_said_in_words(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = folder / "latin.yaml"
    path.write_bytes(b"version: 1\nname: latin\n# caf\xe9\n")
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        report = make_service(client, folder).scan(T)
    said = "not UTF-8 text (byte 28)"
    assert report.invalid == {str(path): f"{path}: cannot read: {said}"}
    assert [r.getMessage() for r in caplog.records] == [f"cannot read {path}: {said}"]


def test_a_file_with_a_byte_order_mark_is_registered_as_flows_run_reads_it(
    client: Client, folder: Path
) -> None:
    path = write_flow(folder, "a")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert make_service(client, folder).scan(T).registered == ["a"]
    assert registration(client, "a").definition.hash == read_flow_file(path).hash


def test_a_file_s_problem_is_logged_once_and_again_when_it_changes(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The long-running service scans every --scan-interval: a file that stays broken is
    logged at the scan that first sees it, not at every scan after."""
    service = make_service(client, folder)
    broken = folder / "x.yaml"
    bad_cron = "version: 1\nname: x\nschedule: {cron: '61 * * * *'}\nsteps:\n  s: {run: echo}\n"
    broken.write_text(bad_cron)
    write_flow(folder, "a", file="a.yaml")
    clash = write_flow(folder, "a", file="b.yaml")  # names the flow a.yaml schedules

    def logged(scans: int) -> dict[str, list[str]]:
        """What ``scans`` scans logged, by file."""
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="flows.scheduler"):
            for _ in range(scans):
                report = service.scan(T)
        assert set(report.invalid) == {str(broken), str(clash)}
        messages = [record.getMessage() for record in caplog.records]
        return {f: [m for m in messages if m.startswith(f)] for f in (str(broken), str(clash))}

    first = logged(3)
    assert len(first[str(broken)]) == 1 and len(first[str(clash)]) == 1
    assert "does not validate" in first[str(broken)][0]
    assert "minute value 61 is out of range" in first[str(broken)][0]
    assert "already scheduled by" in first[str(clash)][0]
    broken.write_text(bad_cron.replace("61 *", "0 25"))  # broken otherwise: said again
    [again] = logged(2)[str(broken)]
    assert "hour value 25 is out of range" in again
    broken.write_text(bad_cron.replace("61", "0"))  # mended, then broken as before
    clash.unlink()  # the clash is over
    service.scan(T)
    broken.write_text(bad_cron)
    write_flow(folder, "a", file="b.yaml")  # and back
    back = logged(2)
    assert len(back[str(broken)]) == 1 and len(back[str(clash)]) == 1


def test_a_service_that_reports_its_scans_itself_logs_no_file(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = make_service(client, folder, log_invalid=False)  # as `flows scheduler --once`
    broken = folder / "x.yaml"
    broken.write_text("version: 1\nname: x\nschedule: {cron: '61 * * * *'}\nsteps: {}\n")
    with caplog.at_level(logging.INFO, logger="flows.scheduler"):
        report = service.scan(T)
    assert list(report.invalid) == [str(broken)]
    assert [f.line for f in report.findings[str(broken)]] == [3, 4]  # type: ignore[attr-defined]
    assert caplog.records == []


def test_two_files_naming_one_flow(client: Client, folder: Path) -> None:
    service = make_service(client, folder)
    write_flow(folder, "a", file="z.yaml")
    service.scan(T - 1)
    write_flow(folder, "a", file="b.yaml", cron="0 * * * *")
    report = service.scan(T)
    # The file already registered keeps the name, though b.yaml sorts first.
    assert report.updated == [] and list(report.invalid) == [str(folder / "b.yaml")]
    assert "already scheduled by" in report.invalid[str(folder / "b.yaml")]
    assert registration(client, "a").definition.file == str(folder / "z.yaml")


def test_schedules_of_other_folders_are_left_alone(
    client: Client, folder: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    write_flow(other, "theirs")
    make_service(client, other).scan(T - 1)
    write_flow(folder, "ours")
    report = make_service(client, folder).scan(T - 1)
    assert (report.registered, report.unregistered) == (["ours"], [])
    assert sorted(r.name for r in Schedules(client).all()) == ["ours", "theirs"]


def test_services_sharing_a_folder_register_once(client: Client, folder: Path) -> None:
    write_flow(folder, "a")
    assert make_service(client, folder).scan(T - 1).registered == ["a"]
    with assert_unchanged(client.redis):
        second = make_service(client, folder).scan(T - 1)
    assert (second.registered, second.updated) == ([], [])
    assert run_ids(client, "a") == []
