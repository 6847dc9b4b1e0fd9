"""Attempts go on the queue through arq's own ``enqueue_job`` (``app.sending.queue``), and a
refused job id is success only when that job is really there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from arq.connections import ArqRedis
from arq.jobs import Job, JobStatus

from app.clock import utcnow
from app.config import Settings
from app.invites.records import OutboxEntry
from app.sending.queue import EnqueueError, enqueue_attempt, job_id_for


def an_entry(outbox_id: int, due_in: float = 0.0) -> OutboxEntry:
    return OutboxEntry(
        id=outbox_id,
        invite_id=outbox_id,
        public_id=f"convite{outbox_id}",
        attempt=1,
        available_at=utcnow() + timedelta(seconds=due_in),
        correlation_id="corr",
    )


@pytest.fixture
async def arq_redis(settings: Settings) -> AsyncIterator[ArqRedis]:
    redis = ArqRedis.from_url(settings.redis_url)
    yield redis
    await redis.aclose()


async def test_an_attempt_is_queued_with_its_arguments_and_due_time(arq_redis: ArqRedis) -> None:
    entry = an_entry(1, due_in=60)

    job_id = await enqueue_attempt(arq_redis, entry)

    info = await Job(job_id, arq_redis).info()
    assert info is not None and info.args == (entry.public_id, 1, "corr")
    assert await Job(job_id, arq_redis).status() == JobStatus.deferred


async def test_the_same_outbox_row_published_twice_is_one_job(arq_redis: ArqRedis) -> None:
    entry = an_entry(2)

    first = await enqueue_attempt(arq_redis, entry)
    second = await enqueue_attempt(arq_redis, entry)  # the relay raced the fast path

    assert first == second == job_id_for(entry)
    assert await arq_redis.zcard(arq_redis.default_queue_name) == 1


async def test_a_refused_job_id_with_no_job_behind_it_is_an_error(arq_redis: ArqRedis) -> None:
    entry = an_entry(3)
    job_id = await enqueue_attempt(arq_redis, entry)
    # The job's key is still there but nothing will run it: arq refuses the id again.
    await arq_redis.zrem(arq_redis.default_queue_name, job_id)

    with pytest.raises(EnqueueError):
        await enqueue_attempt(arq_redis, entry)
