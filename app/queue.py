"""Putting attempts on the arq queue: one job id per outbox row, and the outbox relay.

A job id that repeats can make a retry a silent no-op (arq refuses an id whose job or result
still exists). Each outbox row is one request to run one attempt, so the job id names the
invite, the attempt and the outbox row: a new attempt, or a re-publish after a lost job,
always gets a new id. ``enqueue_job`` returning ``None`` is never taken as success.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from arq.connections import ArqRedis
from arq.jobs import Job, JobStatus

from app.db import Database
from app.invites import OutboxEntry, mark_published, unpublished_outbox, utcnow

log = logging.getLogger(__name__)

SEND_FUNCTION = "send_invite"
LIVE_JOB_STATUSES = (JobStatus.queued, JobStatus.deferred, JobStatus.in_progress)


class EnqueueError(RuntimeError):
    """arq did not take the job: the outbox row stays unpublished for the relay."""


def job_id_for(entry: OutboxEntry) -> str:
    return f"convite:{entry.public_id}:{entry.attempt}:{entry.id}"


async def enqueue_attempt(redis: ArqRedis, entry: OutboxEntry) -> str:
    """Put one attempt on the queue, deferred until it is due; return the job id."""
    job_id = job_id_for(entry)
    job = await redis.enqueue_job(
        SEND_FUNCTION,
        entry.public_id,
        entry.attempt,
        entry.correlation_id,
        _job_id=job_id,
        _defer_until=entry.available_at if entry.available_at > utcnow() else None,
    )
    if job is None:
        # This exact outbox row was enqueued already (the fast path and the relay raced).
        # Trust it only if the job is really there.
        status = await Job(job_id, redis).status()
        if status not in (*LIVE_JOB_STATUSES, JobStatus.complete):
            raise EnqueueError(f"arq refused job {job_id} and has no trace of it ({status})")
        log.warning("job already enqueued", extra={"job_id": job_id, "job_status": status.value})
    return job_id


async def publish(db: Database, redis: ArqRedis, entry: OutboxEntry) -> str:
    """Enqueue the outbox row's attempt and mark the row published."""
    job_id = await enqueue_attempt(redis, entry)
    await mark_published(db, entry.id, job_id)
    return job_id


async def relay_outbox(db: Database, redis: ArqRedis, *, grace_seconds: float = 2.0) -> int:
    """Publish outbox rows the request's fast path did not (Redis was down, the web crashed).

    Rows younger than ``grace_seconds`` are left to the fast path that is likely publishing them
    right now. Returns how many rows were published.
    """
    entries = await unpublished_outbox(db, utcnow() - timedelta(seconds=grace_seconds))
    published = 0
    for entry in entries:
        await publish(db, redis, entry)
        published += 1
        log.info(
            "outbox row published by the relay",
            extra={
                "invite": entry.public_id,
                "attempt": entry.attempt,
                "correlation_id": entry.correlation_id,
            },
        )
    return published


async def job_is_live(redis: ArqRedis, job_id: str) -> bool:
    """Whether arq still holds this job (waiting or running)."""
    return await Job(job_id, redis).status() in LIVE_JOB_STATUSES
