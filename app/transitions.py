"""The invite state machine: every status change lives here, and nowhere else.

Each transition is one conditional ``UPDATE … WHERE status = …`` plus one ``invite_events``
row per row it changed, in one transaction. A transition that finds the row in another state
changes nothing and returns ``None``: that is how two workers, a redelivered job and a double
click never both win.

    pendente → enviando → enviado | pendente (retry) | falhou
    enviando → incerto (lease expired, or the send broke mid-DATA)
    enviando → pendente (graceful stop before DATA)
    falhou | incerto → pendente (the person, or an operator, asks again)
    enviado | incerto → devolvido (a bounce said the message did not arrive)
    devolvido → pendente (the person corrected the address and asks again)

No web, no Redis here; callers publish the returned changes (``app.queue.Publisher``) and
announce them (``app.live.wakeups.Announcer``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, insert, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.clock import utcnow
from app.db import Database
from app.models import invite_events, invites, outbox
from app.outbox import outbox_values
from app.records import Change, Invite, NewInvite, new_public_id, record_from
from app.status import BOUNCEABLE, CORRECTABLE, RESENDABLE, FailureClass, Status


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


async def _ids(conn: AsyncConnection, table: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert ``rows`` in one statement; their new ids, in the order given."""
    if not rows:
        return []
    result = await conn.execute(
        insert(table).returning(table.c.id, sort_by_parameter_order=True), rows
    )
    return [int(row[0]) for row in result.all()]


async def _changes(
    conn: AsyncConnection,
    won: list[Invite],
    *,
    enqueue: bool = False,
    failure_class: FailureClass | None = None,
) -> list[Change]:
    """Record one event (and, with ``enqueue``, one outbox row) for each invite that changed."""
    event_ids = await _ids(conn, invite_events, [_event_values(i, failure_class) for i in won])
    if not enqueue:
        return [Change(invite, event_id) for invite, event_id in zip(won, event_ids, strict=True)]
    now = utcnow()
    outbox_ids = await _ids(conn, outbox, [outbox_values(invite, now) for invite in won])
    return [
        Change(invite, event_id, outbox_id)
        for invite, event_id, outbox_id in zip(won, event_ids, outbox_ids, strict=True)
    ]


async def _transition_all(
    conn: AsyncConnection,
    where: Iterable[Any],
    values: dict[str, Any],
    *,
    enqueue: bool = False,
    failure_class: FailureClass | None = None,
) -> list[Change]:
    """One conditional UPDATE; an event (and an outbox row) for every row it won."""
    values.setdefault("updated_at", utcnow())
    result = await conn.execute(
        update(invites).where(and_(*where)).values(**values).returning(*invites.c)
    )
    won = [record_from(Invite, row) for row in result.all()]
    return await _changes(conn, won, enqueue=enqueue, failure_class=failure_class)


async def _transition(
    db: Database, where: Iterable[Any], values: dict[str, Any], **options: Any
) -> Change | None:
    """``_transition_all`` (same options) for one row, in a transaction of its own."""
    async with db.write() as conn:
        changes = await _transition_all(conn, where, values, **options)
    return changes[0] if changes else None


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
    created = [record_from(Invite, row) for row in result.all()]
    return await _changes(conn, created, enqueue=True)


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
    changes = await _transition_all(
        conn,
        [
            tuple_(*key_columns).in_(list(dict.fromkeys(keys))),
            invites.c.status == from_status.value,
        ],
        values,
    )
    by_key: dict[tuple[Any, int], Change] = {
        (getattr(change.invite, key_columns[0].name), change.invite.attempt): change
        for change in changes
    }
    return [by_key.pop(key, None) for key in keys]


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
    """Still ``enviando`` under this very claim (the lease has not been taken away)."""
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
    return await _transition(
        db,
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
    return await _transition(
        db,
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
    return await _transition(
        db,
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


_UNCERTAIN = {"status": Status.INCERTO.value, "lease_expires_at": None}


async def mark_uncertain(db: Database, invite: Invite, reason: str) -> Change | None:
    """``enviando → incerto``: the message may have left; only the person may send again."""
    return await _transition(
        db, _sending(invite), {**_UNCERTAIN, "error": reason}, failure_class=FailureClass.UNCERTAIN
    )


async def expire_leases(db: Database, reason: str) -> list[Change]:
    """Every ``enviando`` row whose lease ran out becomes ``incerto`` (never re-sent).

    One conditional UPDATE: a verdict that commits first wins, and this row is left alone.
    """
    async with db.write() as conn:
        return await _transition_all(
            conn,
            [invites.c.status == Status.ENVIANDO.value, invites.c.lease_expires_at < utcnow()],
            {**_UNCERTAIN, "error": reason},
            failure_class=FailureClass.UNCERTAIN,
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


async def request_resend(db: Database, sender_id: str, public_id: str) -> Change | None:
    """``falhou | incerto → pendente``, a new attempt with a fresh retry budget.

    ``None`` when the invite is in any other state (a double click's second request lands here).
    """
    return await _transition(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.status.in_([s.value for s in RESENDABLE]),
        ],
        _resend_values(utcnow()),
        enqueue=True,
    )


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

    One conditional UPDATE (still in ``status``, still with that reason) over the oldest
    ``limit`` such rows; each row it wins gets its own event and outbox row, like
    ``request_resend``. The caller publishes the outbox rows.
    """
    if status not in RESENDABLE:
        raise ValueError(f"only {', '.join(RESENDABLE)} invites can be sent again, not {status}")
    where: list[Any] = [invites.c.status == status.value]
    if reason is not None:
        where.append(invites.c.error == reason)
    if reason_contains is not None:
        where.append(invites.c.error.contains(reason_contains, autoescape=True))
    oldest = select(invites.c.id).where(*where).order_by(invites.c.id).limit(limit)
    async with db.write() as conn:
        changes = await _transition_all(
            conn,
            [invites.c.id.in_(oldest), *where],
            _resend_values(utcnow()),
            enqueue=True,
        )
    return sorted(changes, key=lambda change: change.invite.id)


async def mark_bounced(
    conn: AsyncConnection, invite_id: int, attempt: int | None, reason: str
) -> Change | None:
    """``enviado | incerto → devolvido``: a delivery status notification said it failed for good.

    Runs in the caller's transaction (``app.bounces.store`` records the bounce with it). When the
    bounce names its attempt, only that attempt may turn: a late bounce of an address the person
    has since corrected must not mark the new send. ``None``: the invite is in another state
    (already answered, already devolvido, sent again), and the bounce stays history only.
    """
    where = [invites.c.id == invite_id, invites.c.status.in_([s.value for s in BOUNCEABLE])]
    if attempt is not None:
        where.append(invites.c.attempt == attempt)
    changes = await _transition_all(
        conn,
        where,
        {
            "status": Status.DEVOLVIDO.value,
            "error": reason,
            "lease_expires_at": None,
            "next_attempt_at": None,
        },
    )
    return changes[0] if changes else None


async def correct_and_resend(
    db: Database, sender_id: str, public_id: str, email: str
) -> Change | None:
    """``devolvido → pendente`` with the address the person corrected: a new attempt, a fresh
    retry budget, its own outbox row. The bounce stays in the history.

    ``None`` when the invite is not (or no longer) ``devolvido``.
    """
    return await _transition(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.status.in_([s.value for s in CORRECTABLE]),
        ],
        {**_resend_values(utcnow()), "email": email, "sent_at": None},
        enqueue=True,
    )
