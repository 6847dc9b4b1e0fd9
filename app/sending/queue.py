"""Putting attempts on the arq queue: one ``Publisher`` for every caller, and the outbox relay.

A job id that repeats can make a retry a silent no-op (arq refuses an id whose job or result
still exists). Each outbox row is one request to run one attempt, so the job id names the
invite, the attempt and the outbox row: a new attempt, or a re-publish after a lost job,
always gets a new id. ``enqueue_job`` returning ``None`` is never taken as success.

There is one way in: ``Publisher`` (the web, the worker, the operator's retry, the CLI and the
relay all use it), which enqueues concurrent callers' jobs in one round trip.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from datetime import timedelta

from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix
from arq.jobs import Job, JobStatus, serialize_job
from arq.utils import timestamp_ms, to_unix_ms
from redis.exceptions import RedisError

from app.batching import Batcher
from app.clock import utcnow
from app.invites.records import Change, OutboxEntry
from app.sending.outbox import mark_published, outbox_entry_of, unpublished_outbox
from app.storage.database import Database

log = logging.getLogger(__name__)

SEND_FUNCTION = "send_invite"
LIVE_JOB_STATUSES = (JobStatus.queued, JobStatus.deferred, JobStatus.in_progress)


class EnqueueError(RuntimeError):
    """arq did not take the job: the outbox row stays unpublished for the relay."""


def job_id_for(entry: OutboxEntry) -> str:
    return f"convite:{entry.public_id}:{entry.attempt}:{entry.id}"


async def _check_refused(redis: ArqRedis, job_id: str) -> None:
    """arq refused ``job_id`` as a duplicate: fine only if that job is really there."""
    # This exact outbox row was enqueued already (the fast path and the relay raced).
    status = await Job(job_id, redis).status()
    if status not in (*LIVE_JOB_STATUSES, JobStatus.complete):
        raise EnqueueError(f"arq refused job {job_id} and has no trace of it ({status})")
    log.warning("job already enqueued", extra={"job_id": job_id, "job_status": status.value})


# arq's enqueue_job, for many jobs at once. Per job, exactly what enqueue_job does under
# WATCH/MULTI: refuse the id if its job key or result key exists, else PSETEX the serialized
# job and ZADD it to the queue. A script runs atomically, like the MULTI block; one round trip.
_ENQUEUE_MANY = """
local queue = ARGV[1]
local accepted = {}
for i = 1, #KEYS / 2 do
  local job_key, result_key = KEYS[2 * i - 1], KEYS[2 * i]
  local base = 1 + (i - 1) * 4
  if redis.call('EXISTS', job_key, result_key) > 0 then
    accepted[i] = 0
  else
    redis.call('PSETEX', job_key, ARGV[base + 3], ARGV[base + 4])
    redis.call('ZADD', queue, ARGV[base + 2], ARGV[base + 1])
    accepted[i] = 1
  end
end
return accepted
"""


async def enqueue_attempts(
    redis: ArqRedis, entries: Sequence[OutboxEntry]
) -> list[str | BaseException]:
    """Put many attempts on the queue in one round trip; each gets its job id or its error.

    Same keys, scores, expiry and serializer as ``ArqRedis.enqueue_job`` (see ``_ENQUEUE_MANY``).
    """
    enqueue_time_ms = timestamp_ms()
    keys: list[str] = []
    args: list[str | int | bytes] = [redis.default_queue_name]
    for entry in entries:
        job_id = job_id_for(entry)
        due_ms = to_unix_ms(entry.available_at)
        score = due_ms if due_ms > enqueue_time_ms else enqueue_time_ms
        job = serialize_job(
            SEND_FUNCTION,
            (entry.public_id, entry.attempt, entry.correlation_id),
            {},
            None,
            enqueue_time_ms,
            serializer=redis.job_serializer,
        )
        keys += [job_key_prefix + job_id, result_key_prefix + job_id]
        args += [job_id, score, score - enqueue_time_ms + redis.expires_extra_ms, job]
    accepted = await redis.register_script(_ENQUEUE_MANY)(keys=keys, args=args)
    results: list[str | BaseException] = []
    for entry, ok in zip(entries, accepted, strict=True):
        job_id = job_id_for(entry)
        try:
            if not ok:
                await _check_refused(redis, job_id)
            results.append(job_id)
        except EnqueueError as exc:
            results.append(exc)
    return results


class Publisher:
    """Concurrent callers' attempts enqueued in one round trip, right after their commit.

    ``publish`` returns once the job is in Redis; a failure raises and leaves the row to the
    outbox relay (``publish_or_leave`` logs it instead). Marking the outbox row published is
    bookkeeping, not a promise to anyone: it rides along with the next group commit instead of
    making the caller wait for one (if it is lost, the relay re-publishes and arq refuses the
    duplicate job id). ``close`` waits for that bookkeeping.
    """

    def __init__(self, db: Database, redis: ArqRedis) -> None:
        self._db = db
        self._batcher: Batcher[ArqRedis] = Batcher(
            lambda: nullcontext(redis), isolate_failures=False
        )
        self._marking: set[asyncio.Task[None]] = set()

    async def publish(self, change: Change) -> str | None:
        """Enqueue the job the transition asked for (``None``: it asked for none)."""
        entry = outbox_entry_of(change)
        return None if entry is None else await self.publish_entry(entry)

    async def publish_entry(self, entry: OutboxEntry) -> str:
        job_id = await self._batcher.run(enqueue_attempts, entry)
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
        await self._batcher.close()
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


#: How long a started job may keep its ``pendente`` row unclaimed before it counts as lost. A
#: live worker claims within seconds of starting a job (longer only while it waits its write
#: turn, bounded at 30 s); if one is merely slow, the new job and the old one meet at the
#: conditional claim, and one of them loses it.
ORPHANED_AFTER_SECONDS = 15.0
#: The reconciliation cron's own timeout.
SWEEP_TIMEOUT_SECONDS = 60.0


def send_timeout_seconds(sending_lease_seconds: float) -> float:
    """The send job's timeout: a backstop only (the SMTP conversation is cut at half the lease)."""
    return sending_lease_seconds * 2


def in_progress_hold_seconds(sending_lease_seconds: float) -> float:
    """How long arq keeps a started job's in-progress key: its longest function timeout + 10 s
    (``in_progress_timeout_s`` in arq/worker.py), even when the worker that started it is gone."""
    return max(send_timeout_seconds(sending_lease_seconds), SWEEP_TIMEOUT_SECONDS) + 10


async def job_is_live(redis: ArqRedis, job_id: str, held_for: float | None = None) -> bool:
    """Whether arq still holds this job (waiting, or running on a worker that is still there).

    Only for a job whose row is still ``pendente`` past its grace. A worker SIGKILLed right after
    it started jobs leaves their in-progress keys behind for ``held_for`` seconds, and no other
    worker touches them until then: with ``held_for`` given, a job in progress for longer than
    ``ORPHANED_AFTER_SECONDS`` without its claim is taken as lost (the in-progress key's
    remaining time says when it was set).
    """
    status = await Job(job_id, redis).status()
    if status != JobStatus.in_progress or held_for is None:
        return status in LIVE_JOB_STATUSES
    remaining_ms = int(await redis.pttl(in_progress_key_prefix + job_id))
    if remaining_ms < 0:  # gone since: no longer held by anyone
        return False
    return held_for - remaining_ms / 1000 < ORPHANED_AFTER_SECONDS
