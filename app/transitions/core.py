"""The machinery every transition shares: one conditional UPDATE, and for each row it won an
``invite_events`` row (and, when asked, an outbox row), in the same transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, insert, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.clock import utcnow
from app.db import Database
from app.models import invite_events, invites, outbox
from app.outbox import outbox_values
from app.records import Change, Invite, record_from
from app.status import FailureClass, Status


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


async def insert_ids(conn: AsyncConnection, table: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert ``rows`` in one statement; their new ids, in the order given."""
    if not rows:
        return []
    result = await conn.execute(
        insert(table).returning(table.c.id, sort_by_parameter_order=True), rows
    )
    return [int(row[0]) for row in result.all()]


async def record_changes(
    conn: AsyncConnection,
    won: list[Invite],
    *,
    enqueue: bool = False,
    failure_class: FailureClass | None = None,
) -> list[Change]:
    """Record one event (and, with ``enqueue``, one outbox row) for each invite that changed."""
    event_ids = await insert_ids(
        conn, invite_events, [_event_values(i, failure_class) for i in won]
    )
    if not enqueue:
        return [Change(invite, event_id) for invite, event_id in zip(won, event_ids, strict=True)]
    now = utcnow()
    outbox_ids = await insert_ids(conn, outbox, [outbox_values(invite, now) for invite in won])
    return [
        Change(invite, event_id, outbox_id)
        for invite, event_id, outbox_id in zip(won, event_ids, outbox_ids, strict=True)
    ]


async def transition_all(
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
    return await record_changes(conn, won, enqueue=enqueue, failure_class=failure_class)


async def transition(
    db: Database, where: Iterable[Any], values: dict[str, Any], **options: Any
) -> Change | None:
    """``_transition_all`` (same options) for one row, in a transaction of its own."""
    async with db.write() as conn:
        changes = await transition_all(conn, where, values, **options)
    return changes[0] if changes else None


async def transition_each(
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
    changes = await transition_all(
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
