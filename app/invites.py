"""The invite state machine: every status change lives here, and nowhere else.

Each transition is one conditional ``UPDATE … WHERE status = …`` plus one ``invite_events``
row, in one transaction. A transition that finds the row in another state changes nothing and
returns ``None``: that is how two workers, a redelivered job and a double click never both win.

    pendente → enviando → enviado | pendente (retry) | falhou
    enviando → incerto (lease expired)      enviando → pendente (graceful stop before DATA)
    falhou | incerto → pendente (the person asks again)

No web, no Redis here; callers publish the returned changes.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, or_, select, tuple_, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import Database
from app.models import invite_events, invites, outbox
from app.status import RESENDABLE, FailureClass, Status


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Invite:
    """One row of ``invites``, as the rest of the app sees it."""

    id: int
    public_id: str
    sender_id: str
    email: str
    name: str | None
    status: Status
    error: str | None
    attempt: int
    round_first_attempt: int
    created_at: datetime
    updated_at: datetime
    sent_at: datetime | None
    next_attempt_at: datetime | None
    lease_expires_at: datetime | None
    correlation_id: str

    @classmethod
    def from_row(cls, row: Row[Any]) -> Invite:
        data = dict(row._mapping)
        data["status"] = Status(data["status"])
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Event:
    """One row of ``invite_events``: a transition the person can see in the history."""

    id: int
    invite_id: int
    status: Status
    attempt: int
    error: str | None
    next_attempt_at: datetime | None
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row[Any]) -> Event:
        data = dict(row._mapping)
        data["status"] = Status(data["status"])
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Change:
    """A committed transition: the invite as it now is and the event that recorded it."""

    invite: Invite
    event_id: int
    outbox_id: int | None = None  # set when the transition asks for a job (publish it)


@dataclass(frozen=True)
class OutboxEntry:
    """An attempt that needs an arq job."""

    id: int
    invite_id: int
    public_id: str
    attempt: int
    available_at: datetime
    correlation_id: str


def new_public_id() -> str:
    """A random, URL-safe id: invites are never addressed by row number."""
    return secrets.token_urlsafe(12)


def _event_values(invite: Invite, failure_class: FailureClass | None = None) -> dict[str, Any]:
    return {
        "invite_id": invite.id,
        "sender_id": invite.sender_id,
        "status": invite.status.value,
        "attempt": invite.attempt,
        "error": invite.error,
        "next_attempt_at": invite.next_attempt_at if invite.status == Status.PENDENTE else None,
        "created_at": invite.updated_at,
        "failure_class": failure_class.value if failure_class else None,
    }


def _outbox_values(invite: Invite, now: datetime) -> dict[str, Any]:
    return {
        "invite_id": invite.id,
        "attempt": invite.attempt,
        "available_at": invite.next_attempt_at or now,
        "created_at": now,
    }


async def _record(
    conn: AsyncConnection, invite: Invite, failure_class: FailureClass | None = None
) -> int:
    result = await conn.execute(
        insert(invite_events).values(**_event_values(invite, failure_class))
    )
    event_id = result.inserted_primary_key[0] if result.inserted_primary_key else None
    assert event_id is not None
    return int(event_id)


async def _add_outbox(conn: AsyncConnection, invite: Invite, now: datetime) -> int:
    result = await conn.execute(insert(outbox).values(**_outbox_values(invite, now)))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


async def _transition(
    conn: AsyncConnection,
    where: Iterable[Any],
    values: dict[str, Any],
    *,
    enqueue: bool = False,
    failure_class: FailureClass | None = None,
) -> Change | None:
    """Apply one conditional UPDATE; record the event (and an outbox row) if it won."""
    now = values.setdefault("updated_at", utcnow())
    result = await conn.execute(
        update(invites).where(and_(*where)).values(**values).returning(*invites.c)
    )
    row = result.first()
    if row is None:
        return None
    invite = Invite.from_row(row)
    event_id = await _record(conn, invite, failure_class)
    outbox_id = await _add_outbox(conn, invite, now) if enqueue else None
    return Change(invite, event_id, outbox_id)


@dataclass(frozen=True)
class NewInvite:
    """What a request asks for; ``create_invites`` turns it into a ``pendente`` row."""

    sender_id: str
    email: str
    name: str | None
    correlation_id: str


async def create_invites(conn: AsyncConnection, requests: Sequence[NewInvite]) -> list[Change]:
    """Write ``pendente`` invites, their first events and outbox rows: three statements for all.

    Run inside one transaction (``Database.write_many`` for group commit); the caller publishes
    each ``Change.outbox_id`` after the commit.
    """
    now = utcnow()
    result = await conn.execute(
        insert(invites).returning(*invites.c, sort_by_parameter_order=True),
        [
            {
                "public_id": new_public_id(),
                "sender_id": request.sender_id,
                "email": request.email,
                "name": request.name,
                "status": Status.PENDENTE.value,
                "attempt": 1,
                "round_first_attempt": 1,
                "created_at": now,
                "updated_at": now,
                "sent_at": None,
                "next_attempt_at": now,
                "lease_expires_at": None,
                "error": None,
                "correlation_id": request.correlation_id,
            }
            for request in requests
        ],
    )
    created = [Invite.from_row(row) for row in result.all()]
    event_ids = await _ids(conn, invite_events, [_event_values(invite) for invite in created])
    outbox_ids = await _ids(conn, outbox, [_outbox_values(invite, now) for invite in created])
    return [
        Change(invite, event_id, outbox_id)
        for invite, event_id, outbox_id in zip(created, event_ids, outbox_ids, strict=True)
    ]


async def _ids(conn: AsyncConnection, table: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert ``rows`` in one statement; their new ids, in the order given."""
    result = await conn.execute(
        insert(table).returning(table.c.id, sort_by_parameter_order=True), rows
    )
    return [int(row[0]) for row in result.all()]


