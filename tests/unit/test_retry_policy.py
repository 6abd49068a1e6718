"""The delay before a retry, as a job's retry options (a flow step's ``retry:``) ask."""

from __future__ import annotations

import pytest

from scheduler.worker.outcomes import RetryPolicy


def policy(**raw: object) -> RetryPolicy:
    return RetryPolicy.from_dict({"jitter": 0, **raw})


@pytest.mark.parametrize("max_delay", [None, 60])
def test_a_fixed_delay_is_what_was_asked_however_long(max_delay: float | None) -> None:
    fixed = policy(backoff="fixed", delay=3600, max_delay=max_delay)
    assert [fixed.delay_for(n) for n in (1, 2, 5)] == [3600, 3600, 3600]


def test_an_exponential_delay_grows_to_its_cap_or_without_one() -> None:
    capped = policy(backoff="exponential", delay=10, max_delay=30)
    assert [capped.delay_for(n) for n in (1, 2, 3, 4)] == [10, 20, 30, 30]
    # A flow's retry always names max_delay; null is no cap (the flow reference's default).
    free = policy(backoff="exponential", delay=600, max_delay=None)
    assert [free.delay_for(n) for n in (1, 2, 3)] == [600, 1200, 2400]


def test_a_plain_job_without_max_delay_keeps_the_workers_cap() -> None:
    assert policy(backoff="exponential", delay=200).delay_for(3) == 300
    assert RetryPolicy().max_delay == 300
