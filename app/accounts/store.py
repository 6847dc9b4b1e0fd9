"""Senders are accounts: a normalised e-mail address (unique) and the name invitations show."""

from __future__ import annotations

import secrets

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.clock import utcnow
from app.invites.records import Account, record_from
from app.invites.validation import same_address
from app.storage.database import Database
from app.storage.tables import accounts


async def account_by_email(db: Database, email: str) -> Account | None:
    async with db.read() as conn:
        row = (
            await conn.execute(select(accounts).where(accounts.c.email == same_address(email)))
        ).first()
    return record_from(Account, row) if row else None


async def find_or_create_account(db: Database, email: str) -> Account:
    """The account of ``email`` (already validated), created on its first sign-in."""
    found = await account_by_email(db, email)
    if found is not None:
        return found
    now = utcnow()
    try:
        async with db.write() as conn:
            row = (
                await conn.execute(
                    insert(accounts)
                    .values(
                        public_id=secrets.token_urlsafe(16),
                        email=same_address(email),
                        name=None,
                        created_at=now,
                        updated_at=now,
                    )
                    .returning(*accounts.c)
                )
            ).one()
        return record_from(Account, row)
    except IntegrityError:  # two first sign-ins at once: the other one created it
        created = await account_by_email(db, email)
        assert created is not None
        return created


async def set_name(db: Database, account_id: int, name: str) -> None:
    """The name the account's invitations show from now on (written ones keep theirs)."""
    async with db.write() as conn:
        await conn.execute(
            update(accounts)
            .where(accounts.c.id == account_id)
            .values(name=name, updated_at=utcnow())
        )


async def hold(conn: AsyncConnection, account_id: int) -> None:
    """Lock the account's row until ``conn``'s transaction ends: two writes that first count or
    look up the account's rows (its webhooks, its keys' names) then take their turns, and
    neither decides on what the other is writing. PostgreSQL's row lock; SQLite's writers
    already take the whole database at BEGIN IMMEDIATE."""
    await conn.execute(select(accounts.c.id).where(accounts.c.id == account_id).with_for_update())
