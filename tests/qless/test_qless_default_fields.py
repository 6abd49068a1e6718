"""The qless dialect reads a job whose hash leaves out the fields at their default (lua/README.md,
key layout) as qless-core writes them all."""

from __future__ import annotations

import redis
from qless_support import Qless

DEFAULTS = {"priority": 0, "tags": {}, "worker": "", "expires": 0, "retries": 5, "remaining": 5}


def test_a_qless_put_stores_no_default_and_get_shows_them(
    qless: Qless, redis_client: redis.Redis
) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    # A job put waiting stores no state either (lua/README.md, key layout).
    assert set(redis_client.hkeys("ql:j:jid")) == {"klass", "data", "queue", "created"}
    job = qless.job("jid")
    assert {name: job[name] for name in DEFAULTS} == DEFAULTS
    [popped] = qless("pop", 1, "queue", "worker", 1)
    assert (popped["worker"], popped["retries"], popped["remaining"]) == ("worker", 5, 5)
    assert qless("retry", 2, "jid", "queue", "worker", 0) == 4
    assert qless.job("jid")["remaining"] == 4
