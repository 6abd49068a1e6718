"""Bad arguments to the Python client: refused before any round trip (``scheduler.engine.limits``),
with the exception class the engine raises for the same input, and nothing changed in Redis.

Each case is a client call and the raw engine call it corresponds to: the client's error class
must equal the engine's, so a caller sees the same error whichever side catches it first.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from typing import Any

import pytest
from helpers import assert_unchanged

from scheduler.engine import limits
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError, InvalidArgument, TooLarge
from scheduler.engine.job import Job
from scheduler.engine.queue import NewJob

DATA = "{}"
PUT = ["w1", "q", "new-job", "tasks.a", DATA, 0]
DEEP = 10_000
MEGABYTE = "x" * (1024 * 1024)


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def put_args(**change: Any) -> list[Any]:
    """The raw ``put`` arguments with some replaced (by name) or options appended."""
    names = ["worker", "queue", "jid", "klass", "data", "delay"]
    args = list(PUT)
    options: list[Any] = []
    for name, value in change.items():
        if name in names:
            args[names.index(name)] = value
        else:
            options += [name, value]
    return args + options


Call = Callable[[Client, Job], Any]  # the client, and the job "running" fetched beforehand

# (id, client call, raw engine command and args, expected class)
CASES: list[tuple[str, Call, tuple[str, list[Any]], type[EngineError]]] = []


def put_case(
    case_id: str, raw: dict[str, Any], error: type[EngineError], queue: str = "q", **kwargs: Any
) -> None:
    def call(client: Client, running: Job) -> Any:
        options = {"jid": "new-job", **kwargs}
        klass = options.pop("klass", "tasks.a")
        data = options.pop("data", {})
        return client.queues[queue].put(klass, data, **options)

    CASES.append((f"put-{case_id}", call, ("put", put_args(**raw)), error))


put_case("jid-empty", {"jid": ""}, InvalidArgument, jid="")
put_case("jid-257", {"jid": "j" * 257}, TooLarge, jid="j" * 257)
put_case("jid-space", {"jid": "a b"}, InvalidArgument, jid="a b")
put_case("jid-newline", {"jid": "a\nb"}, InvalidArgument, jid="a\nb")
put_case("jid-tab", {"jid": "a\tb"}, InvalidArgument, jid="a\tb")
put_case("jid-nul", {"jid": "a\x00b"}, InvalidArgument, jid="a\x00b")
put_case("jid-del", {"jid": "a\x7fb"}, InvalidArgument, jid="a\x7fb")
put_case("jid-history", {"jid": "x-history"}, InvalidArgument, jid="x-history")
put_case("jid-dependents", {"jid": "x-dependents"}, InvalidArgument, jid="x-dependents")
put_case("jid-dependencies", {"jid": "x-dependencies"}, InvalidArgument, jid="x-dependencies")
put_case("queue-space", {"queue": "a b"}, InvalidArgument, queue="a b")
put_case("queue-empty", {"queue": ""}, InvalidArgument, queue="")
put_case("queue-257", {"queue": "q" * 257}, TooLarge, queue="q" * 257)
put_case("klass-space", {"klass": "tasks a"}, InvalidArgument, klass="tasks a")
put_case("klass-empty", {"klass": ""}, InvalidArgument, klass="")
put_case("delay-negative", {"delay": "-1"}, InvalidArgument, delay=-1)
put_case("delay-nan", {"delay": "nan"}, InvalidArgument, delay=math.nan)
put_case("delay-inf", {"delay": "inf"}, InvalidArgument, delay=math.inf)
put_case("delay-minus-inf", {"delay": "-inf"}, InvalidArgument, delay=-math.inf)
put_case("delay-text", {"delay": "soon"}, InvalidArgument, delay="soon")
put_case("priority-fraction", {"priority": "1.5"}, InvalidArgument, priority=1.5)
put_case("priority-big", {"priority": "1000001"}, InvalidArgument, priority=1_000_001)
put_case("priority-small", {"priority": "-1000001"}, InvalidArgument, priority=-1_000_001)
put_case("priority-nan", {"priority": "nan"}, InvalidArgument, priority=math.nan)
put_case("priority-inf", {"priority": "inf"}, InvalidArgument, priority=math.inf)
put_case("priority-text", {"priority": "high"}, InvalidArgument, priority="high")
put_case("retries-negative", {"retries": "-1"}, InvalidArgument, retries=-1)
put_case("retries-big", {"retries": "100001"}, InvalidArgument, retries=100_001)
put_case(
    "tags-65",
    {"tags": json.dumps([f"t{i}" for i in range(65)])},
    TooLarge,
    tags=[f"t{i}" for i in range(65)],
)
put_case("tag-space", {"tags": '["a b"]'}, InvalidArgument, tags=["a b"])
put_case("tag-empty", {"tags": '[""]'}, InvalidArgument, tags=[""])
put_case("tag-257", {"tags": json.dumps(["t" * 257])}, TooLarge, tags=["t" * 257])
put_case("depends-separator", {"depends": '["a b"]'}, InvalidArgument, depends=["a b"])
put_case("depends-history", {"depends": '["x-history"]'}, InvalidArgument, depends=["x-history"])
put_case("data-list", {"data": "[1, 2]"}, InvalidArgument, data=[1, 2])
put_case("data-not-json", {"data": "{x}"}, InvalidArgument, data={"x": object()})
put_case("data-bytes", {"data": "{x}"}, InvalidArgument, data={"x": b"raw"})
put_case("data-megabyte", {"data": json.dumps({"x": MEGABYTE})}, TooLarge, data={"x": MEGABYTE})
put_case(
    "data-nested-10000",
    {"data": '{"a":' * DEEP + "1" + "}" * DEEP},
    InvalidArgument,
    data=deep(DEEP),
)
put_case(
    "data-nested-1001",
    {"data": '{"a":' * 1001 + "1" + "}" * 1001},
    InvalidArgument,
    data=deep(1001),
)


def complete_case(case_id: str, result: Any, raw: str, error: type[EngineError]) -> None:
    def call(client: Client, running: Job) -> Any:
        return running.complete(result=result)

    CASES.append(
        (
            f"complete-{case_id}",
            call,
            ("complete", ["running", "w1", "q", '{"n":2}', "result", raw]),
            error,
        )
    )


complete_case("result-object", object(), "{x}", InvalidArgument)
complete_case("result-megabyte", MEGABYTE, json.dumps(MEGABYTE), TooLarge)
complete_case("result-nested-10000", deep(DEEP), "[" * DEEP + "]" * DEEP, InvalidArgument)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_client_refuses_before_the_round_trip_with_the_engines_error(
    case: tuple[str, Call, tuple[str, list[Any]], type[EngineError]],
    populated: Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, call, (command, raw), error = case
    # The engine's own verdict on the same input, sent as it is.
    with assert_unchanged(populated.redis), pytest.raises(EngineError) as by_engine:
        populated.engine.call(command, *raw)
    assert type(by_engine.value) is error, by_engine.value

    def no_round_trip(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the client sent a call the limits should have refused")

    running = populated.jobs["running"]  # fetched before round trips are forbidden
    monkeypatch.setattr(populated.engine, "_send_once", no_round_trip)
    with assert_unchanged(populated.redis), pytest.raises(EngineError) as by_client:
        call(populated, running)
    assert type(by_client.value) is error, by_client.value
    message = str(by_client.value)
    assert len(message) < 400 and "()" in message, message


def test_the_limits_match_the_engine_at_the_boundary(populated: Client) -> None:
    """Exactly at each limit both accept; one past it both refuse (same class)."""
    queue = populated.queues["q"]
    at_limit = [
        {"jid": "j" * limits.MAX_ID_BYTES},
        {"jid": "ok-1", "priority": limits.MAX_PRIORITY},
        {"jid": "ok-2", "priority": -limits.MAX_PRIORITY},
        {"jid": "ok-3", "tags": [f"t{i}" for i in range(limits.MAX_TAGS)]},
        {"jid": "ok-4", "data": deep(limits.MAX_JSON_DEPTH)},
        {"jid": "ok-5", "data": {"x": "x" * (limits.MAX_PAYLOAD_BYTES - 8)}},
        {"jid": "é" * 128},  # 256 bytes of UTF-8
        {"jid": "nb\u00a0sp"},  # only ASCII white space is refused, on both sides
    ]
    for options in at_limit:
        data = options.pop("data", {})
        assert queue.put("tasks.a", data, **options)
    with pytest.raises(TooLarge):
        queue.put("tasks.a", {}, jid="é" * 128 + "x")
    with pytest.raises(TooLarge):
        queue.put("tasks.a", {"x": "x" * (limits.MAX_PAYLOAD_BYTES - 7)}, jid="big")
    with pytest.raises(TooLarge), assert_unchanged(populated.redis):
        populated.engine.call("put", *put_args(jid="é" * 128 + "x"))
    # JSON depth: both take data MAX_JSON_DEPTH levels deep and refuse one level more.
    depth = limits.MAX_JSON_DEPTH
    text = '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    assert populated.engine.call("put", *put_args(jid="deep-ok", data=text)) == "deep-ok"
    deeper = '{"a":' + text + "}"
    with pytest.raises(InvalidArgument), assert_unchanged(populated.redis):
        populated.engine.call("put", *put_args(jid="deep-no", data=deeper))
    with pytest.raises(InvalidArgument), assert_unchanged(populated.redis):
        queue.put("tasks.a", deep(depth + 1), jid="deep-no")


NAN_PAYLOADS = {
    "nan": ({"x": math.nan}, '{"x": NaN}'),
    "infinity": ({"x": math.inf}, '{"x": Infinity}'),
    "minus-infinity": ({"x": [-math.inf]}, '{"x": [-Infinity]}'),
}


@pytest.mark.parametrize("name", list(NAN_PAYLOADS))
def test_nan_and_infinities_in_a_payload_are_refused_by_the_client(
    name: str, populated: Client
) -> None:
    """NaN and infinities are not JSON (RFC 8259): the client refuses them before sending."""
    value, _ = NAN_PAYLOADS[name]
    with assert_unchanged(populated.redis), pytest.raises(InvalidArgument, match="not valid JSON"):
        populated.queues["q"].put("tasks.a", value, jid="nan-job")
    running = populated.jobs["running"]
    with assert_unchanged(populated.redis), pytest.raises(InvalidArgument, match="not valid JSON"):
        running.complete(result=value)


@pytest.mark.parametrize("name", list(NAN_PAYLOADS))
def test_nan_and_infinities_in_a_payload_are_refused_by_the_engine(
    name: str, populated: Client
) -> None:
    _, text = NAN_PAYLOADS[name]
    with assert_unchanged(populated.redis), pytest.raises(InvalidArgument):
        populated.engine.call("put", *put_args(jid="nan-job", data=text))


def test_an_integer_past_what_json_readers_hold_is_refused_by_the_client_naming_where(
    populated: Client,
) -> None:
    """An integer past a double's range is JSON text Python writes, but every reader (the
    engine's too) reads infinity: the client refuses it, in data and results alike, naming
    where it is and why, not the engine's "NaN and Infinity are not JSON numbers". The
    largest integer a double holds goes through, and reads back as that double."""
    past = "past what JSON readers hold (a double: about 1.8e308 either way"
    running = populated.jobs["running"]
    cases = [
        ({"n": {"list": [1, 10**400]}}, 'Arg "data" at n.list[1]: an integer of the order of'),
        ({"odd key": -(10**5000)}, 'Arg "data" at ["odd key"]: an integer of the order of -1e5000'),
    ]
    for value, words in cases:
        with assert_unchanged(populated.redis), pytest.raises(InvalidArgument) as refused:
            populated.queues["q"].put("tasks.a", value, jid="big-job")
        assert str(refused.value).startswith(f"Put(): {words}")
        assert past in str(refused.value)
    with assert_unchanged(populated.redis), pytest.raises(InvalidArgument) as refused:
        running.complete(result=10**400)
    assert str(refused.value).startswith(
        f'Complete(): Arg "result": an integer of the order of 1e400, {past}'
    )
    largest = int(sys.float_info.max)
    jid = populated.queues["q"].put("tasks.a", {"n": largest, "digits": "9" * 400})
    assert populated.jobs[jid].data == {"n": sys.float_info.max, "digits": "9" * 400}


def test_a_flow_submission_over_the_limits_is_refused_before_the_round_trip(
    populated: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.expand.jobs import JobSpec
    from flows.runs.build import assemble_run
    from flows.runs.submit import submit

    def request(jid: str, data: dict[str, Any]) -> JobSpec:
        return JobSpec(
            jid=jid,
            queue="q",
            klass="tasks.a",
            data=data,
            priority=0,
            tags=(),
            retries=0,
            depends=(),
            delay=0,
            trigger="all_success",
            step="a",
            index=None,
            concurrency_key=None,
            concurrency_limit=None,
        )

    monkeypatch.setattr(populated.engine, "_send_once", lambda *a, **k: pytest.fail("round trip"))
    with assert_unchanged(populated.redis):
        with pytest.raises(TooLarge, match="job r:a"):
            submit(populated, assemble_run("r", "f", [request("r:a", {"x": MEGABYTE})], params={}))
        with pytest.raises(TooLarge, match="100001 jobs"):
            submit(
                populated,
                assemble_run("r", "f", [request(f"r:{i}", {}) for i in range(100_001)], params={}),
            )
        with pytest.raises(InvalidArgument, match="reserved"):
            submit(populated, assemble_run("r", "f", [request("r-history", {})], params={}))


# Data JSON would not give back as it was, and ids that are not text: refused by the client,
# since the engine only ever sees the encoded text.
UNFAITHFUL: dict[str, tuple[dict[str, Any], str]] = {
    "colliding-keys": (
        {"data": {1: "a", "1": "b"}},
        r"""Put\(\): Arg "data" has a key that is not a string: 1 \(int\)""",
    ),
    "int-key": ({"data": {"a": [{2: "x"}]}}, r'Arg "data" has a key that is not a string: 2'),
    "none-key": ({"data": {None: 1}}, r'Arg "data" has a key that is not a string: None'),
    "surrogate-value": (
        {"data": {"a": ["x\udcff"]}},
        r'Put\(\): Arg "data" is not valid UTF-8 text \(it holds a lone surrogate\)',
    ),
    "surrogate-key": ({"data": {"k\ud800": 1}}, r'Arg "data" is not valid UTF-8 text'),
    "bytes-klass": ({"klass": b"\xff\xfe.bad"}, r'Put\(\): Arg "klass" is not text: bytes'),
    "surrogate-klass": (
        {"klass": "bad\udcff.mod"},
        r'Put\(\): Arg "klass" is not valid UTF-8 text \(it holds a lone surrogate\)',
    ),
    "int-klass": ({"klass": 7}, r'Put\(\): Arg "klass" is not text: int'),
    "bytes-jid": ({"jid": b"\xff\xfe"}, r'Put\(\): Arg "jid" is not text: bytes'),
}


@pytest.mark.parametrize("name", list(UNFAITHFUL))
def test_data_json_would_change_and_ids_that_are_not_text_are_refused(
    populated: Client, name: str
) -> None:
    given, message = UNFAITHFUL[name]
    call = {"klass": "tasks.a", "data": {}, **given}
    with assert_unchanged(populated.redis), pytest.raises(InvalidArgument, match=message):
        populated.queues["q"].put(call.pop("klass"), call.pop("data"), **call)


def test_text_outside_the_basic_plane_still_round_trips(populated: Client) -> None:
    """Surrogate pairs in the JSON text (an emoji) are fine: only a lone surrogate is refused."""
    jid = populated.queues["q"].put("tasks.a", {"emoji": "😀", "ü": ["\U0001f600"]})
    assert populated.jobs[jid].data == {"emoji": "😀", "ü": ["\U0001f600"]}


def untyped(value: Any) -> Any:
    """``value`` as a caller without type checking gives it."""
    return value


# Values of the wrong shape, each of which reached the user as a TypeError, ValueError or
# AttributeError from inside redis-py or the client, or (a text where a list belongs) was
# taken as the list of its characters: `tags="urgent"` tagged the job u, r, g, e, n, t.
WRONG_SHAPES: dict[str, tuple[Call, str]] = {
    "put-tags-text": (
        lambda c, _: c.queues["q"].put("tasks.a", {}, tags="urgent"),
        r"""^Put\(\): Arg "tags" is one text, not a list: 'urgent' \(give \['urgent'\]\)$""",
    ),
    "put-depends-text": (
        lambda c, _: c.queues["q"].put("tasks.a", {}, depends="waiting"),
        r'^Put\(\): Arg "depends" is one text, not a list',
    ),
    "put-tags-number": (
        lambda c, _: c.queues["q"].put("tasks.a", {}, tags=untyped(5)),
        r'^Put\(\): Arg "tags" is not a list: int$',
    ),
    "put-many-tags-text": (
        lambda c, _: c.queues["q"].put_many([NewJob("tasks.a")], tags="urgent"),
        r'^PutMany\(\): Arg "tags" is one text',
    ),
    "recur-tags-text": (
        lambda c, _: c.queues["q"].recur("tasks.a", {}, 60, tags="urgent"),
        r'^Recur\(\): Arg "tags" is one text',
    ),
    "put-many-not-a-new-job": (
        lambda c, _: c.queues["q"].put_many([NewJob("tasks.a"), untyped({"klass": "tasks.a"})]),
        r"^PutMany jobs\[2\]\(\): not a NewJob: dict",
    ),
    # Job.fail's were named by their place in the engine call ("argument 4").
    "fail-message-none": (
        lambda _, job: job.fail("boom", untyped(None)),
        r'^Fail\(\): Arg "message" is not text: NoneType$',
    ),
    "fail-message-an-exception": (
        lambda _, job: job.fail("boom", untyped(ValueError("x"))),
        r'^Fail\(\): Arg "message" is not text: ValueError$',
    ),
    "fail-group-none": (
        lambda _, job: job.fail(untyped(None), "m"),
        r'^Fail\(\): Arg "group" missing$',
    ),
    "fail-message-lone-surrogate": (
        lambda _, job: job.fail("boom", "cannot read /data/\udcff.csv"),
        r'^Fail\(\): Arg "message" is not valid UTF-8 text \(it holds a lone surrogate\): '
        r"'cannot read /data/\\udcff.csv'$",
    ),
    "config-set-none": (
        lambda c, _: c.config.__setitem__("heartbeat", untyped(None)),
        r'^ConfigSet\(\): Arg "value" missing$',
    ),
    "config-set-list": (
        lambda c, _: c.config.__setitem__("heartbeat", untyped([30])),
        r'^ConfigSet\(\): Arg "value" is not text or a number: list$',
    ),
    "now-none": (
        lambda c, _: c.queues["q"].peek(1, now=untyped(None)),
        r"^Peek\(\): now is not text or a number: NoneType",
    ),
    "log-data-list": (
        lambda _, job: job.log("note", untyped([1])),
        r'^Log\(\): Arg "data" is not a JSON object: list$',
    ),
    "heartbeat-data-text": (
        lambda _, job: job.heartbeat(untyped("x")),
        r'^Heartbeat\(\): Arg "data" is not a JSON object: str$',
    ),
    "fail-data-set": (
        lambda _, job: job.fail("boom", "m", data={"a": {1}}),
        r'^Fail\(\): Arg "data" is not valid JSON',
    ),
    # Was taken as the list of its characters: the job moved on, depending on jobs w, a, ...
    "complete-depends-text": (
        lambda _, job: job.complete("q", depends="waiting"),
        r"""^Complete\(\): Arg "depends" is one text, not a list: 'waiting' """
        r"""\(give \['waiting'\]\)$""",
    ),
    "complete-next-number": (
        lambda _, job: job.complete(untyped(5)),
        r'^Complete\(\): Arg "next" is not text: int$',
    ),
    # Were the engine's "argument 1 is not text or a number": a list given where the jids are
    # separate arguments, a None where an id is expected.
    "cancel-list": (
        lambda c, _: c.jobs.cancel(untyped(["waiting", "running"])),
        r'^Cancel\(\): Arg "jids\[1\]" is a list, not one of the jids: give them as separate'
        r" arguments \(cancel\(\*jids\)\)$",
    ),
    "multiget-list": (
        lambda c, _: c.jobs.multiget(untyped(["waiting"])),
        r'^Multiget\(\): Arg "jids\[1\]" is a list, not one of the jids: .*\(multiget\(\*jids\)\)$',
    ),
    "multiget-none": (
        lambda c, _: c.jobs.multiget("waiting", untyped(None)),
        r'^Multiget\(\): Arg "jids\[2\]" missing$',
    ),
    "kick-tuple": (
        lambda c, _: c.jobs.kick(untyped(("waiting",))),
        r'^KickJobs\(\): Arg "jids\[1\]" is a tuple, not one of the jids: .*\(kick\(\*jids\)\)$',
    ),
    "delete-list": (
        lambda c, _: c.jobs.delete(untyped(["waiting"])),
        r'^Delete\(\): Arg "jids\[1\]" is a list, not one of the jids',
    ),
    "get-none": (
        lambda c, _: c.jobs.get(untyped(None)),
        r'^Get\(\): Arg "jid" missing$',
    ),
    "unfail-queue-none": (
        lambda c, _: c.unfail(untyped(None), "boom"),
        r'^Unfail\(\): Arg "queue" missing$',
    ),
    "unfail-count-text": (
        lambda c, _: c.unfail("q", "boom", untyped("5")),
        r"""^Unfail\(\): Arg "count" is not a finite number: '5'$""",
    ),
    "tagged-none": (
        lambda c, _: c.jobs.tagged(untyped(None)),
        r'^Tag\(\): Arg "tag" missing$',
    ),
    "tag-list": (
        lambda _, job: job.tag(untyped(["a", "b"])),
        r'^Tag\(\): Arg "tags\[1\]" is a list, not one of the tags: .*\(tag\(\*tags\)\)$',
    ),
    "depend-list": (
        lambda c, _: c.jobs["waiting"].depend(untyped(["running"])),
        r'^Depends\(\): Arg "jids\[1\]" is a list, not one of the jids',
    ),
    # Were the engine's "argument 1 is not text or a number: list", not saying how to call.
    "dropped-list": (
        lambda c, _: c.jobs.dropped(untyped(["boom", "other"])),
        r'^FailedDropped\(\): Arg "groups\[1\]" is a list, not one of the groups: give them as'
        r" separate arguments \(dropped\(\*groups\)\)$",
    ),
    "deregister-workers-list": (
        lambda c, _: c.deregister_workers(untyped(["w1"])),
        r'^WorkerDeregister\(\): Arg "names\[1\]" is a list, .*\(deregister_workers\(\*names\)\)$',
    ),
    "throttles-info-list": (
        lambda c, _: c.throttles.info(untyped(("api",))),
        r'^ThrottleGet\(\): Arg "names\[1\]" is a tuple, .*\(info\(\*names\)\)$',
    ),
    "queues-load-list": (
        lambda c, _: c.queues.load(untyped(["q"])),
        r'^QueueCounts\(\): Arg "names\[1\]" is a list, .*\(load\(\*names\)\)$',
    ),
    "queues-documents-list": (
        lambda c, _: c.queues.documents(untyped(["q"])),
        r'^QueueCounts\(\): Arg "names\[1\]" is a list, .*\(documents\(\*names\)\)$',
    ),
    # Was a TypeError from comparing the text with 0, after the engine had taken it.
    "touch-increment-text": (
        lambda _, job: job.touch(untyped("5")),
        r"""^Touch\(\): Arg "increment" is not a finite number: '5'$""",
    ),
}


@pytest.mark.parametrize("name", list(WRONG_SHAPES))
def test_a_value_of_the_wrong_shape_is_an_invalid_argument_naming_the_call(
    populated: Client, name: str
) -> None:
    call, message = WRONG_SHAPES[name]
    running = populated.jobs["running"]
    with assert_unchanged(populated.redis), pytest.raises(InvalidArgument, match=message):
        call(populated, running)


def _nested_function() -> Callable[[Any], Any]:
    def send(job: Any) -> None:
        return None

    return send


# A klass given as a function a worker cannot import by its dotted path: was put, and every
# run of the job then failed in import-error.
UNIMPORTABLE_KLASSES: dict[str, Callable[[Client, Any], Any]] = {
    "put": lambda c, klass: c.queues["q"].put(klass, {}),
    "put-many": lambda c, klass: c.queues["q"].put_many([NewJob(klass)]),
    "recur": lambda c, klass: c.queues["q"].recur(klass, {}, 60),
}


@pytest.mark.parametrize("name", list(UNIMPORTABLE_KLASSES))
@pytest.mark.parametrize("klass", [lambda job: None, _nested_function()], ids=["lambda", "nested"])
def test_a_function_no_worker_can_import_is_refused_as_a_klass(
    populated: Client, name: str, klass: Callable[[Any], Any]
) -> None:
    call = UNIMPORTABLE_KLASSES[name]
    with assert_unchanged(populated.redis), pytest.raises(InvalidArgument) as refused:
        call(populated, klass)
    message = str(refused.value)
    assert 'Arg "klass"' in message and klass.__qualname__ in message, message
    assert "define it at the top level of a module" in message, message


@pytest.mark.parametrize("method", ["tag", "untag"])
def test_a_recurring_jobs_tags_given_as_a_list_are_refused_saying_how_to_call(
    client: Client, method: str
) -> None:
    """Was the engine's "argument 1 is not text or a number: list"."""
    jid = client.queues["q"].recur("tasks.a", {}, 60, tags=["a"])
    recurring = client.jobs.recurring(jid)
    with assert_unchanged(client.redis), pytest.raises(InvalidArgument) as refused:
        getattr(recurring, method)(untyped(["a", "b"]))
    assert str(refused.value).endswith(
        f'Arg "tags[1]" is a list, not one of the tags: give them as separate arguments'
        f" ({method}(*tags))"
    ), str(refused.value)
