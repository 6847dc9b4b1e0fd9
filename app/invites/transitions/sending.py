"""Sending: a new row, the worker's claim, and its verdicts (sent, retry, failed, uncertain).

pendente → enviando → enviado | pendente (retry) | falhou
enviando → incerto (lease expired, or the send broke mid-DATA)
enviando → pendente (graceful stop before DATA; the hourly budget is spent)
enviando → cancelado (the address is on the suppression list: never sent)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ARRAY, BigInteger, Connection, func, literal, select

from app.clock import utcnow
from app.invites.links import issue_for_claims
from app.invites.records import (
    INVITE,
    Change,
    Duplicate,
    Invite,
    NewInvite,
    Occasion,
    new_public_id,
    record_from,
)
from app.invites.status import ON_ITS_WAY, FailureClass, Status
from app.invites.transitions.core import (
    insert_in_order,
    record_changes,
    transition,
    transition_all,
    transition_each,
)
from app.invites.validation import same_address
from app.storage.database import Database
from app.storage.tables import invites, keyed_in, keyed_params, unindexed


def on_its_way(row: Any) -> list[Any]:
    """The conditions under which ``row`` (``invites``, or an alias of it) makes a second
    invitation from its sender to its address a duplicate: an invitation in ``ON_ITS_WAY``.
    The one definition, so a new invite (``create_invites``), a resend and a correction
    (``again``) refuse the same duplicates. The caller pairs it with the same sender and the same
    mailbox (``lower(email)``, ``validation.same_address``: ``Ana@`` is ``ana@``), which
    ix_invites_sender_email serves."""
    # The status through no index: the rows are found on ix_invites_sender_email.
    return [row.c.kind == INVITE, unindexed(row.c.status).in_([s.value for s in ON_ITS_WAY])]


def hold_senders(conn: Connection, sender_ids: Iterable[str]) -> None:
    """PostgreSQL: hold each sender until the commit before checking for (and writing) an
    invitation on its way. Under READ COMMITTED a statement sees what committed before it
    started, so two transactions writing to one address at the same moment (a new invite and a
    resend, or two new invites) would both find the way clear; with this lock the second waits,
    and its check, run after the first committed, sees the first's row. Taken in one step per
    transaction, sorted (a group commit's new invites in one ``create_invites``; a batch and a
    resend each in a transaction of its own), before any row lock of that transaction's
    invitations, so these waits cannot close a cycle. SQLite needs none: it has one writer at a
    time."""
    if conn.dialect.name != "postgresql":
        return
    keys = {
        int.from_bytes(hashlib.sha256(sender.encode()).digest()[:8], "big", signed=True)
        for sender in sender_ids
    }
    if not keys:
        return
    # One round trip: the array is scanned in its (sorted) order, one lock after another.
    key = func.unnest(literal(sorted(keys), ARRAY(BigInteger))).column_valued("key")
    conn.execute(select(func.pg_advisory_xact_lock(key)))


# Built once: an accept batch binds only its (sender, mailbox) pairs (see core._keyed_update).
_ON_THEIR_WAY = select(invites).where(
    *keyed_in((invites.c.sender_id, func.lower(invites.c.email))), *on_its_way(invites)
)


def mailbox_of(sender_id: str, email: str) -> tuple[str, str]:
    """The key two invitations from one sender to one mailbox share."""
    return sender_id, same_address(email)


def to_mailbox(row: Any, sender_id: Any, email: Any) -> list[Any]:
    """``row`` is from ``sender_id`` to the mailbox of ``email`` (each a column or a value), in
    the form ix_invites_sender_email serves."""
    return [row.c.sender_id == sender_id, func.lower(row.c.email) == func.lower(email)]


def on_their_way(conn: Connection, requests: Sequence[NewInvite]) -> dict[tuple[str, str], Invite]:
    """The invites these senders already have on the way (or arrived) to these mailboxes, by
    ``mailbox_of``."""
    pairs = list({mailbox_of(r.sender_id, r.email) for r in requests if r.kind == INVITE})
    if not pairs:
        return {}
    rows = conn.execute(_ON_THEIR_WAY, keyed_params(pairs))
    found = [record_from(Invite, row) for row in rows.all()]
    return {mailbox_of(invite.sender_id, invite.email): invite for invite in found}


def create_invites(conn: Connection, requests: Sequence[NewInvite]) -> list[Change | Duplicate]:
    """Write ``pendente`` invites, their first events and outbox rows in one transaction (a
    request with ``send_at``: ``agendado``, no outbox row yet).

    An address the sender already has on the way (in the database or earlier in this batch)
    gets a ``Duplicate`` instead, checked inside the transaction so a double click cannot pass.
    """
    now = utcnow()
    hold_senders(conn, [request.sender_id for request in requests if request.kind == INVITE])
    existing = on_their_way(conn, requests)
    fresh: list[NewInvite] = []
    in_batch: set[tuple[str, str]] = set()
    repeats: list[tuple[str, str] | None] = []  # per request: the key it repeats, if any
    for request in requests:
        key = mailbox_of(request.sender_id, request.email)
        if request.kind == INVITE and (key in existing or key in in_batch):
            repeats.append(key)
            continue
        repeats.append(None)
        fresh.append(request)
        if request.kind == INVITE:
            in_batch.add(key)
    changes = _insert_new(conn, fresh, now) if fresh else []
    created = iter(changes)
    for change in changes:
        existing.setdefault(mailbox_of(change.invite.sender_id, change.invite.email), change.invite)
    return [next(created) if key is None else Duplicate(existing[key]) for key in repeats]


def _insert_new(conn: Connection, requests: Sequence[NewInvite], now: datetime) -> list[Change]:
    """The rows, their events, and an outbox row for each one to send now (a scheduled one
    gets its outbox row when the sweep releases it: ``app.invites.transitions.scheduled``)."""
    written = insert_in_order(
        conn,
        invites,
        [
            {
                "public_id": new_public_id(),
                "sender_id": request.sender_id,
                "email": request.email,
                "name": request.name,
                "status": (Status.AGENDADO if request.send_at else Status.PENDENTE).value,
                "attempt": 1,
                "round_first_attempt": 1,
                "created_at": now,
                "updated_at": now,
                "sent_at": None,
                "next_attempt_at": None if request.send_at else now,
                "lease_expires_at": None,
                "error": None,
                "correlation_id": request.correlation_id,
                "kind": request.kind,
                "sender_name": request.sender_name,
                "sender_email": request.sender_email,
                "message": request.message,
                "batch_id": request.batch_id,
                "send_at": request.send_at,
                "occasion_title": request.occasion.title if request.occasion else None,
                "occasion_at": request.occasion.at if request.occasion else None,
                "occasion_place": request.occasion.place if request.occasion else None,
            }
            for request in requests
        ],
        "public_id",
        *invites.c,
    )
    created = [record_from(Invite, row) for row in written]
    later = [invite for invite in created if invite.status == Status.AGENDADO]
    at_once = [invite for invite in created if invite.status != Status.AGENDADO]
    recorded = {
        change.invite.id: change
        for change in (*record_changes(conn, at_once, enqueue=True), *record_changes(conn, later))
    }
    return [recorded[invite.id] for invite in created]


async def create_invite(
    db: Database,
    *,
    sender_id: str,
    email: str,
    name: str | None,
    correlation_id: str,
    kind: str = INVITE,
    sender_name: str | None = None,
    sender_email: str | None = None,
    message: str | None = None,
    send_at: datetime | None = None,
    occasion: Occasion | None = None,
) -> Change | Duplicate:
    """Write a ``pendente`` invite (or sign-in mail), its event and outbox row, or return the
    ``Duplicate`` on its way; after the commit. The caller publishes ``Change.outbox_id``.
    With ``send_at``: an ``agendado`` invite and its event, no outbox row until its time."""
    request = NewInvite(
        sender_id,
        email,
        name,
        correlation_id,
        kind,
        sender_name,
        sender_email,
        message,
        send_at=send_at,
        occasion=occasion,
    )
    return await db.write_many(create_invites, request)


@dataclass(frozen=True)
class _Claim:
    public_id: str
    attempt: int
    lease_seconds: float
    link_key: str | None = None


def _claim_each(conn: Connection, claims: Sequence[_Claim]) -> list[Change | None]:
    now = utcnow()
    lease_seconds = claims[0].lease_seconds
    if any(claim.lease_seconds != lease_seconds for claim in claims):
        return [_claim_each(conn, [claim])[0] for claim in claims]
    return transition_each(
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


@dataclass(frozen=True)
class Claimed:
    """A won claim, and the link its mail carries (``None`` for a sign-in mail, whose own link
    ``app.accounts.signin`` issues)."""

    change: Change
    link: str | None


def _claim_with_link_each(conn: Connection, claims: Sequence[_Claim]) -> list[Claimed | None]:
    key = claims[0].link_key
    if any(claim.link_key != key for claim in claims):
        return [_claim_with_link_each(conn, [claim])[0] for claim in claims]
    changes = _claim_each(conn, claims)
    won = [c.invite for c in changes if c is not None and c.invite.kind == INVITE]
    issued = issue_for_claims(conn, won, key) if won else []
    links = dict(zip([i.id for i in won], issued, strict=True))
    return [None if c is None else Claimed(c, links.get(c.invite.id)) for c in changes]


async def claim_with_link(
    db: Database,
    public_id: str,
    attempt: int,
    lease_seconds: float,
    *,
    link_key: str | None = None,
) -> Claimed | None:
    """``pendente → enviando`` for this attempt (``None``: someone else has it) and, for an
    invitation, its new link in the same transaction: only the claim that won issues a link, so
    a worker whose lease ran out can never replace a newer attempt's link. ``link_key``
    (SECRET_KEY): the link can be sent again by a reminder (``app.invites.links``)."""
    claim = _Claim(public_id, attempt, lease_seconds, link_key)
    return await db.write_many(_claim_with_link_each, claim)


def _sending(invite: Invite) -> list[Any]:
    """Still ``enviando`` under this very claim (the lease has not been taken away)."""
    return [
        invites.c.id == invite.id,
        invites.c.status == Status.ENVIANDO.value,
        invites.c.attempt == invite.attempt,
    ]


def _mark_sent_each(conn: Connection, sending: Sequence[Invite]) -> list[Change | None]:
    now = utcnow()
    return transition_each(
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
    """``enviando → enviado``: the mail server accepted the message (committed on return)."""
    return await db.write_many(_mark_sent_each, invite)


async def schedule_retry(db: Database, invite: Invite, error: str, delay: float) -> Change | None:
    """``enviando → pendente`` with the next attempt number, due after ``delay`` seconds."""
    now = utcnow()
    return await transition(
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
    return await transition(
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


async def cancel_claim(db: Database, invite: Invite, reason: str) -> Change | None:
    """``enviando → cancelado`` before any byte left: the address joined the suppression list
    after the invite was queued (``app.consent.suppression``); ``reason`` says so."""
    return await transition(
        db,
        _sending(invite),
        {
            "status": Status.CANCELADO.value,
            "error": reason,
            "lease_expires_at": None,
            "next_attempt_at": None,
        },
    )


async def release_claim(
    db: Database, invite: Invite, reason: str, *, due_in: float = 0.0
) -> Change | None:
    """``enviando → pendente``, same attempt, due in ``due_in`` seconds: no byte of mail left
    before the worker stopped, or the hourly budget is spent."""
    now = utcnow()
    return await transition(
        db,
        _sending(invite),
        {
            "status": Status.PENDENTE.value,
            "error": reason,
            "lease_expires_at": None,
            "next_attempt_at": now + timedelta(seconds=due_in),
            "updated_at": now,
        },
        enqueue=True,
    )


_UNCERTAIN = {"status": Status.INCERTO.value, "lease_expires_at": None}


async def mark_uncertain(db: Database, invite: Invite, reason: str) -> Change | None:
    """``enviando → incerto``: the message may have left; only the person may send again."""
    return await transition(
        db, _sending(invite), {**_UNCERTAIN, "error": reason}, failure_class=FailureClass.UNCERTAIN
    )


async def expire_leases(db: Database, reason: str) -> list[Change]:
    """Every ``enviando`` row whose lease ran out becomes ``incerto`` (never re-sent); a verdict
    that commits first wins."""
    async with db.write() as conn:
        return await conn.run_sync(
            transition_all,
            [invites.c.status == Status.ENVIANDO.value, invites.c.lease_expires_at < utcnow()],
            {**_UNCERTAIN, "error": reason},
            failure_class=FailureClass.UNCERTAIN,
        )
