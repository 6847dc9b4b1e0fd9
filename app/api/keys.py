"""API keys: an account's ``Authorization: Bearer <chave>`` for ``/api/v1``.

The key is 256 random bits shown once, at creation; only its SHA-256 is stored (a random key of
that size needs no slow hash). Revoking sets ``revoked_at``, and ``find`` refuses it from then
on: there is no cache in between.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import insert, select, update

from app.accounts.sessions import token_hash
from app.accounts.store import hold
from app.clock import utcnow
from app.invites.records import Account, record_from
from app.storage.database import Database
from app.storage.tables import accounts, api_keys

#: Every key starts with this, so a leaked one is easy to recognise (and to search logs for).
PREFIX = "cvk_"
#: A use is written down when the last one written is older than this (not on every request).
TOUCH_SECONDS = 60


@dataclass(frozen=True)
class ApiKey:
    """One key of an account, as ``/conta/chaves`` lists it (never the key itself)."""

    id: int
    public_id: str
    account_id: int
    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class KeyUse:
    """A live key presented on a request: its row and its account."""

    key: ApiKey
    account: Account


class SameName(Exception):
    """The account has a live key of this name (a form sent twice, say): the list names keys."""


async def create(db: Database, account_id: int, name: str) -> tuple[ApiKey, str]:
    """A new key of the account; returns its row and the key (the only time it exists).
    ``SameName`` when a live key of the account already has ``name``."""
    secret = PREFIX + secrets.token_urlsafe(32)
    async with db.write() as conn:
        await hold(conn, account_id)  # two creations at once: one finds the name taken
        taken = select(api_keys.c.id).where(
            api_keys.c.account_id == account_id,
            api_keys.c.revoked_at.is_(None),
            api_keys.c.name == name,
        )
        if (await conn.execute(taken)).first() is not None:
            raise SameName
        row = (
            await conn.execute(
                insert(api_keys)
                .values(
                    public_id=secrets.token_urlsafe(12),
                    account_id=account_id,
                    name=name,
                    key_hash=token_hash(secret),
                    created_at=utcnow(),
                    last_used_at=None,
                    revoked_at=None,
                )
                .returning(*api_keys.c)
            )
        ).one()
    return record_from(ApiKey, row), secret


async def of_account(db: Database, account_id: int) -> list[ApiKey]:
    """The account's live keys, newest first."""
    query = (
        select(api_keys)
        .where(api_keys.c.account_id == account_id, api_keys.c.revoked_at.is_(None))
        .order_by(api_keys.c.id.desc())
    )
    async with db.read() as conn:
        return [record_from(ApiKey, row) for row in (await conn.execute(query)).all()]


async def one_of_account(db: Database, account_id: int, public_id: str) -> ApiKey | None:
    query = select(api_keys).where(
        api_keys.c.account_id == account_id,
        api_keys.c.public_id == public_id,
        api_keys.c.revoked_at.is_(None),
    )
    async with db.read() as conn:
        row = (await conn.execute(query)).first()
    return record_from(ApiKey, row) if row else None


async def revoke(db: Database, account_id: int, public_id: str) -> bool:
    """Revoke one live key of the account; ``False`` if it has no such key."""
    async with db.write() as conn:
        result = await conn.execute(
            update(api_keys)
            .where(
                api_keys.c.account_id == account_id,
                api_keys.c.public_id == public_id,
                api_keys.c.revoked_at.is_(None),
            )
            .values(revoked_at=utcnow())
        )
    return result.rowcount == 1


async def find(db: Database, secret: str) -> KeyUse | None:
    """The live key ``secret`` is, with its account (``None``: unknown or revoked); its use is
    written down now and then."""
    query = (
        select(api_keys, accounts.c.public_id.label("account_public_id"), accounts.c.email)
        .add_columns(accounts.c.name.label("account_name"), accounts.c.created_at.label("since"))
        .join(accounts, accounts.c.id == api_keys.c.account_id)
        .where(api_keys.c.key_hash == token_hash(secret), api_keys.c.revoked_at.is_(None))
    )
    async with db.read() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return None
    key = record_from(ApiKey, row)
    account = Account(
        id=key.account_id,
        public_id=row.account_public_id,
        email=row.email,
        name=row.account_name,
        created_at=row.since,
    )
    now = utcnow()
    if key.last_used_at is None or now - key.last_used_at >= timedelta(seconds=TOUCH_SECONDS):
        async with db.write() as conn:
            await conn.execute(
                update(api_keys).where(api_keys.c.id == key.id).values(last_used_at=now)
            )
    return KeyUse(key, account)
