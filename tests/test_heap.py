"""The web's start-up heap is frozen: full collections do not walk it again (``app.heap``)."""

from __future__ import annotations

import gc

from app.config import Settings
from tests.fixtures import running_app


async def test_the_web_freezes_what_start_up_built_out_of_the_collectors_sight(
    settings: Settings,
) -> None:
    gc.unfreeze()
    async with running_app(settings):
        frozen = gc.get_freeze_count()

    assert frozen > 10_000
    assert gc.get_freeze_count() == 0  # given back when the app stopped
