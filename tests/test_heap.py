"""The web's start-up heap is frozen: full collections do not walk it again (``app.heap``)."""

from __future__ import annotations

import gc

from app.config import Settings
from app.heap import FULL_COLLECTION_SPACING
from tests.fixtures import running_app


async def test_the_web_freezes_what_start_up_built_out_of_the_collectors_sight(
    settings: Settings,
) -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    async with running_app(settings):
        frozen = gc.get_freeze_count()
        serving = gc.get_threshold()

    assert frozen > 10_000
    assert gc.get_freeze_count() == 0  # given back when the app stopped
    # Full collections further apart while it serves; young ones as before; all given back.
    assert serving == (before[0], before[1], before[2] * FULL_COLLECTION_SPACING)
    assert gc.get_threshold() == before
