"""Prometheus metrics that stay right with many web and worker processes: any of them answers a
scrape with the same numbers, since nothing lives in one process's memory. Counters are counts of
database rows; gauges come from the health summary; histograms and refused bounces are Redis
hashes every process adds to; open SSE connections are each web process's count, stamped in a
Redis hash, so a process that died stops counting.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from redis.asyncio import Redis
from sqlalchemy import func, select

from app.bounces.history import bounce_counts
from app.invites.records import INVITE
from app.invites.status import FailureClass, Status
from app.ops.health import Health
from app.storage.database import Database
from app.storage.tables import invite_events, invites

log = logging.getLogger(__name__)
T = TypeVar("T")

SSE_KEY = "convites:sse:connections"
BOUNCES_REFUSED_KEY = "convites:metrics:bounces_refused"
RETENTION_KEY = "convites:metrics:retention_deleted"


@dataclass(frozen=True)
class RedisHistogram:
    """A histogram whose buckets are fields of one Redis hash, shared by every process."""

    name: str
    documentation: str
    buckets: tuple[float, ...]

    @property
    def key(self) -> str:
        return f"convites:metrics:{self.name}"

    def bound(self, value: float) -> float:
        """The upper bound of the bucket ``value`` falls in."""
        return next((b for b in self.buckets if value <= b), math.inf)

    async def read(self, redis: Redis) -> tuple[list[tuple[str, float]], float]:
        """Cumulative ``(le, count)`` pairs and the sum, as Prometheus wants them."""
        raw = {_text(k): float(v) for k, v in (await _done(redis.hgetall(self.key))).items()}
        cumulative, total = [], 0.0
        for bound in (*self.buckets, math.inf):
            total += raw.get(_bucket_field(bound), 0.0)
            cumulative.append(("+Inf" if bound == math.inf else repr(bound), total))
        return cumulative, raw.get("sum", 0.0)


def _bucket_field(bound: float) -> str:
    return "+Inf" if bound == math.inf else f"le:{bound!r}"


async def _done(result: Awaitable[T] | T) -> T:
    """redis-py types its hash commands as sync-or-async; on the asyncio client they await."""
    return await result if inspect.isawaitable(result) else result


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


SEND_DURATION = RedisHistogram(
    "convites_send_duration_seconds",
    "Time one attempt spent handing the message to the SMTP server, whatever the outcome.",
    (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
ACCEPTED_TO_SENT = RedisHistogram(
    "convites_accepted_to_sent_seconds",
    "From the 202 (or the resend) to enviado, for invites that were sent.",
    (0.5, 1, 2, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200),
)
HISTOGRAMS = (SEND_DURATION, ACCEPTED_TO_SENT)


class Observations:
    """Histogram observations from the jobs: one MULTI for all of a job's points (bucket, count
    and sum of each). An outage costs the data points, never a send."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def observe(self, *points: tuple[RedisHistogram, float]) -> None:
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                for histogram, value in points:
                    pipe.hincrby(histogram.key, _bucket_field(histogram.bound(value)), 1)
                    pipe.hincrby(histogram.key, "count", 1)
                    pipe.hincrbyfloat(histogram.key, "sum", value)
                await pipe.execute()
        except Exception as exc:
            log.warning(
                "could not record a metric",
                extra={"metrics": [h.name for h, _ in points], "error": repr(exc)},
            )


async def count_refused_bounce(redis: Redis, reason: str) -> None:
    """One recipient or message the bounce receiver refused. An outage costs the count, never
    the refusal."""
    try:
        await _done(redis.hincrby(BOUNCES_REFUSED_KEY, reason, 1))
    except Exception as exc:
        log.warning("could not count a refused bounce", extra={"error": repr(exc)})


async def refused_bounces(redis: Redis) -> dict[str, int]:
    raw = await _done(redis.hgetall(BOUNCES_REFUSED_KEY))
    return {_text(reason): int(count) for reason, count in raw.items()}


async def count_retention(redis: Redis, removed: Mapping[str, int]) -> None:
    """Rows the retention job deleted, by table (the rows are gone: Redis keeps the count).
    An outage costs the count, never the deletion."""
    try:
        async with redis.pipeline(transaction=True) as pipe:
            for table, count in removed.items():
                pipe.hincrby(RETENTION_KEY, table, count)
            await pipe.execute()
    except Exception as exc:
        log.warning("could not count the retention purge", extra={"error": repr(exc)})


async def retention_deleted(redis: Redis) -> dict[str, int]:
    raw = await _done(redis.hgetall(RETENTION_KEY))
    return {_text(table): int(count) for table, count in raw.items()}


