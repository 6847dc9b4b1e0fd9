"""The one clock (``app/clock.py``): what a test moves, the whole process sees."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from pathlib import Path

from app import clock as app_clock
from tests.fixtures import MovableClock

APP = Path(__file__).resolve().parent.parent / "app"
#: Modules whose monotonic readings are still their own: the SQLite turnstile and the forked
#: worker, both on their way out of the tree.
NOT_YET = {"db.py", "steady_worker.py"}


def test_moving_the_clock_moves_wall_time_and_monotonic_time_together(
    clock: MovableClock,
) -> None:
    now, wall, steady = app_clock.utcnow(), time.time(), app_clock.monotonic()

    clock.advance(3600)

    assert app_clock.utcnow() - now >= timedelta(hours=1)
    assert time.time() - wall >= 3600  # Redis scores (heartbeats, rate limits) move too
    assert app_clock.monotonic() - steady >= 3600


def test_the_app_reads_monotonic_time_only_through_app_clock() -> None:
    """A module that calls ``time.monotonic()``, or binds ``monotonic`` by name at import,
    escapes the tests' clock: its TTLs could only be waited out."""
    escaping = re.compile(r"time\.monotonic\(|from app\.clock import[^\n]*\bmonotonic\b")
    found = [
        str(path.relative_to(APP))
        for path in sorted(APP.rglob("*.py"))
        if path.name not in {"clock.py", *NOT_YET} and escaping.search(path.read_text())
    ]

    assert found == []


def test_the_display_zone_and_its_date_formats_have_one_home_each() -> None:
    """São Paulo's zone is named in ``app/clock.py`` alone and a dd/mm/aaaa moment is built in
    ``app/web/present.py`` alone: a second copy would drift (another zone, another format)."""
    zone = re.compile(r"ZoneInfo\(|America/Sao_Paulo")
    date_format = re.compile(r"%d/%m/%Y")
    sources = {str(path.relative_to(APP)): path.read_text() for path in sorted(APP.rglob("*.py"))}

    zones = [name for name, text in sources.items() if zone.search(text)]
    formats = [name for name, text in sources.items() if date_format.search(text)]

    assert (zones, formats) == (["clock.py"], ["web/present.py"])