async def create_invite(
    db: Database, *, sender_id: str, email: str, name: str | None, correlation_id: str
) -> Change:
    """Write a ``pendente`` invite, its first event and its outbox row in one transaction.

    Concurrent calls share one durable transaction (group commit); each returns after it
    committed. The caller publishes the outbox row (``Change.outbox_id``).
    """
    return await db.write_many(create_invites, NewInvite(sender_id, email, name, correlation_id))


async def _transition_each(
    conn: AsyncConnection,
    keys: Sequence[tuple[Any, int]],
    key_columns: tuple[Any, Any],
    from_status: Status,
    values: dict[str, Any],
) -> list[Change | None]:
    """One conditional UPDATE for many rows (``WHERE (key, attempt) IN … AND status = …``).

    Each key wins or loses on its own, exactly as with one UPDATE per row; a key asked twice
    in one batch (a redelivered job) wins at most once. The events are one INSERT.
    """
    result = await conn.execute(
        update(invites)
        .where(tuple_(*key_columns).in_(list(dict.fromkeys(keys))))
        .where(invites.c.status == from_status.value)
        .values(**values)
        .returning(*invites.c)
    )
    won = [Invite.from_row(row) for row in result.all()]
    event_ids = await _ids(conn, invite_events, [_event_values(invite) for invite in won])
    changes: dict[tuple[Any, int], Change] = {
        (getattr(invite, key_columns[0].name), invite.attempt): Change(invite, event_id)
        for invite, event_id in zip(won, event_ids, strict=True)
    }
    return [changes.pop(key, None) for key in keys]


@dataclass(frozen=True)
class _Claim:
    public_id: str
    attempt: int
    lease_seconds: float


async def _claim_each(conn: AsyncConnection, claims: Sequence[_Claim]) -> list[Change | None]:
    now = utcnow()
    lease_seconds = claims[0].lease_seconds
    if any(claim.lease_seconds != lease_seconds for claim in claims):
        return [(await _claim_each(conn, [claim]))[0] for claim in claims]
    return await _transition_each(
        conn,
        [(claim.public_id, claim.attempt) for claim in claims],
        (invites.c.public_id, invites.c.attempt),
        Status.PENDENTE,
        {
            "status": Status.ENVIANDO.value,
            "lease_expires_at": now + timedelta(seconds=lease_seconds),
            "updated_at": now,
        },
    )


async def claim_for_sending(
    db: Database, public_id: str, attempt: int, lease_seconds: float
) -> Change | None:
    """``pendente → enviando`` for this attempt; ``None`` means someone else has it (or had).

    Committed with other jobs' claims (group commit, one UPDATE for all) before it returns:
    the send starts only after the claim is durable.
    """
    return await db.write_many(_claim_each, _Claim(public_id, attempt, lease_seconds))


