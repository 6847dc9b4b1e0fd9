"""What the pages and the live feed read. Reads only; changes go through ``transitions``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

from sqlalchemy import Connection, bindparam, func, literal_column, select, union_all

from app.invites.records import INVITE, Event, Invite, record_from
from app.invites.status import CORRECTABLE, Status
from app.storage.database import Database
from app.storage.tables import invite_events, invites, unindexed

#: Invites on one page of "Meus convites" (and in a live stream's first snapshot).
PAGE_SIZE = 20


async def get_invite(
    db: Database, sender_id: str, public_id: str, *, kind: str = INVITE
) -> Invite | None:
    """The sender's invite, or ``None``: someone else's invite does not exist for them."""
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(invites).where(
                    invites.c.public_id == public_id,
                    invites.c.sender_id == sender_id,
                    invites.c.kind == kind,
                )
            )
        ).first()
    return record_from(Invite, row) if row else None


@dataclass(frozen=True)
class Page:
    """A page of a sender's invites, newest first, and where a live stream resumes from it."""

    invites: list[Invite]
    event_ids: dict[int, int]  # invite id → the newest event id, the version each row shows
    cursor: int  # the sender's newest event id, read before the rows
    next_before: int | None  # the ``?antes=`` of the next page, if there is one


async def invite_page(
    db: Database,
    sender_id: str,
    *,
    before: int | None = None,
    limit: int = PAGE_SIZE,
    kind: str = INVITE,
    statuses: Sequence[Status] | None = None,
) -> Page:
    """The sender's invites older than row ``before`` (or the newest), only ``statuses`` if
    given; the cursor is read first, so a stream from it re-sends (never skips) a change."""
    query = select(invites).where(invites.c.sender_id == sender_id, invites.c.kind == kind)
    if before is not None:
        query = query.where(invites.c.id < before)
    if statuses is not None:
        query = query.where(invites.c.status.in_([status.value for status in statuses]))
    return await db.read_sync(_invite_page, sender_id, query.order_by(invites.c.id.desc()), limit)


def _invite_page(conn: Connection, sender_id: str, query: Any, limit: int) -> Page:
    cursor = _last_event_id(conn, sender_id)
    found = [record_from(Invite, row) for row in conn.execute(query.limit(limit)).all()]
    event_ids = _latest_event_ids(conn, [invite.id for invite in found])
    next_before = found[-1].id if len(found) == limit else None
    return Page(found, event_ids, cursor, next_before)


async def status_counts(db: Database, sender_id: str, *, kind: str = INVITE) -> dict[Status, int]:
    """How many of the sender's invites are in each status (every status, zeros included)."""
    query = (
        select(invites.c.status, func.count())
        .where(invites.c.sender_id == sender_id, invites.c.kind == kind)
        .group_by(invites.c.status)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    counts = dict.fromkeys(Status, 0)
    counts.update({Status(status): int(count) for status, count in rows})
    return counts


def _latest_event_ids(conn: Connection, invite_ids: Sequence[int]) -> dict[int, int]:
    if not invite_ids:
        return {}
    query = (
        select(invite_events.c.invite_id, func.max(invite_events.c.id))
        .where(invite_events.c.invite_id.in_(list(invite_ids)))
        .group_by(invite_events.c.invite_id)
    )
    rows = conn.execute(query).all()
    return {int(invite_id): int(event_id) for invite_id, event_id in rows}


async def round_started_at(db: Database, invite: Invite) -> datetime:
    """When the current round began: the 202 (a scheduled invite's moment), or the person's (or
    operator's) resend."""
    if invite.round_first_attempt == 1:
        return invite.send_at or invite.created_at
    async with db.read() as conn:
        started = (
            await conn.execute(
                select(func.min(invite_events.c.created_at)).where(
                    invite_events.c.invite_id == invite.id,
                    invite_events.c.attempt == invite.round_first_attempt,
                    invite_events.c.status == Status.PENDENTE.value,
                )
            )
        ).scalar()
    return started or invite.created_at


def address_since(history: Sequence[Event]) -> int:
    """The first attempt mailed to the invite's address as of the end of ``history``: 1, or
    the attempt that followed its last correction (``devolvido`` → Corrigir e reenviar,
    another address). A link, an opt-out address or a send time of an older attempt belongs
    to someone else's address."""
    return max(
        (
            event.attempt
            for before, event in pairwise(history)
            if before.status in CORRECTABLE and event.status == Status.PENDENTE
        ),
        default=1,
    )


async def current_address_since(db: Database, invite_id: int) -> int:
    """``address_since`` of the invite's whole history, now."""
    return address_since(await invite_history(db, invite_id))


async def invite_history(db: Database, invite_id: int) -> list[Event]:
    """Every transition of one invite, oldest first."""
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(invite_events)
                .where(invite_events.c.invite_id == invite_id)
                .order_by(invite_events.c.id)
            )
        ).all()
    return [record_from(Event, row) for row in rows]


#: (sender, cursor) pairs per statement of ``events_since_many`` (SQLite takes at most 500
#: terms in one compound SELECT).
READS_PER_STATEMENT = 64


@dataclass(frozen=True)
class EventMark:
    """What a stream needs of one event to move its cursor (``app.live.settle``)."""

    id: int
    created_at: datetime
    invite_id: int


async def events_since_many(
    db: Database, reads: Sequence[tuple[str, int]], limit: int = 500
) -> list[list[tuple[EventMark, Invite, int]]]:
    """The live feed's read: for each (sender, cursor) pair, the sender's newer events (oldest
    first, at most ``limit``), each with its invite now and that invite's newest event id."""
    return await db.read_sync(_events_since_many, reads, limit)


