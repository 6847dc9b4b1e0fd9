"""Pausing sending on purpose: ``python -m app pause`` / ``resume`` and the ``/operacao`` button.

A row in the database (``controls``), not a Redis key: a Redis restart must not quietly start
sending again. While paused, workers claim nothing, new invites wait as ``pendente``, pages say
so, and ``/saude`` reports it without alarm. Readers share the answer for a second.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.clock import utcnow
from app.sending.heartbeat import WORKERS, alive
from app.storage.database import Database
from app.storage.tables import controls
from app.ttl_cache import TtlCache

log = logging.getLogger(__name__)

PAUSE = "envio_pausado"
#: What the page's notice shows: the team paused sending, or no worker is alive.
BY_TEAM = "equipe"
NO_WORKER = "sem_worker"


@dataclass(frozen=True)
class Pause:
    """Sending is paused: since when, by whom (``cli``, ``operacao``), and why (free text)."""

    since: datetime
    by: str
    reason: str


async def read_pause(conn: AsyncConnection) -> Pause | None:
    row = (
        await conn.execute(
            select(controls.c.value, controls.c.updated_at).where(controls.c.name == PAUSE)
        )
    ).first()
    if row is None:
        return None
    value = json.loads(row.value)
    return Pause(
        since=row.updated_at, by=str(value.get("by", "")), reason=str(value.get("reason", ""))
    )


async def current_pause(db: Database) -> Pause | None:
    """The pause in force, or ``None`` when sending runs."""
    async with db.read() as conn:
        return await read_pause(conn)


async def pause_sending(db: Database, by: str, reason: str = "") -> Pause:
    """Pause sending (again: the first pause's time is kept)."""
    async with db.write() as conn:
        existing = await read_pause(conn)
        if existing is not None:
            return existing
        now = utcnow()
        await conn.execute(
            controls.insert().values(
                name=PAUSE, value=json.dumps({"by": by, "reason": reason}), updated_at=now
            )
        )
        return Pause(since=now, by=by, reason=reason)


async def resume_sending(db: Database) -> bool:
    """Resume sending; ``False`` if it was not paused."""
    async with db.write() as conn:
        result = await conn.execute(delete(controls).where(controls.c.name == PAUSE))
        return bool(result.rowcount)


def pause_flag(db: Database) -> TtlCache[Pause | None]:
    """The pause in force, shared for a second (every poll of a worker, every stream of a web
    process asks)."""
    return TtlCache(partial(current_pause, db), max_age=1.0)


async def no_worker_alive(redis: Redis, heartbeat_seconds: float) -> bool:
    """True when no worker has beaten recently (or Redis, which carries the work, is down): the
    page says so instead of letting "enviando…" sound like progress."""
    try:
        return not await alive(redis, WORKERS, heartbeat_seconds)
    except (RedisError, OSError) as exc:
        log.warning("could not read worker heartbeats", extra={"error": str(exc)})
        return True


class SendingNotice:
    """What the page's notice says, shared by a web process's pages and streams: ``BY_TEAM``
    (a deliberate pause wins), ``NO_WORKER`` (no fresh worker heartbeat), or ``None``."""

    def __init__(self, db: Database, redis: Redis, heartbeat_seconds: float) -> None:
        self.flag = pause_flag(db)
        # Well within a heartbeat interval, so a worker that stopped shows within one.
        self.no_worker = TtlCache(
            partial(no_worker_alive, redis, heartbeat_seconds), min(1.0, heartbeat_seconds / 2)
        )

    async def __call__(self) -> str | None:
        if await self.flag() is not None:
            return BY_TEAM
        return NO_WORKER if await self.no_worker() else None

    async def now(self) -> str | None:
        """The answer read now (and shared from then on): what a page renders must not be older
        than the moment it is shown."""
        if await self.flag.read_now() is not None:
            return BY_TEAM
        return NO_WORKER if await self.no_worker.read_now() else None
