"""The on-call commands: ``python -m app status | reconcile | retry | suppression``.

The same code as the web and the worker, with short-lived stores of their own; ``status`` exits
1 when unhealthy, like ``/saude``'s 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis

from app.clock import duration
from app.config import Settings
from app.consent import suppression
from app.invites.status import Status
from app.live.wakeups import Announcer
from app.ops.actions import retry_in_bulk, skipped_text
from app.ops.health import Health, check_health, health_json
from app.sending.queue import Publisher
from app.sending.sweep import reconcile
from app.storage.database import Database
from app.webhooks.deliver import lease_seconds

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Stores:
    db: Database
    redis: ArqRedis
    publisher: Publisher
    announcer: Announcer


@asynccontextmanager
async def _stores(settings: Settings) -> AsyncIterator[_Stores]:
    db = Database(settings.database_url)
    redis = ArqRedis.from_url(settings.redis_url, socket_connect_timeout=1, socket_timeout=2)
    stores = _Stores(db, redis, Publisher(db, redis), Announcer(redis))
    try:
        yield stores
    finally:
        await stores.publisher.close()
        await redis.aclose()
        await db.dispose()


def _summary(health: Health) -> list[str]:
    lines = ["Convites: SAUDÁVEL" if health.healthy else "Convites: COM PROBLEMAS"]
    lines += [f"  - {p.message} [{p.code}]" for p in health.problems]
    lines.append(f"Banco de dados: {'ok' if health.database else health.database_error}")
    lines.append(f"Redis: {'ok' if health.redis else health.redis_error}")
    if health.redis is not None:
        freshest = health.freshest_heartbeat_seconds
        beat = f" (último sinal há {duration(freshest)})" if freshest is not None else ""
        lines.append(f"Workers ativos: {len(health.redis.workers)}{beat}")
        lines.append(f"Fila: {health.redis.queue_depth} jobs")
    if health.database is not None:
        facts = health.database
        if facts.pause is not None:
            lines.append(f"Envio PAUSADO pela equipe desde {facts.pause.since:%Y-%m-%d %H:%M} UTC")
        lines.append(f"Pendente mais antigo: {duration(facts.oldest_pending_seconds)}")
        nxt = facts.next_scheduled_at
        lines.append(
            "Próximo agendado: "
            + (f"{nxt:%Y-%m-%d %H:%M} UTC" if nxt else "nenhum")
            + (
                f" (atrasado {duration(facts.overdue_scheduled_seconds)})"
                if facts.overdue_scheduled_seconds is not None
                else ""
            )
        )
        lines.append(f"Lembretes a enviar: {facts.reminders_due}")
        lines.append(
            "Por status: " + ", ".join(f"{name} {count}" for name, count in facts.counts.items())
        )
        lines.append("Falhas na última hora:" + ("" if facts.failures else " nenhuma"))
        lines += [f"  {g.count} × {g.reason} ({g.failure_class})" for g in facts.failures]
    return lines


async def _status(settings: Settings, as_json: bool) -> int:
    async with _stores(settings) as stores:
        health = await check_health(settings, stores.db, stores.redis)
    if as_json:
        print(json.dumps(health_json(health), ensure_ascii=False, indent=2))
    else:
        print("\n".join(_summary(health)))
    return 0 if health.healthy else 1


async def _reconcile(settings: Settings) -> int:
    async with _stores(settings) as stores:
        done = await reconcile(
            stores.db,
            stores.redis,
            stores.publisher,
            stores.announcer,
            invite_ttl_seconds=settings.invite_ttl_seconds,
            sending_lease_seconds=settings.sending_lease_seconds,
            webhook_requeue_seconds=lease_seconds(settings),
        )
    print(
        f"Reconciliação feita: {done.released} agendados liberados para envio, "
        f"{done.published} do outbox para a fila, "
        f"{done.uncertain} viraram incerto (envio interrompido), "
        f"{done.reminders_uncertain} lembretes viraram incerto, "
        f"{done.requeued} pendentes sem job voltaram para a fila, "
        f"{done.expired} convites sem resposta expiraram."
    )
    return 0


async def _retry(settings: Settings, status: Status, reason: str | None) -> int:
    async with _stores(settings) as stores:
        done = await retry_in_bulk(
            stores.db, stores.publisher, stores.announcer, status, reason_contains=reason
        )
    noun = "convite voltou" if len(done.changes) == 1 else "convites voltaram"
    print(f"{len(done.changes)} {noun} para a fila.")
    if done.skipped:
        print(skipped_text(done.skipped))
    for change in done.changes:
        invite = change.invite
        print(f"  {invite.public_id}  {invite.email}  tentativa {invite.attempt}")
    return 0


def _run(command: Callable[..., Coroutine[Any, Any, int]], *args: Any) -> int:
    try:
        return asyncio.run(command(*args))
    except Exception as exc:
        log.exception("command failed")
        print(f"Falhou: {exc!r}")
        return 1


def status(settings: Settings, *, as_json: bool = False) -> int:
    """Print the health summary; 0 when healthy, 1 when not."""
    return _run(_status, settings, as_json)


def reconcile_once(settings: Settings) -> int:
    """One reconciliation pass (outbox relay, lease expiry, lost jobs), and what it did."""
    return _run(_reconcile, settings)


def retry(settings: Settings, status: Status, reason: str | None) -> int:
    """Send again every invite in ``status`` whose reason contains ``reason``."""
    return _run(_retry, settings, status, reason)


async def _suppression_list(settings: Settings) -> int:
    db = Database(settings.database_url)
    try:
        entries = await suppression.listing(db, limit=100_000)
    finally:
        await db.dispose()
    noun = "endereço" if len(entries) == 1 else "endereços"
    print(f"{len(entries)} {noun} na lista de supressão.")
    for entry in entries:
        shown = entry.email or f"(apagado, {entry.address_hash[:12]}…)"
        detail = f" ({entry.detail})" if entry.detail else ""
        label = suppression.LABELS[entry.reason]
        print(f"  {shown}  {label}{detail}  desde {entry.created_at:%Y-%m-%d %H:%M} UTC")
    return 0


async def _suppression_lift(settings: Settings, email: str, who: str, why: str) -> int:
    db = Database(settings.database_url)
    try:
        lifted = await suppression.lift(db, email, by=f"cli: {who}", why=why)
    finally:
        await db.dispose()
    if lifted is None:
        print(f"{email} não está na lista de supressão.")
        return 1
    print(f"{email} saiu da lista de supressão ({suppression.LABELS[lifted.reason]}).")
    return 0


def suppression_list(settings: Settings) -> int:
    """Print every address on the suppression list, newest first, with why and since when."""
    return _run(_suppression_list, settings)


def suppression_lift(settings: Settings, email: str, who: str, why: str) -> int:
    """Take ``email`` off the list (logged with ``who`` and ``why``); 1 if it was not on it."""
    return _run(_suppression_lift, settings, email, who, why)