async def warm_live_reads(db: Database) -> None:
    """Compile every shape of the live feed's read before a stream has to wait for it."""
    await db.read_sync(_warm_live_reads)


def _warm_live_reads(conn: Connection) -> None:
    size = 1
    while size <= READS_PER_STATEMENT:
        _events_since_many(conn, [("", 0)] * size, 1)  # a sender that cannot exist: no rows
        size *= 2
    conn.execute(_INVITES_BY_ID, {"ids": [0]}).all()


def _events_since_many(
    conn: Connection, reads: Sequence[tuple[str, int]], limit: int
) -> list[list[tuple[EventMark, Invite, int]]]:
    marks: list[list[EventMark]] = [[] for _ in reads]
    for start in range(0, len(reads), READS_PER_STATEMENT):
        chunk = reads[start : start + READS_PER_STATEMENT]
        params: dict[str, Any] = {"limit": limit}
        for index in range(_shape(len(chunk))):
            # Unused slots of the shape ask for a sender that cannot exist: no rows.
            sender_id, after_id = chunk[index] if index < len(chunk) else ("", 0)
            params[f"sender_{index}"], params[f"after_{index}"] = sender_id, after_id
        rows = conn.execute(_events_since_statement(len(chunk)), params)
        for index, event_id, created_at, invite_id in rows.all():
            if index < len(chunk):
                marks[start + index].append(EventMark(event_id, created_at, invite_id))
    wanted = sorted({mark.invite_id for found in marks for mark in found})
    found_invites = {}
    if wanted:
        rows = conn.execute(_INVITES_BY_ID, {"ids": wanted})
        found_invites = {row.id: (record_from(Invite, row), row.latest_event_id) for row in rows}
    return [
        [(mark, *found_invites[mark.invite_id]) for mark in sorted(found, key=lambda m: m.id)]
        for found in marks
    ]


#: Each invite with its newest event id as read: a row that changed after its events were read
#: is labelled that new, or the next read of the same change would be said twice.
_INVITES_BY_ID = select(
    invites,
    select(func.max(invite_events.c.id))
    .where(invite_events.c.invite_id == invites.c.id)
    .scalar_subquery()
    .label("latest_event_id"),
).where(invites.c.id.in_(bindparam("ids", expanding=True)))


def _shape(count: int) -> int:
    """The statement size for ``count`` pairs: the next power of two (a handful of shapes)."""
    return 1 << max(0, count - 1).bit_length()


_STATEMENTS: dict[int, Any] = {}


def _events_since_statement(count: int) -> Any:
    """One statement object per shape, built once, so a round of reads compiles no SQL."""
    size = _shape(count)
    statement = _STATEMENTS.get(size)
    if statement is None:
        parts = [
            select(
                literal_column(str(index)).label("read_index"),
                invite_events.c.id,
                invite_events.c.created_at,
                invite_events.c.invite_id,
            )
            .where(
                invite_events.c.sender_id == bindparam(f"sender_{index}"),
                invite_events.c.id > bindparam(f"after_{index}"),
            )
            .order_by(invite_events.c.id)
            .limit(bindparam("limit"))
            .subquery()
            .select()
            for index in range(size)
        ]
        statement = _STATEMENTS[size] = parts[0] if size == 1 else union_all(*parts)
    return statement


async def events_since(
    db: Database, sender_id: str, after_id: int, limit: int = 500
) -> list[tuple[Event, Invite]]:
    """The sender's events newer than ``after_id``, oldest first, each with its invite now."""
    event_columns = [column.label(f"event_{column.name}") for column in invite_events.c]
    query = (
        select(*event_columns, invites)
        .join(invites, invites.c.id == invite_events.c.invite_id)
        .where(invite_events.c.sender_id == sender_id, invite_events.c.id > after_id)
        .order_by(invite_events.c.id)
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    pairs = []
    for row in rows:
        mapping = row._mapping
        event = {name: mapping[f"event_{name}"] for name in invite_events.c.keys()}  # noqa: SIM118 (column names)
        pairs.append((record_from(Event, event), record_from(Invite, mapping)))
    return pairs


def _last_event_id(conn: Connection, sender_id: str | None) -> int:
    query = select(func.max(invite_events.c.id))
    if sender_id is not None:
        query = query.where(invite_events.c.sender_id == sender_id)
    return int(conn.execute(query).scalar() or 0)


async def last_event_id(db: Database, sender_id: str | None = None) -> int:
    """The newest event id of this sender, or of anyone without one (0 when there is none)."""
    return await db.read_sync(_last_event_id, sender_id)


async def settled_event_ids(
    db: Database, sender_id: str, horizon: datetime
) -> tuple[int, set[int]]:
    """The sender's newest event id written at or before ``horizon`` (0 if none), and the ids of
    its events visible above it (newer than that one)."""
    mine = invite_events.c.sender_id == sender_id
    async with db.read() as conn:
        settled = (
            await conn.execute(
                select(func.max(invite_events.c.id)).where(
                    mine, invite_events.c.created_at <= horizon
                )
            )
        ).scalar()
        floor = int(settled or 0)
        younger = (
            await conn.execute(select(invite_events.c.id).where(mine, invite_events.c.id > floor))
        ).scalars()
        return floor, {int(i) for i in younger}


async def senders_with_events_after(db: Database, after_id: int) -> dict[str, int]:
    """Each sender with events newer than ``after_id`` and its newest event id (one range scan:
    the hub's check for lost wake-ups)."""
    sender = unindexed(invite_events.c.sender_id)  # not a scan of its index, for the order
    query = (
        select(sender, func.max(invite_events.c.id))
        .where(invite_events.c.id > after_id)
        .group_by(sender)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return {str(sender): int(newest) for sender, newest in rows}