def _sending(invite: Invite) -> list[Any]:
    return [
        invites.c.id == invite.id,
        invites.c.status == Status.ENVIANDO.value,
        invites.c.attempt == invite.attempt,
    ]


async def _mark_sent_each(conn: AsyncConnection, sending: Sequence[Invite]) -> list[Change | None]:
    now = utcnow()
    return await _transition_each(
        conn,
        [(invite.id, invite.attempt) for invite in sending],
        (invites.c.id, invites.c.attempt),
        Status.ENVIANDO,
        {
            "status": Status.ENVIADO.value,
            "error": None,
            "sent_at": now,
            "updated_at": now,
            "lease_expires_at": None,
            "next_attempt_at": None,
        },
    )


async def mark_sent(db: Database, invite: Invite) -> Change | None:
    """``enviando → enviado``: the mail server accepted the message.

    Committed with other jobs' verdicts (group commit, one UPDATE for all) before it returns.
    """
    return await db.write_many(_mark_sent_each, invite)


async def schedule_retry(db: Database, invite: Invite, error: str, delay: float) -> Change | None:
    """``enviando → pendente`` with the next attempt number, due after ``delay`` seconds."""
    now = utcnow()
    async with db.write() as conn:
        return await _transition(
            conn,
            _sending(invite),
            {
                "status": Status.PENDENTE.value,
                "error": error,
                "attempt": invite.attempt + 1,
                "next_attempt_at": now + timedelta(seconds=delay),
                "lease_expires_at": None,
                "updated_at": now,
            },
            enqueue=True,
        )


async def mark_failed(
    db: Database, invite: Invite, error: str, *, exhausted: bool = False
) -> Change | None:
    """``enviando → falhou``: a permanent refusal, or (``exhausted``) the last automatic
    attempt of the round failed with a transient error. The event records which, for metrics."""
    async with db.write() as conn:
        return await _transition(
            conn,
            _sending(invite),
            {
                "status": Status.FALHOU.value,
                "error": error,
                "lease_expires_at": None,
                "next_attempt_at": None,
            },
            failure_class=FailureClass.TRANSIENT_EXHAUSTED if exhausted else FailureClass.PERMANENT,
        )


async def release_claim(db: Database, invite: Invite, reason: str) -> Change | None:
    """``enviando → pendente``, same attempt: the worker stopped before any byte of mail left."""
    now = utcnow()
    async with db.write() as conn:
        return await _transition(
            conn,
            _sending(invite),
            {
                "status": Status.PENDENTE.value,
                "error": reason,
                "lease_expires_at": None,
                "next_attempt_at": now,
                "updated_at": now,
            },
            enqueue=True,
        )


async def mark_uncertain(db: Database, invite: Invite, reason: str) -> Change | None:
    """``enviando → incerto``: the message may have left; only the person may send again."""
    async with db.write() as conn:
        return await _transition(
            conn,
            _sending(invite),
            {"status": Status.INCERTO.value, "error": reason, "lease_expires_at": None},
            failure_class=FailureClass.UNCERTAIN,
        )


async def expire_leases(db: Database, reason: str) -> list[Change]:
    """Every ``enviando`` row whose lease ran out becomes ``incerto`` (never re-sent)."""
    now = utcnow()
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(invites).where(
                    invites.c.status == Status.ENVIANDO.value, invites.c.lease_expires_at < now
                )
            )
        ).all()
    changes = []
    for row in rows:
        change = await mark_uncertain(db, Invite.from_row(row), reason)
        if change is not None:
            changes.append(change)
    return changes


async def request_resend(db: Database, sender_id: str, public_id: str) -> Change | None:
    """``falhou | incerto → pendente``, a new attempt with a fresh retry budget.

    ``None`` when the invite is in any other state (a double click's second request lands here).
    """
    async with db.write() as conn:
        return await _transition(
            conn,
            [
                invites.c.public_id == public_id,
                invites.c.sender_id == sender_id,
                invites.c.status.in_([s.value for s in RESENDABLE]),
            ],
            _resend_values(utcnow()),
            enqueue=True,
        )


def _resend_values(now: datetime) -> dict[str, Any]:
    return {
        "status": Status.PENDENTE.value,
        "error": None,
        "attempt": invites.c.attempt + 1,
        "round_first_attempt": invites.c.attempt + 1,
        "next_attempt_at": now,
        "updated_at": now,
    }


