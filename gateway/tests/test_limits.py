"""An application's calls per minute: the sliding window's estimate and the wait it tells, and
its counters in the shared cache (the embedded default's path; Redis's is the gateway tests')."""

import pytest

from gateway.limits import rate_estimate, rate_retry_after, rate_window
from gateway.services import session_begin


def test_it_places_a_moment_in_its_minute():
    assert rate_window(120.0) == (2, 0.0)
    window, elapsed = rate_window(179.5)
    assert (window, elapsed) == (2, 59.5)


def test_the_estimate_counts_the_share_of_the_previous_minute_the_window_still_covers():
    assert rate_estimate(current=3, previous=10, elapsed=0.0) == 13
    assert rate_estimate(current=3, previous=10, elapsed=30.0) == 8
    assert rate_estimate(current=3, previous=10, elapsed=60.0) == 3


def test_it_lets_a_call_within_the_limit_through():
    assert rate_retry_after(limit=10, current=10, previous=0, elapsed=5.0) is None
    assert rate_retry_after(limit=10, current=5, previous=10, elapsed=30.0) is None


def test_no_limit_lets_every_call_through():
    assert rate_retry_after(limit=0, current=10**6, previous=10**6, elapsed=1.0) is None


def test_it_refuses_a_burst_at_the_turn_of_a_minute_that_fixed_windows_would_let_through():
    # 10 calls at the end of the last minute, 10 more just after: 20 in a few seconds.
    assert rate_retry_after(limit=10, current=10, previous=10, elapsed=1.0) is not None


@pytest.mark.parametrize(
    ("current", "previous", "elapsed"),
    [(11, 0, 5.0), (6, 10, 15.0), (3, 30, 2.0), (40, 40, 59.0), (1, 100, 0.0)],
)
def test_the_wait_it_tells_is_the_first_moment_a_call_passes_again(current, previous, elapsed):
    limit = 10
    wait = rate_retry_after(limit=limit, current=current, previous=previous, elapsed=elapsed)
    assert wait is not None and wait >= 1

    def passes(after: float) -> bool:
        """Whether one more call, ``after`` seconds on and none between, passes."""
        later = elapsed + after
        if later < 60:
            counts = {"current": current + 1, "previous": previous, "elapsed": later}
        else:
            counts = {"current": 1, "previous": current, "elapsed": later - 60}
        return rate_retry_after(limit=limit, **counts) is None

    assert passes(wait)
    assert wait == 1 or not passes(wait - 1)


def test_the_cache_counts_an_applications_calls_per_minute_apart_from_another(settings):
    first = [session_begin("s1", counter="app-a", window=7) for _ in range(3)]
    assert [begun.calls_this_minute for begun in first] == [1, 2, 3]
    assert [begun.step for begun in first] == [0, 1, 2]
    other = session_begin("s2", counter="app-b", window=7)
    assert (other.calls_this_minute, other.step) == (1, 0)
    later = session_begin("s1", counter="app-a", window=8)
    assert (later.calls_this_minute, later.calls_last_minute) == (1, 3)
    uncounted = session_begin("s1")
    assert (uncounted.calls_this_minute, uncounted.step) == (0, 4)
