"""Server-side sessions: the signed cookie carries a random token, the database its hash.

A session is created at sign-in (``start``), found on each request that needs the account
(``account_of``), and ends on the server at **Sair** (``end``): a copy of the
cookie is refused afterwards. Sessions live in the database, not Redis: with Redis down a
signed-in person still sends, and the outbox holds the invite.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import Connection, insert, select, update

from app.clock import utcnow
from app.invites.records import Account, record_from
from app.storage.database import Database
from app.storage.tables import accounts, sessions


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


def _accounts_of(conn: Connection, hashes: Sequence[str]) -> list[Account | None]:
    query = (
        select(accounts, sessions.c.token_hash)
        .join(sessions, sessions.c.account_id == accounts.c.id)
        .where(
            sessions.c.token_hash.in_(set(hashes)),
            sessions.c.revoked_at.is_(None),
            sessions.c.expires_at > utcnow(),
        )
    )
    rows = conn.execute(query).all()
    found = {row.token_hash: record_from(Account, row) for row in rows}
    return [found.get(digest) for digest in hashes]


async def account_of(db: Database, token: str) -> Account | None:
    """The account of a live session (not ended, not expired), or ``None``.

    The requests that ask at the same moment share one read (``Database.read_many``: one
    ``WHERE token_hash IN …``), as writes share a group commit. Every request still reads the
    database: an ended session is refused at once, in every process."""
    return await db.read_many(_accounts_of, token_hash(token))


async def end(db: Database, token: str) -> None:
    """End the session on the server: every copy of its cookie is refused from now on."""
    async with db.write() as conn:
        await conn.execute(
            update(sessions)
            .where(sessions.c.token_hash == token_hash(token), sessions.c.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