async def request_resend_many(
    db: Database,
    status: Status,
    *,
    reason: str | None = None,
    reason_contains: str | None = None,
    limit: int = 1000,
) -> list[Change]:
    """An operator's bulk retry: ``status → pendente`` for every invite in ``status`` (one of
    ``falhou``/``incerto``) whose reason is ``reason`` (exact) or contains ``reason_contains``.

    Each row goes through its own conditional UPDATE (still in ``status``, still with that
    reason), its own event and its own outbox row, like ``request_resend``; rows that changed
    meanwhile are skipped. The caller publishes the outbox rows.
    """
    if status not in RESENDABLE:
        raise ValueError(f"only {', '.join(RESENDABLE)} invites can be sent again, not {status}")
    where: list[Any] = [invites.c.status == status.value]
    if reason is not None:
        where.append(invites.c.error == reason)
    if reason_contains is not None:
        where.append(invites.c.error.contains(reason_contains, autoescape=True))
    changes: list[Change] = []
    async with db.write() as conn:
        ids = (
            await conn.execute(
                select(invites.c.id).where(*where).order_by(invites.c.id).limit(limit)
            )
        ).scalars()
        for invite_id in list(ids):
            change = await _transition(
                conn, [invites.c.id == invite_id, *where], _resend_values(utcnow()), enqueue=True
            )
            if change is not None:
                changes.append(change)
    return changes


# --- reads ------------------------------------------------------------------------------


async def get_invite(db: Database, sender_id: str, public_id: str) -> Invite | None:
    """The sender's invite, or ``None``: someone else's invite does not exist for them."""
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(invites).where(
                    invites.c.public_id == public_id, invites.c.sender_id == sender_id
                )
            )
        ).first()
    return Invite.from_row(row) if row else None


async def get_invite_by_public_id(db: Database, public_id: str) -> Invite | None:
    """For the worker, which acts on behalf of every sender."""
    async with db.read() as conn:
        row = (await conn.execute(select(invites).where(invites.c.public_id == public_id))).first()
    return Invite.from_row(row) if row else None


async def list_invites(
    db: Database, sender_id: str, *, before: int | None = None, limit: int = 20
) -> list[Invite]:
    """The sender's invites, newest first; ``before`` is the row id where the page starts."""
    query = select(invites).where(invites.c.sender_id == sender_id)
    if before is not None:
        query = query.where(invites.c.id < before)
    async with db.read() as conn:
        rows = (await conn.execute(query.order_by(invites.c.id.desc()).limit(limit))).all()
    return [Invite.from_row(row) for row in rows]


async def round_started_at(db: Database, invite: Invite) -> datetime:
    """When the current round began: the 202, or the person's (or operator's) resend."""
    if invite.round_first_attempt == 1:
        return invite.created_at
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
    return [Event.from_row(row) for row in rows]


