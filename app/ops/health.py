"""The health summary: is anything sending, is anything stuck, can we reach our stores?

One function for ``/saude``, the CLI, the alarms and ``/metrics``; both stores probed side by
side with a short timeout, so a hung Redis gives a fast answer, not a hang.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from arq.constants import default_queue_name
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.clock import utcnow
from app.config import Settings
from app.invites.records import INVITE
from app.invites.status import Status
from app.invites.transitions.reminders import claimable
from app.ratelimit import sends_this_hour
from app.sending.heartbeat import BOUNCE_RECEIVER_SECONDS, BOUNCE_RECEIVERS, WORKERS, alive, known
from app.sending.pause import Pause, read_pause
from app.storage.database import Database
from app.storage.tables import invite_events, invites

log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 3.0
FAILURE_WINDOW = timedelta(hours=1)
_ADDRESS = re.compile(r"[^\s<>()\"',;:]+@[^\s<>()\"',;:]+")


@dataclass(frozen=True)
class Problem:
    """One reason the service is not healthy; ``code`` names the alarm, ``message`` is pt-BR."""

    code: str
    message: str
    level: int = logging.ERROR


@dataclass(frozen=True)
class FailureGroup:
    """Failures that share one reason."""

    reason: str
    failure_class: str | None
    count: int


@dataclass
class DatabaseFacts:
    counts: dict[str, int] = field(default_factory=dict)
    oldest_pending_seconds: float | None = None
    failures: list[FailureGroup] = field(default_factory=list)
    pause: Pause | None = None  # sending paused on purpose (app.sending.pause)
    next_scheduled_at: datetime | None = None  # the next agendado invite's moment
    overdue_scheduled_seconds: float | None = None  # how late the most overdue agendado is
    reminders_due: int = 0  # reminders the worker's next pass would claim


@dataclass
class RedisFacts:
    workers: dict[str, float] = field(default_factory=dict)
    queue_depth: int = 0
    sends_this_hour: int = 0
    bounce_receivers: tuple[int, int] = (0, 0)  # (alive, known): app.sending.heartbeat


@dataclass
class Health:
    """Everything ``/saude`` reports; ``None`` facts mean that store could not be read."""

    database: DatabaseFacts | None
    database_error: str | None
    redis: RedisFacts | None
    redis_error: str | None
    problems: list[Problem]

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def waiting(self) -> int:
        """Invites that still need a worker (``pendente`` and ``enviando``)."""
        counts = self.database.counts if self.database else {}
        return counts.get(Status.PENDENTE, 0) + counts.get(Status.ENVIANDO, 0)

    @property
    def freshest_heartbeat_seconds(self) -> float | None:
        if self.redis is None or not self.redis.workers:
            return None
        return min(self.redis.workers.values())


async def _database_facts(db: Database, settings: Settings) -> DatabaseFacts:
    now = utcnow()
    facts = DatabaseFacts(counts={status.value: 0 for status in Status})
    async with db.read() as conn:
        await _time_facts(conn, facts, settings)
        # Invites by status (sign-in mails are not invites; they do count as waiting work).
        rows = await conn.execute(
            select(invites.c.status, func.count())
            .where(invites.c.kind == INVITE)
            .group_by(invites.c.status)
        )
        facts.counts.update({status: count for status, count in rows})
        # Overdue, not merely old: a pendente row waiting for its backoff is not stuck.
        oldest_due = (
            await conn.execute(
                select(func.min(invites.c.next_attempt_at)).where(
                    invites.c.status == Status.PENDENTE.value, invites.c.next_attempt_at <= now
                )
            )
        ).scalar()
        failures = await conn.execute(
            select(invite_events.c.error, invite_events.c.failure_class, func.count())
            .where(
                invite_events.c.status == Status.FALHOU.value,
                invite_events.c.created_at >= now - FAILURE_WINDOW,
            )
            .group_by(invite_events.c.error, invite_events.c.failure_class)
            .order_by(func.count().desc())
        )
        facts.failures = [FailureGroup(error or "", kind, count) for error, kind, count in failures]
        facts.pause = await read_pause(conn)
    if oldest_due is not None:
        facts.oldest_pending_seconds = max(0.0, (now - oldest_due).total_seconds())
    return facts


async def _time_facts(conn: AsyncConnection, facts: DatabaseFacts, settings: Settings) -> None:
    """The next scheduled send, how late the most overdue one is (the sweep releases them every
    two seconds: late means no worker, or the clock jumped), and the reminders due."""
    now = utcnow()
    scheduled = invites.c.status == Status.AGENDADO.value
    facts.next_scheduled_at = (
        await conn.execute(select(func.min(invites.c.send_at)).where(scheduled))
    ).scalar()
    if facts.next_scheduled_at is not None and facts.next_scheduled_at <= now:
        facts.overdue_scheduled_seconds = (now - facts.next_scheduled_at).total_seconds()
    due = claimable(now, settings.reminder_after_seconds, settings.invite_ttl_seconds)
    count = await conn.execute(select(func.count()).select_from(invites).where(*due))
    facts.reminders_due = int(count.scalar() or 0)


async def _redis_facts(redis: Redis, heartbeat_seconds: float) -> RedisFacts:
    return RedisFacts(
        workers=await alive(redis, WORKERS, heartbeat_seconds),
        queue_depth=int(await redis.zcard(default_queue_name)),
        sends_this_hour=await sends_this_hour(redis),
        bounce_receivers=(
            len(await alive(redis, BOUNCE_RECEIVERS, BOUNCE_RECEIVER_SECONDS)),
            await known(redis, BOUNCE_RECEIVERS),
        ),
    )


async def probe(coro: Any, what: str) -> tuple[Any, str | None]:
    """Await ``coro`` within ``PROBE_TIMEOUT_SECONDS``; ``(None, why)`` if it failed."""
    try:
        return await asyncio.wait_for(coro, PROBE_TIMEOUT_SECONDS), None
    except TimeoutError:
        log.warning("health probe timed out", extra={"store": what})
        return None, f"sem resposta em {PROBE_TIMEOUT_SECONDS:g} s"
    except Exception as exc:
        log.warning("health probe failed", extra={"store": what, "error": repr(exc)})
        return None, type(exc).__name__


def _problems(health: Health, settings: Settings) -> list[Problem]:
    problems = []
    if health.database is None:
        problems.append(
            Problem(
                "database_unreachable", f"Banco de dados inacessível ({health.database_error})."
            )
        )
    if health.redis is None:
        problems.append(Problem("redis_unreachable", f"Redis inacessível ({health.redis_error})."))
    elif not health.redis.workers and health.waiting:
        # The rows, not the queue: arq's own cron job sits in the queue with no invite waiting.
        problems.append(
            Problem("no_live_worker", "Nenhum worker ativo e há convites esperando envio.")
        )
    if health.redis is not None and health.redis.sends_this_hour >= settings.sends_per_hour:
        problems.append(
            Problem(
                "sends_throttled",
                f"O limite de {settings.sends_per_hour} envios por hora foi atingido; os "
                "próximos convites esperam como pendente e saem quando ele renovar.",
                logging.WARNING,
            )
        )
    if (
        health.redis is not None
        and health.redis.bounce_receivers[1]
        and not (health.redis.bounce_receivers[0])
    ):
        # Bounces themselves are the recipients' problem; a receiver that died is ours.
        problems.append(
            Problem(
                "bounce_receiver_down",
                "O receptor de devoluções parou: devoluções não estão sendo lidas.",
            )
        )
    late = health.database.overdue_scheduled_seconds if health.database else None
    # The release changes no mail and ignores the pause: a late one means the sweep is not running.
    if late is not None and late > settings.alarm_pending_seconds:
        problems.append(
            Problem(
                "scheduled_overdue",
                f"O convite agendado mais atrasado devia ter saído há {late:.0f} s "
                f"(limite: {settings.alarm_pending_seconds:g} s): o worker não está liberando "
                "os agendados.",
            )
        )
    oldest = health.database.oldest_pending_seconds if health.database else None
    paused = health.database is not None and health.database.pause is not None
    # A pause the team chose is not a failure: invites are expected to wait through it.
    if oldest is not None and oldest > settings.alarm_pending_seconds and not paused:
        problems.append(
            Problem(
                "pending_too_old",
                f"O convite pendente mais antigo espera há {oldest:.0f} s "
                f"(limite: {settings.alarm_pending_seconds:g} s).",
                logging.WARNING,
            )
        )
    return problems


async def check_health(settings: Settings, db: Database, redis: Redis) -> Health:
    """Probe the database and Redis (side by side, each bounded) and judge the result."""
    (database, database_error), (redis_facts, redis_error) = await asyncio.gather(
        probe(_database_facts(db, settings), "database"),
        probe(_redis_facts(redis, settings.worker_heartbeat_seconds), "redis"),
    )
    health = Health(database, database_error, redis_facts, redis_error, problems=[])
    health.problems = _problems(health, settings)
    return health


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def redact_addresses(text: str) -> str:
    """Server replies often quote the recipient; a public endpoint must not."""
    return _ADDRESS.sub("<endereço>", text)


def _failures_json(failures: list[FailureGroup]) -> list[dict[str, Any]]:
    grouped: Counter[tuple[str, str | None]] = Counter()
    for group in failures:
        grouped[redact_addresses(group.reason), group.failure_class] += group.count
    return [
        {"motivo": reason, "classe": kind, "quantidade": count}
        for (reason, kind), count in grouped.most_common()
    ]


def _failure_classes_json(failures: list[FailureGroup]) -> list[dict[str, Any]]:
    counts: Counter[str | None] = Counter()
    for group in failures:
        counts[group.failure_class] += group.count
    return [{"classe": kind, "quantidade": count} for kind, count in counts.most_common()]


def _pause_json(pause: Pause | None, public: bool) -> dict[str, Any]:
    if pause is None:
        return {"pausado": False}
    body = {"pausado": True, "desde": pause.since.isoformat(), "por": pause.by}
    if not public:
        body["motivo"] = pause.reason
    return body


def health_json(health: Health, public: bool = False) -> dict[str, Any]:
    """The ``/saude`` body. ``public``: failures by class only, since a mail server's reply can
    quote anything (names, internal hosts); only the operator sees it."""
    database, redis = health.database, health.redis
    freshest = health.freshest_heartbeat_seconds
    oldest = database.oldest_pending_seconds if database else None
    return {
        "saudavel": health.healthy,
        "problemas": [{"codigo": p.code, "mensagem": p.message} for p in health.problems],
        "banco": {"ok": database is not None, "erro": health.database_error},
        "redis": {"ok": redis is not None, "erro": health.redis_error},
        "workers": {
            "ativos": len(redis.workers) if redis else None,
            "heartbeat_mais_recente_segundos": round(freshest, 3) if freshest is not None else None,
        },
        "fila": {
            "profundidade": redis.queue_depth if redis else None,
            "pendente_mais_antigo_segundos": round(oldest, 3) if oldest is not None else None,
        },
        "envio": _pause_json(database.pause, public) if database else {"pausado": None},
        "por_status": database.counts if database else None,
        "agendados": {
            "proximo_envio": iso(database.next_scheduled_at) if database else None,
            "atraso_segundos": (
                round(database.overdue_scheduled_seconds, 3)
                if database and database.overdue_scheduled_seconds is not None
                else None
            ),
        },
        "lembretes_a_enviar": database.reminders_due if database else None,
        "devolucoes": {"receptores_ativos": redis.bounce_receivers[0] if redis else None},
        "falhas_ultima_hora": (
            None
            if database is None
            else _failure_classes_json(database.failures)
            if public
            else _failures_json(database.failures)
        ),
    }