class SseConnections:
    """Open SSE connections of this web process, published to Redis for ``/metrics``.

    The SSE endpoints wrap each stream in ``track()``; the web's monitor task calls
    ``publish()`` every ``ALARM_CHECK_SECONDS``.
    """

    def __init__(self) -> None:
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.open = 0

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """Count one open connection for as long as the block runs."""
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1

    async def publish(self, redis: Redis) -> None:
        await _done(redis.hset(SSE_KEY, self.process_id, f"{self.open}:{time.time()}"))

    async def forget(self, redis: Redis) -> None:
        await _done(redis.hdel(SSE_KEY, self.process_id))


async def open_sse_connections(redis: Redis, stale_after: float) -> int:
    """The sum over web processes that published within ``stale_after`` seconds."""
    now, total, stale = time.time(), 0, []
    for process_id, value in (await _done(redis.hgetall(SSE_KEY))).items():
        count, _, stamp = _text(value).partition(":")
        if now - float(stamp) > stale_after:
            stale.append(process_id)
        else:
            total += int(count)
    if stale:
        await _done(redis.hdel(SSE_KEY, *stale))
    return total


@dataclass
class Snapshot:
    """Everything one scrape reports, read from the database and Redis beforehand."""

    health: Health
    created: int | None = None
    sent: int | None = None
    attempts: int | None = None
    failed: dict[str, int] | None = None
    histograms: dict[str, tuple[list[tuple[str, float]], float]] | None = None
    sse_connections: int | None = None
    bounces_refused: dict[str, int] | None = None  # reason → refused at SMTP time
    bounces: dict[tuple[str, str], int] | None = None  # (class, outcome) → bounces kept
    endings: dict[str, int] | None = None  # aceito/recusado/expirado/cancelado → events
    retention_deleted: dict[str, int] | None = None  # table → rows the retention job deleted
    reminders: dict[str, int] | None = (
        None  # a reminder's outcome (enviado/falhou/incerto) → events
    )


ENDINGS = (Status.ACEITO, Status.RECUSADO, Status.EXPIRADO, Status.CANCELADO)
COUNTED_EVENTS = [
    s.value for s in (Status.ENVIANDO, Status.ENVIADO, Status.FALHOU, Status.INCERTO, *ENDINGS)
]


async def database_counters(db: Database, snapshot: Snapshot) -> None:
    """Counters are counts of rows: right however many processes wrote them.

    All of them or none land in ``snapshot``: a scrape cut short must not report a counter
    as 0 (Prometheus would read that as a reset).
    """
    invitations = invites.c.kind == INVITE  # sign-in mails are not invites
    async with db.read() as conn:
        created = (
            await conn.execute(select(func.count()).select_from(invites).where(invitations))
        ).scalar()
        rows = (
            await conn.execute(
                select(invite_events.c.status, invite_events.c.failure_class, func.count())
                .join(invites, invites.c.id == invite_events.c.invite_id)
                .where(
                    invite_events.c.status.in_(COUNTED_EVENTS),
                    invite_events.c.reminder.is_(None),  # a reminder changes no status
                    invitations,
                )
                .group_by(invite_events.c.status, invite_events.c.failure_class)
            )
        ).all()
        reminded = (
            await conn.execute(
                select(invite_events.c.reminder, func.count())
                .where(invite_events.c.reminder.is_not(None))
                .group_by(invite_events.c.reminder)
            )
        ).all()
    per_status = {status: 0 for status in COUNTED_EVENTS}
    failed = {kind.value: 0 for kind in FailureClass}
    for status, kind, count in rows:
        per_status[status] += count
        if status in (Status.FALHOU, Status.INCERTO):
            failed[kind or FailureClass.PERMANENT.value] += count
    bounces = await bounce_counts(db)
    snapshot.bounces = bounces
    snapshot.created = created
    snapshot.attempts = per_status[Status.ENVIANDO]
    snapshot.sent = per_status[Status.ENVIADO]
    snapshot.failed = failed
    snapshot.endings = {status.value: per_status[status] for status in ENDINGS}
    snapshot.reminders = {"enviado": 0, "falhou": 0, "incerto": 0}
    snapshot.reminders.update({str(outcome): int(count) for outcome, count in reminded})


async def redis_counters(redis: Redis, snapshot: Snapshot, sse_stale_after: float) -> None:
    histograms = {h.name: await h.read(redis) for h in HISTOGRAMS}
    sse_connections = await open_sse_connections(redis, sse_stale_after)
    bounces_refused = await refused_bounces(redis)
    deleted = await retention_deleted(redis)
    snapshot.histograms, snapshot.sse_connections = histograms, sse_connections
    snapshot.bounces_refused, snapshot.retention_deleted = bounces_refused, deleted


