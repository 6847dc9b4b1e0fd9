"""``Idempotency-Key`` claims: the same key and body within ``KEEP`` give the first answer again.

A request with a key first *claims* it: one INSERT into ``idempotency_keys``, whose unique
``(api_key_id, key)`` lets exactly one of two concurrent requests win, on SQLite and PostgreSQL
alike, before any work is done. The winner does the work and stores its answer (``complete``);
the loser gets that stored answer, or ``InProgress`` while the winner is still running. An
answer that should not be kept (a 5xx, a 429 whose wait ends), or no answer at all (the request
failed or was cancelled), gives the claim back (``release``), so the same key can be tried again.
A claim without an answer that is older than ``LEASE`` (its process died before it could give
it back) may be taken by the next request with the same key and body: a crash blocks a key for
a minute, not for ``KEEP``.

Kept answers older than ``KEEP`` are deleted by a claim of the same API key and by the daily
retention job (``app.consent.retention``), whichever comes first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.clock import utcnow
from app.storage.database import Database
from app.storage.tables import idempotency_keys

KEEP = timedelta(hours=24)
#: How long a claim without an answer holds its key: far longer than any request runs.
LEASE = timedelta(seconds=60)
MAX_KEY_CHARS = 255


@dataclass(frozen=True)
class Claimed:
    """This request holds the key: do the work, then ``complete`` or ``release``."""

    claim_id: int


@dataclass(frozen=True)
class Stored:
    """The first request's answer, to give again."""

    status_code: int
    location: str | None
    body: str


@dataclass(frozen=True)
class InProgress:
    """Another request with this key is still running."""


@dataclass(frozen=True)
class OtherRequest:
    """This key was used with another request (another body, or another endpoint)."""


Outcome = Claimed | Stored | InProgress | OtherRequest


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What "the same request" means: method, path and body (a JSON body by its meaning, so
    the order of its keys or its spacing does not matter)."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, RecursionError):
        canonical = body
    return hashlib.sha256(f"{method} {path}\n".encode() + canonical).hexdigest()


async def claim(db: Database, api_key_id: int, key: str, request_hash: str) -> Outcome:
    now = utcnow()
    try:
        async with db.write() as conn:
            # Keys older than KEEP are forgotten (this API key's only: a bounded delete).
            await conn.execute(
                delete(idempotency_keys).where(
                    idempotency_keys.c.api_key_id == api_key_id,
                    idempotency_keys.c.created_at < expired_before(now),
                )
            )
            claim_id = (
                await conn.execute(
                    insert(idempotency_keys)
                    .values(
                        api_key_id=api_key_id, key=key, request_hash=request_hash, created_at=now
                    )
                    .returning(idempotency_keys.c.id)
                )
            ).scalar_one()
        return Claimed(int(claim_id))
    except IntegrityError:
        pass  # another request holds (or held) this key
    query = select(idempotency_keys).where(
        idempotency_keys.c.api_key_id == api_key_id, idempotency_keys.c.key == key
    )
    async with db.read() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return InProgress()  # given back in between: the client's retry will claim it
    if row.request_hash != request_hash:
        return OtherRequest()
    if row.status_code is None:
        return await _take_over(db, row.id, now)
    return Stored(row.status_code, row.location, row.body or "")


async def _take_over(db: Database, claim_id: int, now: datetime) -> Claimed | InProgress:
    """A claim without an answer, taken if its lease ran out; one UPDATE, so of two requests
    that find the same stale claim only one takes it."""
    async with db.write() as conn:
        taken = await conn.execute(
            update(idempotency_keys)
            .where(
                idempotency_keys.c.id == claim_id,
                idempotency_keys.c.status_code.is_(None),
                idempotency_keys.c.created_at < now - LEASE,
            )
            .values(created_at=now)
        )
    return Claimed(claim_id) if taken.rowcount == 1 else InProgress()


def expired_before(now: datetime) -> datetime:
    """Claims and answers created before this moment are forgotten."""
    return now - KEEP


async def complete(
    db: Database, claim_id: int, status_code: int, location: str | None, body: str
) -> None:
    async with db.write() as conn:
        await conn.execute(
            update(idempotency_keys)
            .where(idempotency_keys.c.id == claim_id)
            .values(status_code=status_code, location=location, body=body)
        )


async def release(db: Database, claim_id: int) -> None:
    async with db.write() as conn:
        await conn.execute(delete(idempotency_keys).where(idempotency_keys.c.id == claim_id))
