"""Server-side sessions: the signed cookie carries a random token, the database its hash.

A session is created at sign-in (``start``), found on each request that needs the account
(``account_of``), and ends on the server at **Sair** (``end``): a copy of the cookie is refused
afterwards. Sessions live in the database, not Redis: with Redis down a signed-in person still
sends, and the outbox holds the invite.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import insert, select, update

from app.clock import utcnow
from app.db import Database
from app.models import accounts, sessions
from app.records import Account, record_from


def token_hash(token: str) -> str:
    """What is stored for a random token (sessions and sign-in links): its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


async def start(db: Database, account_id: int, lifetime_seconds: float) -> str:
    """A new session of the account; returns the token for the cookie (never stored)."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    async with db.write() as conn:
        await conn.execute(
            insert(sessions).values(
                token_hash=token_hash(token),
                account_id=account_id,
                created_at=now,
                expires_at=now + timedelta(seconds=lifetime_seconds),
                revoked_at=None,
            )
        )
    return token


async def account_of(db: Database, token: str) -> Account | None:
    """The account of a live session (not ended, not expired), or ``None``."""
    query = (
        select(accounts)
        .join(sessions, sessions.c.account_id == accounts.c.id)
        .where(
            sessions.c.token_hash == token_hash(token),
            sessions.c.revoked_at.is_(None),
            sessions.c.expires_at > utcnow(),
        )
    )
    async with db.read() as conn:
        row = (await conn.execute(query)).first()
    return record_from(Account, row) if row else None


async def end(db: Database, token: str) -> None:
    """End the session on the server: every copy of its cookie is refused from now on."""
    async with db.write() as conn:
        await conn.execute(
            update(sessions)
            .where(sessions.c.token_hash == token_hash(token), sessions.c.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