class SnapshotCollector(Collector):
    """Turns one ``Snapshot`` into metric families; a store that did not answer is left out."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        yield from self._health()
        yield from self._counters()
        yield from self._histograms()

    def _health(self) -> Iterator[Metric]:
        health = self.snapshot.health
        up = GaugeMetricFamily(
            "convites_dependency_up", "1 when the store answered the scrape.", labels=["store"]
        )
        up.add_metric(["database"], float(health.database is not None))
        up.add_metric(["redis"], float(health.redis is not None))
        yield up
        yield _gauge("convites_healthy", "1 when /saude would answer 200.", health.healthy)
        if health.database is not None:
            yield _labelled(
                GaugeMetricFamily(
                    "convites_invites", "Invites in each status now.", labels=["status"]
                ),
                health.database.counts,
            )
            yield _gauge(
                "convites_oldest_pending_age_seconds",
                "How long the most overdue pendente invite has waited for a worker (0: none).",
                health.database.oldest_pending_seconds or 0.0,
            )
        if health.redis is not None:
            yield _gauge("convites_queue_depth", "Jobs in the arq queue.", health.redis.queue_depth)
            yield _gauge(
                "convites_live_workers",
                "Workers with a fresh heartbeat.",
                len(health.redis.workers),
            )

    def _counters(self) -> Iterator[Metric]:
        snap = self.snapshot
        if snap.created is not None:
            yield _counter("convites_invites_created", "Invites accepted (202).", snap.created)
            yield _counter("convites_invites_sent", "Invites that became enviado.", snap.sent)
            yield _counter(
                "convites_send_attempts", "Attempts a worker claimed (enviando).", snap.attempts
            )
            yield _labelled(
                CounterMetricFamily(
                    "convites_invites_failed",
                    "Invites that became falhou or incerto, by reason class.",
                    labels=["reason_class"],
                ),
                snap.failed or {},
            )
            yield _labelled(
                CounterMetricFamily(
                    "convites_bounces",
                    "Bounces received, by class (permanent, delayed, other, unreadable, "
                    "complaint, unsubscribe) and by what they did (devolvido, history, stale, "
                    "unknown_invite, suppressed).",
                    labels=["class", "outcome"],
                ),
                snap.bounces or {},
            )
            yield _labelled(
                CounterMetricFamily(
                    "convites_invite_endings",
                    "Invites that were answered (aceito, recusado), expired or cancelled.",
                    labels=["status"],
                ),
                snap.endings or {},
            )
            yield _labelled(
                CounterMetricFamily(
                    "convites_reminders",
                    "Reminders by outcome: enviado, falhou (refused; the invite unchanged), "
                    "incerto (cut mid-message; never sent again on its own).",
                    labels=["result"],
                ),
                snap.reminders or {},
            )
        if snap.bounces_refused is not None:
            yield _labelled(
                CounterMetricFamily(
                    "convites_bounces_refused",
                    "Recipients and messages the bounce receiver refused at SMTP time, by reason "
                    "(not_ours, forged, unknown_invite, stale_attempt, settled, not_yet, "
                    "too_many_recipients, oversize).",
                    labels=["reason"],
                ),
                snap.bounces_refused,
            )
        if snap.retention_deleted is not None:
            yield _labelled(
                CounterMetricFamily(
                    "convites_retention_deleted",
                    "Rows the daily retention job deleted (RETENTION_DAYS), by table.",
                    labels=["table"],
                ),
                snap.retention_deleted,
            )
        if snap.sse_connections is not None:
            yield _gauge(
                "convites_sse_connections",
                "Open SSE connections over every web process.",
                snap.sse_connections,
            )

    def _histograms(self) -> Iterator[Metric]:
        for histogram in HISTOGRAMS:
            if self.snapshot.histograms is None:
                return
            buckets, total = self.snapshot.histograms[histogram.name]
            yield HistogramMetricFamily(
                histogram.name, histogram.documentation, buckets=buckets, sum_value=total
            )


def _labelled(family: GaugeMetricFamily | CounterMetricFamily, counts: Mapping[Any, int]) -> Metric:
    """``family`` with one sample per key of ``counts`` (a label value, or a tuple of them)."""
    for key, count in sorted(counts.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], count)
    return family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value))


def _counter(name: str, documentation: str, value: int | None) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=float(value or 0))


def render(snapshot: Snapshot) -> bytes:
    """The exposition text for one scrape (a fresh registry: no state between scrapes)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return generate_latest(registry)
