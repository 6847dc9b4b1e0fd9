"""``TtlCache``: one read shared by every caller for ``max_age`` seconds, one reader at a time."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from app import clock
from app.sending.heartbeat import WORKERS, beat
from app.sending.pause import SendingNotice
from app.storage.database import Database
from app.ttl_cache import TtlCache


class Moved:
    """The app's monotonic clock, moved by the test instead of waited for."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def moved(monkeypatch: pytest.MonkeyPatch) -> Moved:
    moved = Moved()
    monkeypatch.setattr(clock, "monotonic", moved)
    return moved


class Counter:
    """A read that takes a moment (so callers overlap) and answers how often it ran."""

    def __init__(self) -> None:
        self.reads = 0

    async def __call__(self) -> int:
        self.reads += 1
        await asyncio.sleep(0)
        return self.reads


async def test_callers_that_ask_at_once_share_one_read(moved: Moved) -> None:
    read = Counter()
    cache = TtlCache(read, max_age=2.0)

    answers = await asyncio.gather(*(cache() for _ in range(50)))

    assert set(answers) == {1} and read.reads == 1


async def test_the_answer_is_read_again_once_older_than_max_age(moved: Moved) -> None:
    cache = TtlCache(Counter(), max_age=2.0)
    first = await cache()
    moved.now += 1.9
    kept = await cache()
    moved.now += 0.1

    assert (first, kept, await cache()) == (1, 1, 2)


async def test_read_now_reads_and_the_others_share_its_answer(moved: Moved) -> None:
    cache = TtlCache(Counter(), max_age=2.0)
    await cache()

    assert await cache.read_now() == 2
    assert await cache() == 2


async def test_streams_share_one_read_of_the_worker_heartbeats(
    moved: Moved, db: Database, redis: Redis
) -> None:
    """A thousand streams waking at once cost one heartbeat read, and the answer moves on."""
    no_worker = SendingNotice(db, redis, heartbeat_seconds=10.0).no_worker
    await redis.config_resetstat()

    answers = await asyncio.gather(*(no_worker() for _ in range(200)))

    assert set(answers) == {True}  # no worker has beaten
    assert await _zrange_calls(redis) == 1
    await beat(redis, WORKERS, "worker-1")
    assert await no_worker() is True  # still the shared answer, at most max_age old
    moved.now += no_worker.max_age
    assert await no_worker() is False
    assert await _zrange_calls(redis) == 2


async def _zrange_calls(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_zrangebyscore", {}).get("calls", 0))
