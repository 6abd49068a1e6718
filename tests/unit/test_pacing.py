"""How soon `flows run` and `flows logs -f` look again (flows.runs.pacing)."""

from __future__ import annotations

import pytest

from flows.runs.pacing import QUICK, next_pause


def test_a_look_that_found_something_is_followed_soon() -> None:
    assert next_pause(0.2, True, 0.001, 0.2) == QUICK


@pytest.mark.parametrize(("pause", "expected"), [(0.02, 0.04), (0.08, 0.16), (0.16, 0.2)])
def test_quiet_looks_come_twice_as_late_up_to_the_longest(pause: float, expected: float) -> None:
    assert next_pause(pause, False, 0.001, 0.2) == pytest.approx(expected)


def test_a_costly_look_waits_twice_what_it_took_but_never_past_the_longest() -> None:
    # A big run: a read of 60 ms leaves 120 ms before the next, news or not.
    assert next_pause(0.02, True, 0.06, 0.2) == pytest.approx(0.12)
    assert next_pause(0.02, True, 0.5, 0.2) == 0.2


def test_the_longest_bounds_even_the_first_pause() -> None:
    assert next_pause(0.001, True, 0.0, 0.01) == 0.01
