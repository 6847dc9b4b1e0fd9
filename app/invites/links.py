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
from app.invites.queries import current_address_since
from app.invites.records import Invite, record_from
from app.invites.status import ANSWERABLE, Status
from app.signing import Purpose, sign
from app.storage.database import Database
from app.storage.tables import invite_links, invites


class LinkState(StrEnum):
    """What opening the link shows: the two buttons, the answer given, or why it is closed."""

    OPEN = "aberto"  # the invitation with Aceitar / Recusar
    ACCEPTED = "aceito"  # answered: accepted (200)
    DECLINED = "recusado"  # answered: declined (200; final, the sender may invite again)
    REPLACED = "substituido"  # a newer invitation replaced this link (410)
    # Replaced, and the invitation now goes to another address (a correction after a bounce):
    # the page shows nothing of the invite's address now (410).
    ELSEWHERE = "outro_endereco"
    CANCELLED = "cancelado"  # the sender cancelled (410)
    EXPIRED = "expirado"  # no answer in INVITE_TTL_SECONDS (410)
    NOT_READY = "indisponivel"  # any other state (a send is under way again): 409


#: The states in which a link answers 410: it will never work again.
GONE = (LinkState.REPLACED, LinkState.ELSEWHERE, LinkState.CANCELLED, LinkState.EXPIRED)


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


def token_from_seed(key: str, seed: str) -> str:
    """The link token of ``seed`` under ``key`` (SECRET_KEY): 192 bits of an HMAC, so whoever
    reads the database (seed and hash) without the key cannot rebuild a link."""
    return sign(key, Purpose.INVITE_LINK, seed, length=24)


# Built once, their lists bound when they run (as app.invites.transitions.core._keyed_update).
_REPLACE = (
    update(invite_links)
    .where(
        invite_links.c.invite_id.in_(bindparam("ids", expanding=True)),
        invite_links.c.replaced_at.is_(None),
    )
    .values(replaced_at=bindparam("now", type_=invite_links.c.replaced_at.type))
)
_INSERT = insert(invite_links)


def replace_links(conn: Connection, invite_ids: Sequence[int], now: datetime) -> None:
    """Every live link of these invites stops working (one UPDATE, in the caller's transaction)."""
    if not invite_ids:
        return
    conn.execute(_REPLACE, {"ids": list(invite_ids), "now": now})


def issue_for_claims(
    conn: Connection, claimed: Sequence[Invite], key: str | None = None
) -> list[str]:
    """A link for each attempt whose claim this transaction won (the claim's conditional
    UPDATE … RETURNING was the check), each invite's older links replaced. With ``key``
    (SECRET_KEY) the token is derived from a stored seed, so a reminder can send the same link
    (``live_token``); without, it is random and only this mail ever knows it."""
    if len({invite.id for invite in claimed}) != len(claimed):
        raise ValueError("one invite claimed twice in one transaction")
    now = utcnow()
    seeds = [new_token() if key is not None else None for _ in claimed]
    tokens = [new_token() if seed is None else token_from_seed(key or "", seed) for seed in seeds]
    if claimed:
        replace_links(conn, [invite.id for invite in claimed], now)
        conn.execute(
            _INSERT,
            [
                {
                    "token_hash": token_hash(token),
                    "invite_id": invite.id,
                    "attempt": invite.attempt,
                    "created_at": now,
                    "replaced_at": None,
                    "seed": seed,
                }
                for invite, token, seed in zip(claimed, tokens, seeds, strict=True)
            ],
        )
    return tokens


def live_token(conn: Connection, invite_id: int, key: str) -> tuple[str | None, datetime] | None:
    """The token of the invite's live link and when it was issued (``None`` when it has no
    seeded live link). The token is ``None`` when ``key`` no longer rebuilds it (SECRET_KEY
    changed since): a mail must never carry a link that leads nowhere."""
    row = conn.execute(
        select(invite_links.c.seed, invite_links.c.token_hash, invite_links.c.created_at).where(
            invite_links.c.invite_id == invite_id,
            invite_links.c.replaced_at.is_(None),
            invite_links.c.seed.is_not(None),
        )
    ).first()
    if row is None:
        return None
    token = token_from_seed(key, row.seed)
    return (token if token_hash(token) == row.token_hash else None), row.created_at


async def open_link(db: Database, token: str, ttl_seconds: float) -> OpenedLink | None:
    """What the link is now, without changing anything (``None``: no such link)."""
    query = (
        select(
            invites,
            invite_links.c.created_at.label("link_created_at"),
            invite_links.c.replaced_at,
            invite_links.c.attempt.label("link_attempt"),
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
    if state == LinkState.REPLACED and row._mapping["link_attempt"] < (
        await current_address_since(db, invite.id)
    ):
        state = LinkState.ELSEWHERE
    return OpenedLink(invite, state, created_at)