async def events_since(
    db: Database, sender_id: str, after_id: int, limit: int = 500
) -> list[tuple[Event, Invite]]:
    """The sender's events newer than ``after_id``, oldest first, each with its invite now."""
    query = (
        select(invite_events, invites)
        .join(invites, invites.c.id == invite_events.c.invite_id)
        .where(invite_events.c.sender_id == sender_id, invite_events.c.id > after_id)
        .order_by(invite_events.c.id)
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    pairs = []
    for row in rows:
        values = list(row)
        event_cols = len(invite_events.c)
        event_data = dict(zip(invite_events.c.keys(), values[:event_cols], strict=True))
        invite_data = dict(zip(invites.c.keys(), values[event_cols:], strict=True))
        event_data["status"] = Status(event_data["status"])
        invite_data["status"] = Status(invite_data["status"])
        pairs.append(
            (
                Event(**{k: event_data[k] for k in Event.__dataclass_fields__}),
                Invite(**{k: invite_data[k] for k in Invite.__dataclass_fields__}),
            )
        )
    return pairs


async def latest_event_ids(db: Database, invite_ids: Sequence[int]) -> dict[int, int]:
    """The newest event id of each invite: the version a rendered row shows."""
    if not invite_ids:
        return {}
    query = (
        select(invite_events.c.invite_id, func.max(invite_events.c.id))
        .where(invite_events.c.invite_id.in_(list(invite_ids)))
        .group_by(invite_events.c.invite_id)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return {int(invite_id): int(event_id) for invite_id, event_id in rows}


async def last_event_id(db: Database, sender_id: str | None = None) -> int:
    """The newest event id of this sender, or of anyone without one (0 when there is none)."""
    query = select(func.max(invite_events.c.id))
    if sender_id is not None:
        query = query.where(invite_events.c.sender_id == sender_id)
    async with db.read() as conn:
        value = (await conn.execute(query)).scalar()
    return int(value or 0)


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
    """Each sender with events newer than ``after_id``, and its newest event id (one range
    scan of the primary key: the live hub's check for wake-ups that never arrived)."""
    query = (
        select(invite_events.c.sender_id, func.max(invite_events.c.id))
        .where(invite_events.c.id > after_id)
        .group_by(invite_events.c.sender_id)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return {str(sender): int(newest) for sender, newest in rows}


# --- the outbox and the sweeper's reads --------------------------------------------------


def _outbox_query() -> Any:
    return select(
        outbox.c.id,
        outbox.c.invite_id,
        invites.c.public_id,
        outbox.c.attempt,
        outbox.c.available_at,
        invites.c.correlation_id,
    ).join(invites, invites.c.id == outbox.c.invite_id)


async def unpublished_outbox(
    db: Database, created_before: datetime, limit: int = 500
) -> list[OutboxEntry]:
    """Outbox rows no one has enqueued yet (the request's fast path may have failed)."""
    query = (
        _outbox_query()
        .where(outbox.c.published_at.is_(None), outbox.c.created_at < created_before)
        .order_by(outbox.c.id)
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return [OutboxEntry(**row._mapping) for row in rows]


def outbox_entry_of(change: Change) -> OutboxEntry | None:
    """The outbox row a transition just wrote, from what it returned (no re-read)."""
    if change.outbox_id is None:
        return None
    invite = change.invite
    return OutboxEntry(
        id=change.outbox_id,
        invite_id=invite.id,
        public_id=invite.public_id,
        attempt=invite.attempt,
        available_at=invite.next_attempt_at or invite.updated_at,
        correlation_id=invite.correlation_id,
    )


async def outbox_entry(db: Database, outbox_id: int) -> OutboxEntry:
    async with db.read() as conn:
        row = (await conn.execute(_outbox_query().where(outbox.c.id == outbox_id))).one()
    return OutboxEntry(**row._mapping)


async def mark_published(db: Database, outbox_id: int, job_id: str) -> None:
    """Record that the job for this outbox row is in the queue (group commit)."""
    await db.write_many(_mark_published, (outbox_id, job_id))


async def _mark_published(
    conn: AsyncConnection, published: Sequence[tuple[int, str]]
) -> list[None]:
    statement = (
        update(outbox)
        .where(outbox.c.id == bindparam("outbox_id"), outbox.c.published_at.is_(None))
        .values(published_at=utcnow(), job_id=bindparam("new_job_id"))
    )
    await conn.execute(
        statement, [{"outbox_id": row, "new_job_id": job_id} for row, job_id in published]
    )
    return [None] * len(published)


async def overdue_pending(
    db: Database, due_before: datetime, limit: int = 500
) -> list[tuple[Invite, str | None]]:
    """``pendente`` rows due before ``due_before``, each with the job id last published for it.

    The sweeper asks Redis whether that job is still alive (``None``: no job was ever
    published). Rows whose newest outbox entry is still unpublished are left to the relay.
    """
    latest = (
        select(outbox.c.invite_id, func.max(outbox.c.id).label("outbox_id"))
        .group_by(outbox.c.invite_id)
        .subquery()
    )
    query = (
        select(invites, outbox.c.job_id)
        .join(latest, latest.c.invite_id == invites.c.id, isouter=True)
        .join(outbox, outbox.c.id == latest.c.outbox_id, isouter=True)
        .where(
            invites.c.status == Status.PENDENTE.value,
            invites.c.next_attempt_at < due_before,
            or_(latest.c.outbox_id.is_(None), outbox.c.published_at.is_not(None)),
        )
        .order_by(invites.c.id)
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return [(Invite.from_row(row), row._mapping["job_id"]) for row in rows]


async def requeue(db: Database, invites_to_requeue: Sequence[Invite]) -> list[int]:
    """New outbox rows for ``pendente`` invites whose job was lost; no state changes."""
    now = utcnow()
    ids = []
    async with db.write() as conn:
        for invite in invites_to_requeue:
            ids.append(await _add_outbox(conn, invite, now))
    return ids
