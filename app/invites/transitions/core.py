"""What every transition shares: one conditional UPDATE, and for each row it won an event row
(and, when asked, an outbox row), plus one webhook delivery per active webhook of its sender, in
the same transaction. Synchronous, for ``run_sync``."""

from __future__ import annotations

import secrets
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
    case,
    func,
    insert,
    select,
    update,
)

from app.clock import utcnow
from app.invites.records import INVITE, Change, Invite, record_from
from app.invites.status import FailureClass, Status
from app.storage.database import Database
from app.storage.tables import (
    accounts,
    invite_events,
    invites,
    keyed_in,
    keyed_params,
    outbox,
    unindexed,
    webhook_deliveries,
    webhooks,
)


def insert_in_order(
    conn: Connection, table: Any, rows: list[dict[str, Any]], key: str, *returning: Any
) -> list[Row[Any]]:
    """Insert ``rows`` in one statement; RETURNING's rows in the order of ``rows``, matched on
    ``key`` (unique among them): ``sort_by_parameter_order`` would send one INSERT per row."""
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
    """Record one event (and, with ``enqueue``, one outbox row) for each invite that changed.

    Each row is copied from its invite as the caller's statement left it (``INSERT … SELECT``,
    only the ids bound), so the caller must not change these invites again before this."""
    if not won:
        return []
    ids = [invite.id for invite in won]
    if len(set(ids)) != len(ids):
        raise ValueError("an invite recorded twice by one transition")
    class_value = failure_class.value if failure_class else None
    event_ids = _copied_ids(conn, _EVENTS_FROM_INVITES, ids, {"failure_class": class_value})
    record_deliveries(conn, won, event_ids)
    if not enqueue:
        return [Change(invite, event_id) for invite, event_id in zip(won, event_ids, strict=True)]
    outbox_ids = _copied_ids(conn, _OUTBOX_FROM_INVITES, ids, {"now": utcnow()})
    return [
        Change(invite, event_id, outbox_id)
        for invite, event_id, outbox_id in zip(won, event_ids, outbox_ids, strict=True)
    ]


def record_deliveries(conn: Connection, won: list[Invite], event_ids: list[int]) -> None:
    """One ``pendente`` webhook delivery per (active webhook of the sender, event): written with
    the change, so a change is never committed without its deliveries, nor they without it
    (``app.webhooks.deliver`` sends them). One SELECT when the senders have no webhook."""
    changed = [(i, e) for i, e in zip(won, event_ids, strict=True) if i.kind == INVITE]
    senders = sorted({invite.sender_id for invite, _ in changed})
    hooks: dict[str, list[int]] = {}
    for start in range(0, len(senders), IDS_PER_STATEMENT):
        chunk = senders[start : start + IDS_PER_STATEMENT]
        for hook in conn.execute(_ACTIVE_WEBHOOKS, {"senders": chunk}).all():
            hooks.setdefault(hook.sender_id, []).append(int(hook.id))
    if not hooks:
        return
    now = utcnow()
    rows = [
        {
            "public_id": "msg_" + secrets.token_urlsafe(18),
            "webhook_id": webhook_id,
            "event_id": event_id,
            "invite_id": invite.id,
            "event_type": f"convite.{invite.status.value}",
            "email": invite.email,
            "state": "pendente",
            "attempts": 0,
            "available_at": now,
            "enqueues": 0,
            "created_at": now,
            "updated_at": now,
        }
        for invite, event_id in changed
        for webhook_id in hooks.get(invite.sender_id, ())
    ]
    conn.execute(insert(webhook_deliveries), rows)


_ACTIVE_WEBHOOKS = (
    select(webhooks.c.id, accounts.c.public_id.label("sender_id"))
    .join(accounts, accounts.c.id == webhooks.c.account_id)
    .where(
        accounts.c.public_id.in_(bindparam("senders", expanding=True)),
        webhooks.c.disabled_at.is_(None),
    )
)


#: Ids per ``INSERT … SELECT``: far under the 32,766 parameters SQLite and asyncpg take (an
#: unbounded transition, ``expire_leases`` say, may change more rows than one statement binds).
IDS_PER_STATEMENT = 5_000


def _copied_ids(
    conn: Connection, statement: Insert, ids: list[int], params: dict[str, Any]
) -> list[int]:
    """Run an ``INSERT … SELECT … FROM invites`` for ``ids`` (each once); the new row ids, in
    their order."""
    by_invite: dict[int, int] = {}
    for start in range(0, len(ids), IDS_PER_STATEMENT):
        chunk = ids[start : start + IDS_PER_STATEMENT]
        rows = conn.execute(statement, {"ids": chunk, **params}).all()
        by_invite.update((int(row.invite_id), int(row.id)) for row in rows)
    if len(by_invite) != len(ids):
        raise ValueError("an invite to record is missing")
    return [by_invite[invite_id] for invite_id in ids]


def _copy_from_invites(table: Any, columns: dict[str, Any]) -> Insert:
    """``INSERT INTO table (…) SELECT … FROM invites WHERE id IN :ids RETURNING id,
    invite_id``, built once (see ``_keyed_update``)."""
    source = select(*columns.values()).where(invites.c.id.in_(bindparam("ids", expanding=True)))
    return insert(table).from_select(list(columns), source).returning(table.c.id, table.c.invite_id)


_EVENTS_FROM_INVITES = _copy_from_invites(
    invite_events,
    {
        "invite_id": invites.c.id,
        "sender_id": invites.c.sender_id,
        "status": invites.c.status,
        "attempt": invites.c.attempt,
        "error": invites.c.error,
        # When the next attempt is due, on the events that schedule one (for ``agendado``: the
        # moment it is to go, so the history keeps each time the sender chose).
        "next_attempt_at": case(
            (invites.c.status == Status.PENDENTE.value, invites.c.next_attempt_at),
            (invites.c.status == Status.AGENDADO.value, invites.c.send_at),
        ),
        "created_at": invites.c.updated_at,
        "failure_class": bindparam("failure_class", type_=invite_events.c.failure_class.type),
    },
)
_NOW = bindparam("now", type_=outbox.c.created_at.type)
_OUTBOX_FROM_INVITES = _copy_from_invites(
    outbox,
    {
        # Due when the attempt is (as ``app.sending.outbox.outbox_values``).
        "invite_id": invites.c.id,
        "attempt": invites.c.attempt,
        "available_at": func.coalesce(invites.c.next_attempt_at, _NOW),
        "created_at": _NOW,
    },
)


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
    """``transition_each``'s UPDATE for one shape (key columns, status, columns set), built once:
    keys and values are bound when it runs, so a batch rebuilds no expression or cache key."""
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

    Each key wins or loses on its own, as with one UPDATE per row; a key asked twice in one
    batch (a redelivered job) wins at most once. ``values`` are plain values, not SQL
    expressions (``transition_all`` takes those)."""
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
