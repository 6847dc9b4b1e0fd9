"""Server-side sessions: the signed cookie carries a random token, the database its hash.

A session is created at sign-in (``start``, with the device's User-Agent and the client network
it came from), found on each request that needs the account (``find``), and ends on the server
at **Sair** (``end``), at **Encerrar** on ``/conta`` (``end_one``) or at **Sair de todos os
aparelhos** (``end_all``): a copy of the cookie is refused afterwards. Sessions live in the
database, not Redis: with Redis down a signed-in person still sends, and the outbox holds the
invite.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection, insert, select, update

from app.clock import utcnow
from app.invites.records import Account, record_from
from app.storage.database import Database
from app.storage.tables import accounts, sessions

#: A use is written down when the network changed, or the last one written is older than this:
#: a write on every request would turn each page view into a database write.
TOUCH_SECONDS = 300
USER_AGENT_CHARS = 300


def token_hash(token: str) -> str:
    """What is stored for a random token (sessions and sign-in links): its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class LiveSession:
    """A session found by its cookie's token: whose it is and its last use written down."""

    account: Account
    public_id: str
    last_used_at: datetime
    last_network: str | None

    def needs_touch(self, network: str, now: datetime) -> bool:
        return network != self.last_network or now - self.last_used_at >= timedelta(
            seconds=TOUCH_SECONDS
        )


@dataclass(frozen=True)
class OpenSession:
    """One live session of an account, as ``/conta`` lists it."""

    public_id: str
    user_agent: str | None
    created_at: datetime
    created_network: str | None
    last_used_at: datetime
    last_network: str | None
    current: bool


async def start(
    db: Database, account_id: int, lifetime_seconds: float, user_agent: str, network: str
) -> str:
    """A new session of the account; returns the token for the cookie (never stored)."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    async with db.write() as conn:
        await conn.execute(
            insert(sessions).values(
                public_id=secrets.token_urlsafe(16),
                token_hash=token_hash(token),
                account_id=account_id,
                created_at=now,
                expires_at=now + timedelta(seconds=lifetime_seconds),
                revoked_at=None,
                user_agent=user_agent[:USER_AGENT_CHARS] or None,
                created_network=network,
                last_used_at=now,
                last_network=network,
            )
        )
    return token


def _live() -> list[ColumnElement[bool]]:
    return [sessions.c.revoked_at.is_(None), sessions.c.expires_at > utcnow()]


def _sessions_of(conn: Connection, hashes: Sequence[str]) -> list[LiveSession | None]:
    query = (
        select(
            accounts,
            sessions.c.token_hash,
            sessions.c.public_id.label("session_id"),
            sessions.c.last_used_at,
            sessions.c.last_network,
        )
        .join(sessions, sessions.c.account_id == accounts.c.id)
        .where(sessions.c.token_hash.in_(set(hashes)), *_live())
    )
    found = {
        row.token_hash: LiveSession(
            record_from(Account, row), row.session_id, row.last_used_at, row.last_network
        )
        for row in conn.execute(query).all()
    }
    return [found.get(digest) for digest in hashes]


async def find(db: Database, token: str) -> LiveSession | None:
    """The live session (not ended, not expired) of this token, or ``None``.

    The requests that ask at the same moment share one read (``Database.read_many``: one
    ``WHERE token_hash IN …``), as writes share a group commit. Every request still reads the
    database: an ended session is refused at once, in every process."""
    return await db.read_many(_sessions_of, token_hash(token))


async def touch(db: Database, public_id: str, network: str) -> None:
    """Write down a use of the session, now, from ``network``."""
    async with db.write() as conn:
        await conn.execute(
            update(sessions)
            .where(sessions.c.public_id == public_id)
            .values(last_used_at=utcnow(), last_network=network)
        )


async def of_account(db: Database, account_id: int, current_token: str) -> list[OpenSession]:
    """The account's live sessions, the most recently used first; ``current``: this cookie's."""
    query = (
        select(sessions)
        .where(sessions.c.account_id == account_id, *_live())
        .order_by(sessions.c.last_used_at.desc(), sessions.c.id.desc())
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    current = token_hash(current_token)
    return [
        OpenSession(
            public_id=row.public_id,
            user_agent=row.user_agent,
            created_at=row.created_at,
            created_network=row.created_network,
            last_used_at=row.last_used_at,
            last_network=row.last_network,
            current=row.token_hash == current,
        )
        for row in rows
    ]


async def end(db: Database, token: str) -> None:
    """End the session on the server: every copy of its cookie is refused from now on."""
    async with db.write() as conn:
        await conn.execute(
            update(sessions)
            .where(sessions.c.token_hash == token_hash(token), sessions.c.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )


async def end_one(db: Database, account_id: int, public_id: str) -> bool:
    """End one live session of this account (``False``: no such live session of *this*
    account: another account's id ends nothing)."""
    async with db.write() as conn:
        result = await conn.execute(
            update(sessions)
            .where(
                sessions.c.public_id == public_id,
                sessions.c.account_id == account_id,
                sessions.c.revoked_at.is_(None),
            )
            .values(revoked_at=utcnow())
        )
    return result.rowcount > 0


async def end_all(db: Database, account_id: int) -> int:
    """End every live session of the account, the one asking included; how many ended."""
    async with db.write() as conn:
        result = await conn.execute(
            update(sessions)
            .where(sessions.c.account_id == account_id, sessions.c.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
    return result.rowcount
