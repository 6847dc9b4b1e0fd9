"""Sign-in links: a random token per sign-in mail, issued by the worker as it sends the mail.

Only the token's hash is stored. A link is single use and valid for ``SIGNIN_TTL_SECONDS``.
Asking for a new link does not stop the older ones: anyone may ask for a link to any address,
and if each request cancelled the last, a stranger asking again and again would kill the link
the owner is about to press. Instead, signing in with one link retires every other unused link
of that address (``redeem``). Opening the link (GET) spends nothing (mail scanners prefetch
links); only the POST of its **Entrar** button does.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import insert, select, update

from app.accounts.sessions import token_hash
from app.clock import utcnow
from app.invites.records import Invite
from app.storage.database import Database
from app.storage.tables import signin_tokens


class LinkState(StrEnum):
    VALID = "valido"
    USED = "usado"
    EXPIRED = "expirado"


@dataclass(frozen=True)
class SigninLink:
    email: str
    state: LinkState


async def issue(db: Database, mail: Invite, ttl_seconds: int) -> str:
    """A new link for this sign-in mail (the address's older links keep working until one of
    them is used)."""
    token = secrets.token_urlsafe(32)  # 256 bits
    now = utcnow()
    async with db.write() as conn:
        await conn.execute(
            insert(signin_tokens).values(
                token_hash=token_hash(token),
                invite_id=mail.id,
                email=mail.email,
                created_at=now,
                expires_at=now + timedelta(seconds=ttl_seconds),
                used_at=None,
            )
        )
    return token


def _state(used_at: datetime | None, expires_at: datetime, now: datetime) -> LinkState:
    if used_at is not None:
        return LinkState.USED
    return LinkState.EXPIRED if expires_at <= now else LinkState.VALID


async def peek(db: Database, token: str) -> SigninLink | None:
    """What the link is now, without spending it (``None``: no such link)."""
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(signin_tokens).where(signin_tokens.c.token_hash == token_hash(token))
            )
        ).first()
    if row is None:
        return None
    return SigninLink(row.email, _state(row.used_at, row.expires_at, utcnow()))


async def redeem(db: Database, token: str) -> str | None:
    """Spend a valid link and retire the address's other unused links: its address, or ``None``
    when it is used, retired, expired or unknown.

    The address's unused links are locked in id order (``FOR UPDATE`` on PostgreSQL; SQLite
    serialises writers), so of two clicks on one link, or on two links of one address, one signs
    in and the other finds its link spent, never a deadlock.
    """
    now = utcnow()
    digest = token_hash(token)
    async with db.write() as conn:
        email = (
            await conn.execute(
                select(signin_tokens.c.email).where(signin_tokens.c.token_hash == digest)
            )
        ).scalar()
        if email is None:
            return None
        unused = (
            await conn.execute(
                select(signin_tokens.c.id, signin_tokens.c.token_hash, signin_tokens.c.expires_at)
                .where(signin_tokens.c.email == email, signin_tokens.c.used_at.is_(None))
                .order_by(signin_tokens.c.id)
                .with_for_update()
            )
        ).all()
        if not any(row.token_hash == digest and row.expires_at > now for row in unused):
            return None
        await conn.execute(
            update(signin_tokens)
            .where(signin_tokens.c.id.in_([row.id for row in unused]))
            .values(used_at=now)
        )
    return str(email)
