"""The invitee's link, ``PUBLIC_URL/c/{token}``: random, hash only, one live link per invite.

Issued in each claim's transaction, so the link is durable before the mail leaves; a re-send
replaces the old links at once (410 "substituído"). Opening a link changes nothing (mail
scanners prefetch links); only its buttons (POST) answer.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import Connection, bindparam, insert, select, update

from app.accounts.sessions import token_hash
from app.clock import utcnow
from app.invites.records import Invite, record_from
from app.invites.status import ANSWERABLE, Status
from app.storage.database import Database
from app.storage.tables import invite_links, invites, unindexed


class LinkState(StrEnum):
    """What opening the link shows: the two buttons, the answer given, or why it is closed."""

    OPEN = "aberto"  # the invitation with Aceitar / Recusar
    ACCEPTED = "aceito"  # answered: accepted (200)
    DECLINED = "recusado"  # answered: declined (200; final, the sender may invite again)
    REPLACED = "substituido"  # a newer invitation replaced this link (410)
    CANCELLED = "cancelado"  # the sender cancelled (410)
    EXPIRED = "expirado"  # no answer in INVITE_TTL_SECONDS (410)
    NOT_READY = "indisponivel"  # any other state (a send is under way again): 409


#: The states in which a link answers 410: it will never work again.
GONE = (LinkState.REPLACED, LinkState.CANCELLED, LinkState.EXPIRED)


@dataclass(frozen=True)
class OpenedLink:
    """A link and the invite it belongs to, as they are now."""

    invite: Invite
    state: LinkState
    created_at: datetime


def link_state(
    invite: Invite, created_at: datetime, replaced_at: datetime | None, ttl_seconds: float
) -> LinkState:
    """The link's state from its invite's status, whether it was replaced, and its age."""
    if invite.status == Status.ACEITO:  # any of its links: the answer is what matters now
        return LinkState.ACCEPTED
    if replaced_at is not None:
        return LinkState.REPLACED
    if invite.status == Status.CANCELADO:
        return LinkState.CANCELLED
    if invite.status == Status.EXPIRADO or created_at <= utcnow() - timedelta(seconds=ttl_seconds):
        return LinkState.EXPIRED
    if invite.status == Status.RECUSADO:
        return LinkState.DECLINED
    if invite.status in ANSWERABLE:
        return LinkState.OPEN
    return LinkState.NOT_READY


def new_token() -> str:
    return secrets.token_urlsafe(24)  # 192 bits


# Built once, their lists bound when they run (as app.invites.transitions.core._keyed_update).
_REPLACE = (
    update(invite_links)
    .where(
        invite_links.c.invite_id.in_(bindparam("ids", expanding=True)),
        invite_links.c.replaced_at.is_(None),
    )
    .values(replaced_at=bindparam("now", type_=invite_links.c.replaced_at.type))
)
_STILL_SENDING = (
    select(invites.c.id, invites.c.attempt)
    .where(
        invites.c.id.in_(bindparam("ids", expanding=True)),
        unindexed(invites.c.status) == Status.ENVIANDO.value,
    )
    # FOR UPDATE (PostgreSQL): the rows stay as checked until the claim commits; SQLite's
    # writes are serialized anyway.
    .with_for_update()
)
_INSERT = insert(invite_links)


def replace_links(conn: Connection, invite_ids: Sequence[int], now: datetime) -> None:
    """Every live link of these invites stops working (one UPDATE, in the caller's transaction)."""
    if not invite_ids:
        return
    conn.execute(_REPLACE, {"ids": list(invite_ids), "now": now})


async def issue(db: Database, invite: Invite) -> str | None:
    """A new link for this attempt of ``invite``, older links replaced; ``None`` when the
    attempt is no longer ``enviando`` under this claim (a stalled worker must not replace a
    newer attempt's link, nor send)."""
    return await db.write_many(issue_each, invite)


def issue_each(conn: Connection, attempts: Sequence[Invite]) -> list[str | None]:
    """``issue`` for many attempts in the caller's transaction: a link for each attempt still
    ``enviando`` under its claim (one SELECT checks them all), ``None`` for the others."""
    ids = [invite.id for invite in attempts]
    current = {(row.id, row.attempt) for row in conn.execute(_STILL_SENDING, {"ids": ids})}
    return _write_links(conn, attempts, current)


def issue_for_claims(conn: Connection, claimed: Sequence[Invite]) -> list[str]:
    """A link for each attempt whose claim this transaction won: the claim's conditional
    UPDATE … RETURNING was the check, so the rows are not read again."""
    links = _write_links(conn, claimed, {(invite.id, invite.attempt) for invite in claimed})
    if any(link is None for link in links):
        raise ValueError("one invite claimed twice in one transaction")
    return [link for link in links if link is not None]


def _write_links(
    conn: Connection, attempts: Sequence[Invite], current: set[tuple[int, int]]
) -> list[str | None]:
    """A new link for each attempt in ``current`` (older links of its invite replaced)."""
    now = utcnow()
    issued: dict[int, tuple[Invite, str]] = {}
    answers: list[str | None] = []
    for invite in attempts:
        # One live link per invite: a second caller for the same attempt in a batch gets None.
        if (invite.id, invite.attempt) in current and invite.id not in issued:
            issued[invite.id] = (invite, new_token())
            answers.append(issued[invite.id][1])
        else:
            answers.append(None)
    if issued:
        replace_links(conn, list(issued), now)
        conn.execute(
            _INSERT,
            [
                {
                    "token_hash": token_hash(token),
                    "invite_id": invite.id,
                    "attempt": invite.attempt,
                    "created_at": now,
                    "replaced_at": None,
                }
                for invite, token in issued.values()
            ],
        )
    return answers


async def open_link(db: Database, token: str, ttl_seconds: float) -> OpenedLink | None:
    """What the link is now, without changing anything (``None``: no such link)."""
    query = (
        select(
            invites, invite_links.c.created_at.label("link_created_at"), invite_links.c.replaced_at
        )
        .join(invite_links, invite_links.c.invite_id == invites.c.id)
        .where(invite_links.c.token_hash == token_hash(token))
    )
    async with db.read() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return None
    invite = record_from(Invite, row)
    created_at = row._mapping["link_created_at"]
    state = link_state(invite, created_at, row._mapping["replaced_at"], ttl_seconds)
    return OpenedLink(invite, state, created_at)
