"""Pausing sending on purpose: ``python -m app pause`` / ``resume`` and the ``/operacao`` button.

The switch is a row in the database (``controls``), not a Redis key: the team paused for a
reason (a mail provider in trouble, a bad template), and a Redis restart without persistence
must not quietly start sending again. While paused:

- workers claim nothing (``python -m app worker`` stops polling; any worker's job leaves the row
  ``pendente`` untouched, and the sweep enqueues it again after the resume);
- new invites are accepted as ``pendente`` as always;
- the person's page says sending was paused by the team and their invite goes when it resumes;
- ``/saude`` reports ``envio.pausado`` (not as a problem, and ``pending_too_old`` is not raised).

Readers cache the answer for ``PauseFlag.max_age`` seconds, so a resume reaches the workers and
pages within a second or two.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app import clock
from app.clock import utcnow
from app.db import Database
from app.live.paused import PausedCheck
from app.models import controls

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


class PauseFlag:
    """Whether sending is paused, read from the database at most once per ``max_age`` seconds
    by one caller at a time (every poll of a worker, every stream of a web process asks)."""

    def __init__(self, db: Database, max_age: float = 1.0) -> None:
        self.db = db
        self.max_age = max_age
        self._value: Pause | None = None
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    def _fresh(self) -> bool:
        return self._read_at is not None and clock.monotonic() - self._read_at < self.max_age

    async def __call__(self) -> Pause | None:
        if not self._fresh():
            async with self._lock:
                if not self._fresh():
                    await self.read_now()
        return self._value

    async def read_now(self) -> Pause | None:
        """Read the database now, and share the answer with the other callers."""
        asked_at = clock.monotonic()
        value = await current_pause(self.db)
        self._value, self._read_at = value, asked_at
        return value


class SendingNotice:
    """What the page's notice says, shared by a web process's pages and streams: ``BY_TEAM``
    (a deliberate pause wins), ``NO_WORKER`` (no fresh worker heartbeat), or ``None``."""

    def __init__(self, flag: PauseFlag, no_worker: PausedCheck) -> None:
        self.flag = flag
        self.no_worker = no_worker

    async def __call__(self) -> str | None:
        if await self.flag() is not None:
            return BY_TEAM
        return NO_WORKER if await self.no_worker() else None

    async def now(self) -> str | None:
        """The same answer read now, not from the shared second-old one: what a page renders
        (and a stream says first) must not be older than the moment it is shown. The fresh
        answer replaces the shared one, so the streams that follow cannot say an older one."""
        if await self.flag.read_now() is not None:
            return BY_TEAM
        return NO_WORKER if await self.no_worker.read_now() else None
