"""The suppression list: addresses nobody may invite, and why.

An address joins it when its owner opts out (``descadastro``), when a bounce says it does not
exist or is disabled (``devolucao``: 5.1.x or 5.2.1 only) or when its owner reports an
invitation as spam (``reclamacao``). Every lookup goes through the SHA-256 of the normalised
address, never the ``email`` column: an erasure (LGPD) can then drop the address and keep only
its hash, and the address stays suppressed.

Each function takes the ``Database`` (its own transaction) or an ``AsyncConnection`` (the
caller's, e.g. the bounce's), so a suppression commits with what caused it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.clock import utcnow
from app.invites import transitions
from app.invites.records import Change, Invite
from app.storage.database import Database
from app.storage.tables import suppressions

log = logging.getLogger(__name__)

Source = Database | AsyncConnection


class Reason(StrEnum):
    """Why an address is on the list (the ``reason`` column)."""

    OPTED_OUT = "descadastro"  # its owner said "Não quero receber convites"
    BOUNCED = "devolucao"  # a 5.1.x or 5.2.1 bounce: no such mailbox, or disabled
    COMPLAINED = "reclamacao"  # its owner reported an invitation as spam (ARF)


#: What a sender hears when an invite to a suppressed address is refused: what happened to the
#: address, never who caused it.
REFUSALS = {
    Reason.OPTED_OUT: "Este endereço pediu para não receber convites.",
    Reason.BOUNCED: "Este endereço não existe (devolução permanente).",
    Reason.COMPLAINED: "Este endereço marcou um convite como spam e não recebe mais convites.",
}

#: What the sender's own row says when its invitee's address joined the list (a bounce's row
#: says it after the bounce's own reason): what happened then, in the past, so the row stays
#: true after the person takes it back or an operator lifts the entry.
ROW_NOTES = {
    Reason.OPTED_OUT: "Pediu para não receber convites.",
    Reason.BOUNCED: "Novos convites para este endereço foram bloqueados.",
    Reason.COMPLAINED: "Marcou o convite como spam.",
}

#: An invite queued before its address joined the list, met by the worker (or a scheduled one,
#: called off when the address joined): never sent. Its row's headline says the tail already.
NOT_SENT_TAIL = " O convite não foi enviado."
NOT_SENT = "{refusal}" + NOT_SENT_TAIL

#: How operators read each reason on ``/operacao`` and in ``python -m app suppression list``.
LABELS = {
    Reason.OPTED_OUT: "Pediu para não receber",
    Reason.BOUNCED: "Devolução permanente",
    Reason.COMPLAINED: "Marcou como spam",
}


@dataclass(frozen=True)
class Suppression:
    """One entry of the list. ``email`` is ``None`` once the address was erased."""

    address_hash: str
    email: str | None
    reason: Reason
    created_at: datetime
    detail: str | None


def address_hash(email: str) -> str:
    """The key of ``email`` on the list: hex SHA-256 of the address, stripped and lower-cased."""
    return hashlib.sha256(email.strip().lower().encode()).hexdigest()


@asynccontextmanager
async def _connection(source: Source, *, write: bool) -> AsyncIterator[AsyncConnection]:
    if isinstance(source, AsyncConnection):
        yield source
        return
    opened = source.write() if write else source.read()
    async with opened as conn:
        yield conn


def _entry(row: object) -> Suppression:
    mapping = row._mapping  # type: ignore[attr-defined]
    return Suppression(
        mapping["address_hash"],
        mapping["email"],
        Reason(mapping["reason"]),
        mapping["created_at"],
        mapping["detail"],
    )


async def suppress(source: Source, email: str, reason: Reason, detail: str | None = None) -> bool:
    """Put ``email`` on the list for ``reason``; ``True`` if it was not on it. An address
    already there keeps its first reason: the same opt-out twice (a one-click POST repeated by
    a mail provider) changes nothing."""
    values = {
        "address_hash": address_hash(email),
        "email": email.strip().lower(),
        "reason": reason.value,
        "created_at": utcnow(),
        "detail": detail[:200] if detail else None,
    }
    async with _connection(source, write=True) as conn:
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        statement = (
            dialect.insert(suppressions)
            .values(**values)
            .on_conflict_do_nothing(index_elements=["address_hash"])
            .returning(suppressions.c.address_hash)
        )
        added = (await conn.execute(statement)).scalar() is not None
    if added:
        log.info(
            "address suppressed",
            extra={"address_hash": values["address_hash"], "reason": reason.value},
        )
    return added


async def entry_for(source: Source, email: str) -> Suppression | None:
    """The list's entry for ``email``, if any. Every accept and every send asks: askers of the
    same moment share one read (``Database.read_many``), as they share a session lookup."""
    if isinstance(source, Database):
        return await source.read_many(_entries_of, address_hash(email))
    [entry] = await source.run_sync(_entries_of, [address_hash(email)])
    return entry


def _entries_of(conn: Connection, hashes: Sequence[str]) -> list[Suppression | None]:
    """The entry of each address hash (``None``: not on the list), in one statement."""
    query = select(suppressions).where(suppressions.c.address_hash.in_(set(hashes)))
    found = {row.address_hash: _entry(row) for row in conn.execute(query).all()}
    return [found.get(digest) for digest in hashes]


async def reason_for(source: Source, email: str) -> Reason | None:
    """Why ``email`` may not be invited (``None``: it may)."""
    entry = await entry_for(source, email)
    return entry.reason if entry is not None else None


async def refusal_for(source: Source, email: str) -> str | None:
    """The pt-BR words refusing an invite to ``email`` (``None``: it may be invited)."""
    reason = await reason_for(source, email)
    return REFUSALS[reason] if reason is not None else None


async def reasons_for(source: Source, emails: Iterable[str]) -> dict[str, Reason]:
    """``reason_for`` of many addresses in one read: only the suppressed ones, by address."""
    by_hash = {address_hash(email): email for email in emails}
    if not by_hash:
        return {}
    async with _connection(source, write=False) as conn:
        entries = await conn.run_sync(_entries_of, list(by_hash))
    return {by_hash[e.address_hash]: e.reason for e in entries if e is not None}


async def listing(source: Source, limit: int = 200) -> list[Suppression]:
    """The newest ``limit`` entries, newest first (what operators see)."""
    query = (
        select(suppressions)
        .order_by(suppressions.c.created_at.desc(), suppressions.c.address_hash)
        .limit(limit)
    )
    async with _connection(source, write=False) as conn:
        rows = (await conn.execute(query)).all()
    return [_entry(row) for row in rows]


async def lift(
    source: Source, email: str, *, by: str, why: str, only: Reason | None = None
) -> Suppression | None:
    """Take ``email`` off the list (``only``: only if it is there for that reason, as when the
    owner takes back their own opt-out); the entry removed, or ``None``."""
    return await lift_hash(source, address_hash(email), by=by, why=why, only=only)


async def lift_hash(
    source: Source, key: str, *, by: str, why: str, only: Reason | None = None
) -> Suppression | None:
    """``lift`` by the entry's key (an erased entry has no address left to name it by).
    Logged with who lifted it and why, by the hash: the log never holds the address."""
    where = [suppressions.c.address_hash == key]
    if only is not None:
        where.append(suppressions.c.reason == only.value)
    async with _connection(source, write=True) as conn:
        removed = delete(suppressions).where(*where).returning(*suppressions.c)
        row = (await conn.execute(removed)).first()
        if row is None:
            return None
        entry = _entry(row)
        if entry.email is not None:
            # What the entry called off goes at its moment again; the senders' open pages hear
            # it from the live hub's periodic check (no caller here holds an announcer).
            note = NOT_SENT.format(refusal=REFUSALS[entry.reason])
            await transitions.restore_called_off(conn, entry.email, note)
    log.warning(
        "suppression lifted",
        extra={
            "address_hash": entry.address_hash,
            "reason": entry.reason.value,
            "lifted_by": by,
            "why": why,
        },
    )
    return entry


async def erase(source: Source, email: str) -> Reason | None:
    """For an erasure (LGPD): an opt-out stays as its hash alone (``email`` set to NULL) so
    the person is still never invited; any other entry is deleted. The reason the entry had."""
    key = address_hash(email)
    async with _connection(source, write=True) as conn:
        kept = await conn.execute(
            update(suppressions)
            .where(
                suppressions.c.address_hash == key,
                suppressions.c.reason == Reason.OPTED_OUT.value,
            )
            .values(email=None, detail=None)
            .returning(suppressions.c.reason)
        )
        if kept.first() is not None:
            return Reason.OPTED_OUT
        removed = await conn.execute(
            delete(suppressions)
            .where(suppressions.c.address_hash == key)
            .returning(suppressions.c.reason)
        )
        row = removed.first()
    return Reason(row.reason) if row is not None else None


async def suppress_and_call_off(
    conn: AsyncConnection, email: str, reason: Reason, detail: str | None = None
) -> tuple[bool, list[Change]]:
    """``suppress`` in the caller's transaction, with the scheduled invitations to the address
    (any sender's) cancelled for the reason (``transitions.call_off_for``): whether the address
    was new to the list, and those changes, to announce."""
    added = await suppress(conn, email, reason, detail)
    note = NOT_SENT.format(refusal=REFUSALS[reason])
    return added, await transitions.call_off_for(conn, email, note)


@dataclass(frozen=True)
class Unwanted:
    """What an opt-out or complaint did: whether the address was new to the list, and the
    changes to announce: the sender's row (``None``: it did not change), and the scheduled
    invitations to the address, called off."""

    added: bool
    change: Change | None
    called_off: list[Change]


async def suppress_from_invite(
    conn: AsyncConnection, invite: Invite, reason: Reason, detail: str | None = None
) -> Unwanted:
    """``invite``'s address joins the list because its invitee opted out or complained, and in
    the same transaction the sender's row says so (``recusado`` with the note; an accepted
    invite keeps its answer)."""
    added, called_off = await suppress_and_call_off(conn, invite.email, reason, detail)
    change = await transitions.mark_unwanted(conn, invite.id, ROW_NOTES[reason])
    return Unwanted(added, change, called_off)
