"""Putting attempts on the arq queue: one ``Publisher`` for every caller, and the outbox relay.

A job id that repeats can make a retry a silent no-op (arq refuses an id whose job or result
still exists). Each outbox row is one request to run one attempt, so the job id names the
invite, the attempt and the outbox row: a new attempt, or a re-publish after a lost job,
always gets a new id. ``enqueue_job`` returning ``None`` is never taken as success.

There is one way in: ``Publisher`` (the web, the worker, the operator's retry, the CLI and the
relay all use it), which calls arq's ``enqueue_job``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import timedelta

from arq.connections import ArqRedis
from arq.jobs import Job, JobStatus
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.clock import utcnow
from app.invites.records import Change, OutboxEntry
from app.sending.outbox import mark_published, outbox_entry_of, unpublished_outbox
from app.storage.database import Database

log = logging.getLogger(__name__)

#: What "Redis is not there" looks like from redis-py and the socket below it. A connection lost
#: while arq WATCHes a job's key reaches us as a ``WatchError`` ("A ConnectionError occurred on
#: while watching…"); arq handles a real conflict itself, at ``execute()``.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    WatchError,
    ConnectionError,
    OSError,
    asyncio.TimeoutError,
)

SEND_FUNCTION = "send_invite"
LIVE_JOB_STATUSES = (JobStatus.queued, JobStatus.deferred, JobStatus.in_progress)


class EnqueueError(RuntimeError):
    """arq did not take the job: the outbox row stays unpublished for the relay."""


def job_id_for(entry: OutboxEntry) -> str:
    return f"convite:{entry.public_id}:{entry.attempt}:{entry.id}"


async def enqueue_attempt(redis: ArqRedis, entry: OutboxEntry) -> str:
    """Put one attempt on the queue with arq's ``enqueue_job``; its job id.

    ``enqueue_job`` answers ``None`` when a job or a kept result has that id: fine only if that
    job is really there (this exact outbox row was enqueued already: the fast path and the relay
    raced), an ``EnqueueError`` otherwise.
    """
    job_id = job_id_for(entry)
    job = await redis.enqueue_job(
        SEND_FUNCTION,
        entry.public_id,
        entry.attempt,
        entry.correlation_id,
        _job_id=job_id,
        _defer_until=entry.available_at,
    )
    if job is not None:
        return job_id
    status = await Job(job_id, redis).status()
    if status not in (*LIVE_JOB_STATUSES, JobStatus.complete):
        raise EnqueueError(f"arq refused job {job_id} and has no trace of it ({status})")
    log.warning("job already enqueued", extra={"job_id": job_id, "job_status": status.value})
    return job_id


class Publisher:
    """Every caller's way to put attempts on the queue, right after their commit.

    ``publish`` returns once the job is in Redis; a failure raises and leaves the row to the
    outbox relay (``publish_or_leave`` logs it instead). Marking the outbox row published is
    bookkeeping, not a promise to anyone: it rides along with the next group commit instead of
    making the caller wait for one (if it is lost, the relay re-publishes and arq refuses the
    duplicate job id). ``close`` waits for that bookkeeping.
    """

    def __init__(self, db: Database, redis: ArqRedis) -> None:
        self._db = db
        self._redis = redis
        self._marking: set[asyncio.Task[None]] = set()

    async def publish(self, change: Change) -> str | None:
        """Enqueue the job the transition asked for (``None``: it asked for none)."""
        entry = outbox_entry_of(change)
        return None if entry is None else await self.publish_entry(entry)

    async def publish_entry(self, entry: OutboxEntry) -> str:
        job_id = await enqueue_attempt(self._redis, entry)
        task = asyncio.create_task(self._mark_published(entry, job_id))
        self._marking.add(task)
        task.add_done_callback(self._marking.discard)
        return job_id

    async def publish_or_leave(self, changes: Iterable[Change | None]) -> None:
        """``publish`` each change; a Redis outage is logged, and the relay publishes later."""
        await asyncio.gather(*(self._publish_or_leave(c) for c in changes if c is not None))

    async def _publish_or_leave(self, change: Change) -> None:
        try:
            await self.publish(change)
        except (RedisError, OSError, EnqueueError) as exc:
            log.warning(
                "enqueue failed; the outbox relay will publish",
                extra={"invite": change.invite.public_id, "error": repr(exc)},
            )

    async def _mark_published(self, entry: OutboxEntry, job_id: str) -> None:
        try:
            await mark_published(self._db, entry.id, job_id)
        except Exception:
            log.exception(
                "could not mark an outbox row published; the relay will re-publish it",
                extra={"invite": entry.public_id, "job_id": job_id},
            )

    async def close(self) -> None:
        await asyncio.gather(*self._marking)


async def relay_outbox(db: Database, publisher: Publisher, *, grace_seconds: float = 2.0) -> int:
    """Publish outbox rows the request's fast path did not (Redis was down, the web crashed).

    Rows younger than ``grace_seconds`` are left to the fast path that is likely publishing them
    right now. Returns how many rows were published; the first failure is raised after the
    others were tried.
    """
    entries = await unpublished_outbox(db, utcnow() - timedelta(seconds=grace_seconds))
    outcomes = await asyncio.gather(
        *(publisher.publish_entry(entry) for entry in entries), return_exceptions=True
    )
    failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    for entry, outcome in zip(entries, outcomes, strict=True):
        if not isinstance(outcome, BaseException):
            log.info(
                "outbox row published by the relay",
                extra={
                    "invite": entry.public_id,
                    "attempt": entry.attempt,
                    "correlation_id": entry.correlation_id,
                },
            )
    if failures:
        raise failures[0]
    return len(entries)


def send_timeout_seconds(sending_lease_seconds: float) -> float:
    """The send job's timeout: a backstop only (the SMTP conversation is cut at half the lease)."""
    return sending_lease_seconds * 2


def cron_timeout_seconds(sending_lease_seconds: float) -> float:
    """The crons' timeout (sweep, retention, reminders): a minute, and never past the send job's.
    arq locks every job it starts for its longest function's timeout (+10 s), and a send job a
    killed worker held waits that long for another worker; a cron must not stretch that wait.
    What a cut run leaves, the next continues."""
    return min(60.0, send_timeout_seconds(sending_lease_seconds))


async def job_is_live(redis: ArqRedis, job_id: str) -> bool:
    """Whether arq still holds this job: waiting, or started by a worker. A job that a worker
    killed before its claim started stays arq's until arq lets it go (its in-progress timeout),
    and then runs again; a duplicate meets the conditional claim and does nothing."""
    return await Job(job_id, redis).status() in LIVE_JOB_STATUSES
