"""Keeping a bounce and recording what it says: the one entry point for every bounce source.

``receive`` stores the raw message first (a row in ``bounces``; the same bounce twice is one
row, by its fingerprint), then, in the same transaction:
- a permanent failure turns ``enviado | incerto`` into ``devolvido`` (``app.invites.transitions``),
  and when its code says the address does not exist or is disabled (5.1.x, 5.2.1; never
  another 5.x.x such as a 5.7.x policy block, never a 4.x.x) its address joins the
  suppression list (``app.consent.suppression``);
- a spam complaint (ARF) or a message to the invite's opt-out address (the ``mailto:`` of
  ``List-Unsubscribe``) puts the invite's address on the suppression list, and the sender's
  row says so (``suppress_from_invite``);
- anything else — a delay, a report that is no failure, a bounce for an invite in any other
  state (already answered, already devolvido, sent again since), one we cannot read — is kept
  as a history line of its invite, with no status change.
The caller announces the returned change (``app.live.wakeups.Announcer``).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.bounces.addresses import ReturnPath
from app.bounces.reader import BounceKind, Verdict, fingerprint, read_bounce
from app.bounces.reasons import bounce_reason
from app.clock import utcnow
from app.consent import suppression
from app.invites import transitions
from app.invites.records import Change, Invite, record_from
from app.storage.database import Database
from app.storage.tables import bounces, invites

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    """What a kept bounce did (the ``outcome`` of the bounce metric)."""

    DEVOLVIDO = "devolvido"  # the invite turned devolvido
    HISTORY = "history"  # a history line, no status change
    STALE = "stale"  # about an earlier attempt than the invite's current one
    UNKNOWN_INVITE = "unknown_invite"  # the VERP id names no invite we have
    SUPPRESSED = "suppressed"  # a complaint or an opt-out: the address joined the list


@dataclass(frozen=True)
class Received:
    """One bounce taken in: its row (or the row it duplicates) and what it changed."""

    bounce_id: int
    duplicate: bool
    verdict: Verdict
    outcome: Outcome
    change: Change | None = None
    called_off: tuple[Change, ...] = ()  # scheduled invitations to an address it suppressed


async def invite_of(db: Database, public_id: str) -> Invite | None:
    """The invite a return path names (``None``: no such invite)."""
    async with db.read() as conn:
        row = (await conn.execute(select(invites).where(invites.c.public_id == public_id))).first()
    return record_from(Invite, row) if row else None


def _insert_once(conn: AsyncConnection, values: dict[str, Any]) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return (
        dialect.insert(bounces)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["dedup_key"])
        .returning(bounces.c.id)
    )


#: Reports whose sender wants no more invitations, and the suppression reason of each.
_UNWANTED = {
    BounceKind.COMPLAINT: suppression.Reason.COMPLAINED,
    BounceKind.UNSUBSCRIBE: suppression.Reason.OPTED_OUT,
}

#: The reason a kept complaint or mail opt-out reads with (its history line adds the kind).
_UNWANTED_REASONS = {
    BounceKind.COMPLAINT: "A pessoa convidada marcou o convite como spam.",
    BounceKind.UNSUBSCRIBE: "A pessoa convidada pediu por e-mail para não receber convites.",
}


def _outcome(invite: Invite | None, verdict: Verdict, change: Change | None) -> Outcome:
    if invite is None:
        return Outcome.UNKNOWN_INVITE
    if verdict.kind in _UNWANTED:
        return Outcome.SUPPRESSED
    if change is not None:
        return Outcome.DEVOLVIDO
    if verdict.attempt is not None and verdict.attempt != invite.attempt:
        return Outcome.STALE
    return Outcome.HISTORY


def _values(
    raw: bytes, recipient: str, public_id: str | None, invite: Invite | None, verdict: Verdict
) -> dict[str, Any]:
    known = verdict.kind != BounceKind.UNREADABLE
    return {
        # One recipient's view of one bounce: the same bounce twice is one row.
        "dedup_key": verdict.fingerprint,
        "received_at": utcnow(),
        "envelope_recipient": recipient[:320],
        "public_id": public_id,
        "invite_id": invite.id if invite else None,
        "kind": verdict.kind.value,
        "outcome": Outcome.HISTORY.value,
        "status_code": verdict.status_code,
        "reason": _UNWANTED_REASONS.get(verdict.kind)
        or (
            bounce_reason(
                verdict.status_code,
                verdict.reporting_host,
                final=verdict.kind == BounceKind.PERMANENT,
            )
            if known
            else None
        ),
        "reporting_host": verdict.reporting_host,
        "diagnostic": verdict.diagnostic,
        "attempt": verdict.attempt,
        "problem": verdict.problem,
        "raw": raw,
    }


async def receive(db: Database, raw: bytes, recipient: str, address: ReturnPath) -> Received:
    """Keep ``raw`` (a bounce sent back to ``recipient``, the signed return path ``address``)
    and record it: one row, one reading, for one message."""
    public_id = address.public_id
    invite = await invite_of(db, public_id)
    if address.opt_out:
        # Whatever it says: a message to this address is the opt-out (RFC 2369 mailto).
        verdict = Verdict(
            BounceKind.UNSUBSCRIBE, diagnostic="mailto", fingerprint=fingerprint(raw, None)
        )
    else:
        verdict = read_bounce(raw, public_id, invite.email if invite else None)
        # The signed return path names the attempt; what the message quotes (ENVID,
        # Message-ID) could come from any copy of any attempt's mail.
        verdict = replace(verdict, attempt=address.attempt)
    # The fingerprint is per envelope recipient: the one message may bounce two invites.
    verdict = _with_key(verdict, recipient)
    values = _values(raw, recipient, public_id, invite, verdict)
    async with db.write() as conn:
        inserted = (await conn.execute(_insert_once(conn, values))).scalar()
        if inserted is None:
            first = (
                await conn.execute(
                    select(bounces.c.id, bounces.c.outcome).where(
                        bounces.c.dedup_key == verdict.fingerprint
                    )
                )
            ).one()
            received = Received(int(first.id), True, verdict, Outcome(first.outcome))
        else:
            change: Change | None = None
            called_off: tuple[Change, ...] = ()
            if invite is not None:
                change, called_off = await _apply(conn, invite, verdict, values["reason"])
            outcome = _outcome(invite, verdict, change)
            await conn.execute(
                update(bounces).where(bounces.c.id == inserted).values(outcome=outcome.value)
            )
            received = Received(int(inserted), False, verdict, outcome, change, called_off)
    _log(received, public_id)
    return received


#: Enhanced status codes (RFC 3463) that say the mailbox itself is gone: X.1.x, the address
#: (no such user, no such domain, a null MX), and X.2.1, the mailbox is disabled.
_NO_MAILBOX = re.compile(r"5\.1\.\d{1,3}|5\.2\.1")


def _permanent_address_failure(verdict: Verdict) -> bool:
    """A 5.x.x that says the address does not exist or is disabled: it will never take mail.
    Any other 5.x.x (a 5.7.x policy or spam block, a 5.3.x system fault) is about our mail,
    not the mailbox, and a 4.x.x the server gave up on may work tomorrow (a full mailbox, a
    server down for days): the row turns devolvido, the address is not suppressed."""
    code = verdict.status_code or ""
    return verdict.kind == BounceKind.PERMANENT and _NO_MAILBOX.fullmatch(code) is not None


async def _apply(
    conn: AsyncConnection, invite: Invite, verdict: Verdict, reason: str
) -> tuple[Change | None, tuple[Change, ...]]:
    """What a new report changes: the invite's row, and the suppression list (with the
    scheduled invitations to the address it suppresses, called off)."""
    if verdict.kind in _UNWANTED:
        unwanted = _UNWANTED[verdict.kind]
        done = await suppression.suppress_from_invite(conn, invite, unwanted, verdict.diagnostic)
        return done.change, tuple(done.called_off)
    if verdict.kind != BounceKind.PERMANENT:
        return None, ()
    if not _permanent_address_failure(verdict):
        return await transitions.mark_bounced(conn, invite.id, verdict.attempt, reason), ()
    note = suppression.ROW_NOTES[suppression.Reason.BOUNCED]
    change = await transitions.mark_bounced(conn, invite.id, verdict.attempt, f"{reason} {note}")
    if change is None:  # only the bounce that made the row devolvido: a late one is history
        return None, ()
    _, called_off = await suppression.suppress_and_call_off(
        conn, invite.email, suppression.Reason.BOUNCED, verdict.status_code
    )
    return change, tuple(called_off)


def _with_key(verdict: Verdict, recipient: str) -> Verdict:
    key = hashlib.sha256(f"{recipient.lower()}\0{verdict.fingerprint}".encode()).hexdigest()
    return replace(verdict, fingerprint=key)


def _log(received: Received, public_id: str | None) -> None:
    extra = {
        "bounce_id": received.bounce_id,
        "invite": public_id,
        "bounce_kind": received.verdict.kind.value,
        "bounce_outcome": received.outcome.value,
        "status_code": received.verdict.status_code,
    }
    if received.duplicate:
        log.info("duplicate bounce ignored", extra=extra)
    elif received.verdict.kind == BounceKind.UNREADABLE:
        log.warning("unreadable bounce kept", extra={**extra, "problem": received.verdict.problem})
    else:
        log.info("bounce recorded", extra=extra)
