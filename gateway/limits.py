"""An application's calls per minute through the gateway: a sliding window over two counters.

No Django here. Every gateway process counts an application's calls in the shared cache, one
counter per clock minute (``rate_window``): a call adds itself to the current minute's counter
and reads the previous one in the same round trip as its session (``gateway/sessions.py``). The
calls of the last sixty seconds are estimated as the current minute's plus the share of the
previous minute's that the window still covers, so a burst at the turn of a minute is not let
through twice, as fixed windows would, for the price of two counters per application.

A refused call counts too: an application that keeps calling past its limit stays refused
until it waits, and the wait it is told (``rate_retry_after``) holds if it does.
"""

from __future__ import annotations

import math

WINDOW_SECONDS = 60


def rate_window(now: float) -> tuple[int, float]:
    """The minute ``now`` (seconds since the epoch) falls in, and the seconds it is into it."""
    window = int(now // WINDOW_SECONDS)
    return window, now - window * WINDOW_SECONDS


def rate_estimate(*, current: int, previous: int, elapsed: float) -> float:
    """Calls in the sixty seconds up to now: this minute's, and the part of the previous
    minute's the window still covers."""
    covered = max(0.0, 1.0 - elapsed / WINDOW_SECONDS)
    return current + previous * covered


def rate_retry_after(*, limit: int, current: int, previous: int, elapsed: float) -> int | None:
    """None when the call (counted in ``current``) is within ``limit`` calls a minute; else the
    whole seconds to wait before a call would be, if none is made meanwhile."""
    if limit <= 0 or rate_estimate(current=current, previous=previous, elapsed=elapsed) <= limit:
        return None
    # The next call adds one to this minute's counter; it passes once the previous minute's
    # share has shrunk enough: previous * (1 - t / 60) + current + 1 <= limit.
    room = limit - current - 1
    if room >= 0 and previous > 0:
        wait = WINDOW_SECONDS * (1.0 - room / previous) - elapsed
        if wait <= WINDOW_SECONDS - elapsed:
            return max(1, math.ceil(wait))
    # Not within this minute: then this minute is the previous one, whose share shrinks until
    # current * (1 - t / 60) + 1 <= limit.
    later = 0.0
    if current > 0 and current + 1 > limit:
        later = WINDOW_SECONDS * (1.0 - max(0, limit - 1) / current)
    return max(1, math.ceil(WINDOW_SECONDS - elapsed + later))
