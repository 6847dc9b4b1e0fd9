"""The web's and the worker process's start-up heaps are frozen: full collections do not walk
them again (``app.ops.heap``)."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from arq.connections import ArqRedis

from app.config import Settings
from app.ops.heap import FULL_COLLECTION_SPACING
from app.sending import worker
from tests.fixtures import process_env, running_app


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


async def test_the_worker_process_freezes_its_start_up_heap_until_it_stops(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hooks of `arq app.sending.worker.WorkerSettings`, the class the worker's command line
    # builds
    # (its JSON logging left out: it would replace this test run's log handlers).
    monkeypatch.setattr(worker, "configure_logging", lambda _process: None)
    for key, value in process_env(settings).items():
        monkeypatch.setenv(key, value)
    cli = worker.WorkerSettings
    gc.unfreeze()
    before = gc.get_threshold()
    ctx: dict[str, Any] = {"settings": settings, "redis": ArqRedis.from_url(settings.redis_url)}
    try:
        await cli.on_startup(ctx)
        frozen = gc.get_freeze_count()
        serving = gc.get_threshold()
    finally:
        try:
            await cli.on_shutdown(ctx)
        finally:
            await ctx["redis"].aclose()

    assert frozen > 10_000
    assert serving == (before[0], before[1], before[2] * FULL_COLLECTION_SPACING)
    # Given back when it stopped (what matters to in-process test workers and the web alike).
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
