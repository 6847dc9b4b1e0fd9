"""The machinery every transition shares: one conditional UPDATE, and for each row it won an
``invite_events`` row (and, when asked, an outbox row), in the same transaction.

These are synchronous functions of a SQLAlchemy ``Connection``: the group commit runs them on
its writer thread with the synchronous driver (``app.db``), and a transaction of its own calls
them through ``AsyncConnection.run_sync``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    Connection,
    CursorResult,
    Insert,
    Row,
    Update,
    and_,
    bindparam,
    insert,
    update,
)

from app.clock import utcnow
from app.db import Database
from app.models import invite_events, invites, keyed_in, keyed_params, outbox, unindexed
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


def insert_in_order(
    conn: Connection, table: Any, rows: list[dict[str, Any]], key: str, *returning: Any
) -> list[Row[Any]]:
    """Insert ``rows`` in one multi-row statement; what RETURNING gave, in the order of ``rows``.

    Matched on ``key``, a column whose value is unique among ``rows``. Not SQLAlchemy's
    ``sort_by_parameter_order``: SQLite does not promise the order of RETURNING, so SQLAlchemy
    then sends one INSERT per row (60 statements for a group commit of 20 invites).
    """
    if not rows:
        return []
    column = table.c[key]
    columns = returning if any(c is column for c in returning) else (column, *returning)
    result = conn.execute(_insert_returning(table, columns), rows)
    by_key = {row._mapping[column]: row for row in result.all()}
    if len(by_key) != len(rows):
        raise ValueError(f"{table.name}.{key} is not unique among the rows inserted together")
    return [by_key[row[key]] for row in rows]


@cache
def _insert_returning(table: Any, columns: tuple[Any, ...]) -> Insert:
    # Built once per shape: the hot paths insert with it every batch (see _keyed_update).
    return insert(table).returning(*columns)


def insert_ids(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert ``rows`` (one per invite) in one statement; their new ids, in the order given."""
    return [int(row.id) for row in insert_in_order(conn, table, rows, "invite_id", table.c.id)]


def record_changes(
    conn: Connection,
    won: list[Invite],
    *,
    enqueue: bool = False,
    failure_class: FailureClass | None = None,
) -> list[Change]:
    """Record one event (and, with ``enqueue``, one outbox row) for each invite that changed."""
    event_ids = insert_ids(conn, invite_events, [_event_values(i, failure_class) for i in won])
    if not enqueue:
        return [Change(invite, event_id) for invite, event_id in zip(won, event_ids, strict=True)]
    now = utcnow()
    outbox_ids = insert_ids(conn, outbox, [outbox_values(invite, now) for invite in won])
    return [
        Change(invite, event_id, outbox_id)
        for invite, event_id, outbox_id in zip(won, event_ids, outbox_ids, strict=True)
    ]


def transition_all(
    conn: Connection,
    where: Iterable[Any],
    values: dict[str, Any],
    *,
    enqueue: bool = False,
    failure_class: FailureClass | None = None,
) -> list[Change]:
    """One conditional UPDATE; an event (and an outbox row) for every row it won."""
    values.setdefault("updated_at", utcnow())
    result = conn.execute(
        update(invites).where(and_(*where)).values(**values).returning(*invites.c)
    )
    return _record_won(conn, result, enqueue=enqueue, failure_class=failure_class)


def _record_won(conn: Connection, result: CursorResult[Any], **options: Any) -> list[Change]:
    won = [record_from(Invite, row) for row in result.all()]
    return record_changes(conn, won, **options)


async def transition(
    db: Database, where: Iterable[Any], values: dict[str, Any], **options: Any
) -> Change | None:
    """``transition_all`` (same options) for one row, in a transaction of its own."""
    async with db.write() as conn:
        changes = await conn.run_sync(transition_all, where, values, **options)
    return changes[0] if changes else None


@cache
def _keyed_update(
    key_names: tuple[str, str], from_status: Status, names: tuple[str, ...]
) -> Update:
    """``transition_each``'s UPDATE for one shape (key columns, status, columns set), built once.

    Its keys and new values are bound when it runs, so a batch costs SQLAlchemy no expression
    building and no cache-key walk (the statement keeps the key it derived once): on the
    worker's write lane that Python work had cost more than SQLite's own for a batch of ten."""
    key_columns = tuple(invites.c[name] for name in key_names)
    return (
        update(invites)
        .where(*keyed_in(key_columns), unindexed(invites.c.status) == from_status.value)
        .values({name: bindparam(f"new_{name}", type_=invites.c[name].type) for name in names})
        .returning(*invites.c)
    )


def transition_each(
    conn: Connection,
    keys: Sequence[tuple[Any, int]],
    key_columns: tuple[Any, Any],
    from_status: Status,
    values: dict[str, Any],
) -> list[Change | None]:
    """One conditional UPDATE for many rows (``WHERE (key, attempt) IN … AND status = …``).

    Each key wins or loses on its own, exactly as with one UPDATE per row; a key asked twice
    in one batch (a redelivered job) wins at most once. The events are one INSERT. The key
    columns are ``invites``' own, and ``values`` are plain values, bound when the statement
    runs (not SQL expressions, which ``transition_all`` takes).
    """
    values.setdefault("updated_at", utcnow())
    statement = _keyed_update(
        (key_columns[0].name, key_columns[1].name), from_status, tuple(sorted(values))
    )
    parameters = keyed_params(keys)
    parameters.update({f"new_{name}": value for name, value in values.items()})
    changes = _record_won(conn, conn.execute(statement, parameters))
    by_key: dict[tuple[Any, int], Change] = {
        (getattr(change.invite, key_columns[0].name), change.invite.attempt): change
        for change in changes
    }
    return [by_key.pop(key, None) for key in keys]
