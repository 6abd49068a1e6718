"""One table of worker settings (scheduler/worker/settings.py): a child's command line reads back
as the settings it was written from, ``flows worker`` offers the same options with the same
defaults and help, and a refused value names its setting."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import sys
import typing

import click
import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from flows.cli.worker import DEFAULTS, worker
from scheduler.engine.client import Client
from scheduler.engine.limits import id_fault
from scheduler.worker.fetching import Strategy
from scheduler.worker.pool import MAX_PROCESSES, WorkerPool
from scheduler.worker.settings import OVERRIDES, SettingError, WorkerSettings, overridden, table
from scheduler.worker.worker import Worker

BY_NAME = {each.name: each for each in table()}

# What a command line can carry: no NUL, no lone surrogates.
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
# A queue (or worker) name the engine takes: no white space or control character, at most 256
# bytes.
queue = (
    text.map(lambda name: name.replace(",", "").strip())
    .filter(bool)
    .filter(lambda name: id_fault(name) is None)
)
# A hook as module:function (whether it imports is found when a worker starts).
hook = st.builds(
    "{}:{}".format, text.map(lambda m: m.replace(":", "")).filter(bool), text.filter(bool)
)


@st.composite
def settings(draw: st.DrawFn) -> WorkerSettings:
    finite = {"allow_nan": False, "allow_infinity": False}
    return WorkerSettings(
        queues=tuple(draw(st.lists(queue, min_size=1, max_size=4))),
        strategy=draw(st.sampled_from(BY_NAME["strategy"].choices)),
        threads=draw(st.integers(1, 10**6)),
        prefetch=draw(st.integers(0, 10**6)),
        burst=draw(st.booleans()),
        name=draw(st.none() | st.just("") | queue),  # a name the engine takes, as a queue's
        shutdown_grace=draw(st.floats(min_value=0, **finite)),
        prepare=draw(st.none() | st.just("") | hook),
        paths=tuple(draw(st.lists(text, max_size=3))),
        log_level=draw(st.sampled_from(sorted(logging.getLevelNamesMapping()))),
        poll_interval=draw(st.floats(min_value=0, exclude_min=True, **finite)),
        exit_on_stuck=draw(st.booleans()),
    )


@given(settings())
@example(WorkerSettings(queues=("q",)))
@example(WorkerSettings(queues=("-q", "--x"), name="-n", paths=("-p", "a=b", ""), prepare=""))
@example(WorkerSettings(queues=("q",), shutdown_grace=1e-300, poll_interval=5e-324))
def test_a_command_line_reads_back_as_the_settings_it_was_written_from(
    written: WorkerSettings,
) -> None:
    assert WorkerSettings.from_argv(written.to_argv()) == written


def test_only_values_off_their_default_are_written() -> None:
    assert WorkerSettings(queues=["a", "b"]).to_argv() == ["--queues=a,b"]
    assert WorkerSettings(queues=["q"], burst=True, threads=4).to_argv() == [
        "--queues=q",
        "--threads=4",
        "--burst",
    ]


def test_the_command_lines_written_before_the_table_still_read() -> None:
    argv = "-q a,b --threads 3 --prefetch 8 --strategy round-robin --shutdown-grace 2.5"
    argv += " --poll-interval 0.1 --log-level warning --exit-on-stuck --burst --name w.1"
    argv += " --prepare m:f --path /x --path /y"
    assert WorkerSettings.from_argv(argv.split()) == WorkerSettings(
        queues=("a", "b"),
        threads=3,
        prefetch=8,
        strategy="round-robin",
        shutdown_grace=2.5,
        poll_interval=0.1,
        log_level="WARNING",
        exit_on_stuck=True,
        burst=True,
        name="w.1",
        prepare="m:f",
        paths=("/x", "/y"),
    )
    assert WorkerSettings.from_argv(["-q", " a, ,b "]).queues == ("a", "b")


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("queues", (), "at least one queue"),
        ("queues", ("a,b",), "'a,b' is not a name"),
        ("queues", (" a",), "' a' is not a name"),
        ("queues", "etl", "not a list"),
        ("queues", ("q", "a b"), "a queue name contains white space or a control character"),
        ("queues", ("q" * 257,), "a queue name is 257 bytes, more than the limit of 256"),
        ("threads", 0, "0 is not at least 1"),
        ("threads", 1.5, "not a whole number"),
        ("prefetch", -1, "-1 is not at least 0"),
        ("strategy", "random", "'random' is not one of ordered, round-robin"),
        ("shutdown_grace", float("nan"), "not a finite number"),
        ("shutdown_grace", -0.5, "-0.5 is not at least 0"),
        ("poll_interval", 0, "0 is not more than 0"),
        ("log_level", "loud", "'loud' is not a log level"),
        ("burst", "yes", "not true or false"),
        ("name", 7, "not text"),
        ("name", "my worker", "worker name 'my worker' contains white space"),
        ("prepare", "hooks", "'hooks' is not of the form module:function"),
        ("prepare", ":prepare", "':prepare' is not of the form module:function"),
    ],
)
def test_a_refused_value_names_its_setting(field: str, value: object, says: str) -> None:
    values: dict[str, object] = {"queues": ("q",), field: value}
    with pytest.raises(SettingError) as refused:
        WorkerSettings(**values)  # type: ignore[arg-type]
    assert refused.value.setting.name == field
    assert says in str(refused.value)
    assert str(refused.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["-q", ","], "argument -q/--queues: give at least one queue"),
        (["-q", "q", "--threads", "x"], "argument --threads: 'x' is not a whole number"),
        (["-q", "q", "--poll-interval", "0"], "argument --poll-interval: 0.0 is not more than 0"),
        (["-q", "q", "--strategy", "random"], "argument --strategy: 'random' is not one of"),
        (["--threads", "2"], "the following arguments are required: -q/--queues"),
    ],
)
def test_a_bad_child_command_line_exits_2_naming_the_option(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        WorkerSettings.from_argv(argv)
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def test_every_field_is_in_the_table_and_the_strategies_are_the_workers() -> None:
    assert [each.name for each in table()] == [f.name for f in dataclasses.fields(WorkerSettings)]
    assert BY_NAME["strategy"].choices == typing.get_args(Strategy)
    worker_keywords = inspect.signature(Worker).parameters
    assert set(WorkerSettings(queues=["q"]).worker_options()) <= set(worker_keywords)


def test_the_pool_writes_each_childs_command_line_from_its_settings(tmp_path: object) -> None:
    given = WorkerSettings(queues=("a",), name="w", threads=2, paths=("lib",), log_level="DEBUG")
    pool = WorkerPool("redis://127.0.0.1:1", given, processes=2)
    command = pool._command(1)
    assert command[:3] == [sys.executable, "-m", "scheduler.worker"]
    assert WorkerSettings.from_argv(command[3:]) == dataclasses.replace(
        given, name="w.1", exit_on_stuck=True, paths=(os.path.abspath("lib"),)
    )
    alone = WorkerPool("redis://127.0.0.1:1", given, processes=1)._command(0)
    assert WorkerSettings.from_argv(alone[3:]).name == "w"


def test_a_pool_refuses_a_name_its_processes_suffix_makes_too_long() -> None:
    """Before any process starts, not by the engine as each registers ("w" * 254 + ".10")."""
    near = "w" * 254
    assert WorkerPool("redis://127.0.0.1:1", ["q"], name=near, processes=10)._command(9)
    assert WorkerPool("redis://127.0.0.1:1", ["q"], name="w" * 256, processes=1)._command(0)
    with pytest.raises(SettingError) as refused:
        WorkerPool("redis://127.0.0.1:1", ["q"], name=near, processes=11)
    assert str(refused.value) == (
        "name: worker name is 257 bytes, more than the limit of 256 bytes "
        "(with the '.10' the last of 11 processes adds)"
    )


def test_the_pool_still_takes_queues_and_settings_as_keywords() -> None:
    pool = WorkerPool("redis://127.0.0.1:1", ["q"], processes=2, threads=3, burst=True)
    assert pool.settings == WorkerSettings(queues=("q",), threads=3, burst=True)
    with pytest.raises(SettingError, match=r"^threads: "):
        WorkerPool("redis://127.0.0.1:1", ["q"], threads=0)
    with pytest.raises(TypeError, match="threads"):
        WorkerPool("redis://127.0.0.1:1", WorkerSettings(queues=("q",)), threads=3)


def test_flows_worker_offers_the_tables_settings_with_their_defaults_and_help() -> None:
    options = {param.name: param for param in worker.params if isinstance(param, click.Option)}
    offered = [each for each in table() if each.cli]
    assert offered and all(not each.cli for each in table() if each.name not in options)
    for each in offered:
        option = options[each.name]
        assert (tuple(option.opts), option.help, option.hidden) == (
            each.flags,
            each.help,
            each.hidden,
        )
        if not each.required:
            assert option.default == DEFAULTS.get(each.name, each.default), each.name
    page = " ".join(CliRunner().invoke(worker, ["--help"]).output.split())
    for each in offered:
        assert (each.flag in page) is not each.hidden
        if not each.hidden:
            assert each.help in page
    assert "--poll-interval" not in page and "--exit-on-stuck" not in page


def test_a_worker_takes_its_settings_and_keywords_override_them_without_defaults_of_their_own() -> (
    None
):
    keywords = inspect.signature(Worker).parameters
    overrides = set(keywords) - {"client", "queues", "settings", "prepare", "sandbox_root"}
    assert overrides == OVERRIDES
    assert all(keywords[name].default is None for name in overrides)  # the settings' defaults
    given = WorkerSettings(queues=("a",), threads=3)
    assert overridden(given, (), {"threads": None}) is given
    assert overridden(given, ["b"], {"burst": True}) == dataclasses.replace(
        given, queues=("b",), burst=True
    )
    assert overridden(None, ["q"], {"lease_seconds": 0.0}) == WorkerSettings(
        queues=("q",), lease_seconds=0.0
    )
    with pytest.raises(SettingError, match=r"^threads: "):
        overridden(given, (), {"threads": 0})
    with pytest.raises(ValueError, match="at least one queue"):
        overridden(None, (), {})


def test_a_setting_on_by_default_is_turned_off_on_a_command_line() -> None:
    quiet = WorkerSettings(queues=("q",), capture_logs=False, kill_after=2.5)
    argv = quiet.to_argv()
    assert "--no-capture-logs" in argv and "--kill-after=2.5" in argv
    assert WorkerSettings.from_argv(argv) == quiet
    assert WorkerSettings.from_argv(["-q", "q"]).capture_logs is True


def test_a_pool_keeps_at_most_max_processes() -> None:
    """A typo (10000 for 10) must not fork until the machine stalls."""
    assert WorkerPool("redis://127.0.0.1:1", ["q"], processes=MAX_PROCESSES).processes == 1024
    with pytest.raises(ValueError, match="processes: 1025 is more than 1024"):
        WorkerPool("redis://127.0.0.1:1", ["q"], processes=MAX_PROCESSES + 1)


def test_one_queue_given_as_text_is_refused_not_split_into_letters() -> None:
    # WorkerSettings refused queues="etl", but Worker and WorkerPool made it ("e", "t", "l"):
    # a worker that listened on three queues nobody uses.
    client = Client("redis://127.0.0.1:1")  # never contacted: refused before
    untyped: typing.Any = "etl"
    for make in (
        lambda: Worker(client, untyped),
        lambda: WorkerPool("redis://127.0.0.1:1", untyped),
        lambda: overridden(None, untyped, {}),
    ):
        with pytest.raises(
            SettingError, match=r"^queues: 'etl' is one text, not a list \(give \['etl'\]\)$"
        ):
            make()


def test_a_pool_given_a_client_or_nothing_instead_of_a_url_says_so() -> None:
    # Taken as the URL: the pool failed at run() with a TypeError from inside the connection
    # code (or, for a Client, from the environment of the processes it started).
    for untyped, kind in ((Client("redis://127.0.0.1:1"), "Client"), (None, "NoneType")):
        with pytest.raises(
            TypeError,
            match=rf"^WorkerPool\(\): url must be a Redis URL \(text\), not {kind} "
            r"\(a Client is Worker's first argument\)$",
        ):
            WorkerPool(typing.cast(typing.Any, untyped), ["etl"])


def test_a_worker_given_a_url_instead_of_a_client_says_so() -> None:
    untyped: typing.Any = "redis://127.0.0.1:1"
    with pytest.raises(TypeError, match=r"^Worker\(\): client must be a scheduler.Client, not str"):
        Worker(untyped, ["etl"])
