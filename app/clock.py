"""The one clock: aware UTC datetimes, so SQLite and PostgreSQL store the same instant; a
monotonic reading for every TTL, cache and deadline; and how long something took, in the short
words the operator page and the CLI print.

Tests move wall time with ``time-machine``, which leaves ``time.monotonic`` alone (moving it
would freeze asyncio's loop); so the app reads ``clock.monotonic()`` (never ``from app.clock
import monotonic``) and the tests' ``clock`` fixture moves it by the same seconds.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

#: The time zone every moment is shown in, and a moment typed without one is read in.
DISPLAY_TZ = ZoneInfo("America/Sao_Paulo")


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


def local_moment(moment: datetime | None) -> str:
    """``12/12 às 9h00`` in the display time zone: the words for a moment a person chose."""
    if moment is None:
        return ""
    local = moment.astimezone(DISPLAY_TZ)
    return f"{local:%d/%m} às {local_hour(local)}"


def local_hour(moment: datetime) -> str:
    """``9h02`` in the display time zone."""
    local = moment.astimezone(DISPLAY_TZ)
    return f"{local.hour}h{local:%M}"
