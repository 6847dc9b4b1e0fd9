"""Sign-in links: a random token per sign-in mail, issued by the worker as it sends the mail.

Only the token's hash is stored. A link is single use and valid for ``SIGNIN_TTL_SECONDS``;
each mail issues a new token and the older unused ones for the same address stop working (one
live link per address: the newest mail is the one to use). Opening the link (GET) spends
nothing (mail scanners prefetch links); only the POST of its **Entrar** button does
(``redeem``, one conditional UPDATE).
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
    """A new link for this sign-in mail (older unused links to the same address stop working)."""
    token = secrets.token_urlsafe(32)  # 256 bits
    now = utcnow()
    async with db.write() as conn:
        await conn.execute(
            update(signin_tokens)
            .where(signin_tokens.c.email == mail.email, signin_tokens.c.used_at.is_(None))
            .values(used_at=now)
        )
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
    """Spend a valid link: its address, or ``None`` when it is used, expired or unknown.

    One conditional UPDATE: of two clicks, one gets the address.
    """
    now = utcnow()
    async with db.write() as conn:
        row = (
            await conn.execute(
                update(signin_tokens)
                .where(
                    signin_tokens.c.token_hash == token_hash(token),
                    signin_tokens.c.used_at.is_(None),
                    signin_tokens.c.expires_at > now,
                )
                .values(used_at=now)
                .returning(signin_tokens.c.email)
            )
        ).first()
    return str(row.email) if row else None
