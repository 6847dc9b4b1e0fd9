"""The one clock: aware UTC datetimes, so SQLite and PostgreSQL store the same instant; a
monotonic reading for every TTL, cache and deadline; and how long something took, in the short
words the operator page and the CLI print.

How tests move time (the decision). Wall time is moved by ``time-machine`` (a test-only
dependency): it patches ``datetime.now`` and ``time.time`` in the whole process, so every
``utcnow()`` here and every ``time.time()`` score in Redis moves with it. Since its 3.0,
time-machine leaves ``time.monotonic`` alone on purpose (moving it freezes asyncio's event loop)
and asks code to read monotonic time through a function that the tests replace in one place.
That place is ``monotonic()`` below: the app reads it as ``clock.monotonic()`` (attribute access,
never ``from app.clock import monotonic``) so the tests' ``clock`` fixture
(``tests/fixtures.py``) can move it together with the wall clock by the same number of seconds.
Processes the tests start (uvicorn, arq workers) keep the real clock: tests of them wait for the
state they expect with an overall deadline and never assert how long something took.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def monotonic() -> float:
    """Seconds on a clock that never goes back, for TTLs and deadlines (not for storing)."""
    return time.monotonic()


def duration(seconds: float | None) -> str:
    """``8 s``, ``3 min 5 s``, ``2 h 10 min``: how long, for the operator page."""
    if seconds is None:
        return "—"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s".replace(".", ",")
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
