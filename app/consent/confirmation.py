"""The link that confirms an erasure the invitee asked for (**Apagar meus dados** on
``/c/{token}``): mailed to the invite's address, so that only whoever reads that mailbox can
erase its data, not whoever holds a forwarded invitation link.

The request is a mail row of kind ``apagar`` (the same outbox, worker and states as a sign-in
mail). Its link is ``/apagar/{public id}.{tag}``: the tag is an HMAC of the row's public id
keyed with ``SECRET_KEY``, so nothing secret is stored and nobody can write a link for another
row. It works for ``LINK_TTL_SECONDS`` after the request, and once: the erasure deletes the
row with everything else of the address.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select

from app.invites.records import ERASURE_MAIL, Invite, record_from
from app.signing import FULL, Purpose, sign, verify
from app.storage.database import Database
from app.storage.tables import invites

LINK_TTL_SECONDS = 24 * 3600


def link_token(secret_key: str, public_id: str) -> str:
    """The token of the confirmation link of the erasure request ``public_id``."""
    return f"{public_id}.{sign(secret_key, Purpose.ERASURE_LINK, public_id, length=FULL)}"


class LinkState(StrEnum):
    VALID = "valido"
    EXPIRED = "expirado"
    GONE = "usado"  # signed by us, but its request is gone (the erasure happened)


@dataclass(frozen=True)
class Confirmation:
    state: LinkState
    request: Invite | None  # the request row (None when GONE)


async def confirmation(
    db: Database, secret_key: str, token: str, now: datetime
) -> Confirmation | None:
    """What the link is now; ``None`` when we did not sign it (a 404: it never existed)."""
    public_id, _, tag = token.partition(".")
    if not tag or not verify(tag, secret_key, Purpose.ERASURE_LINK, public_id, length=FULL):
        return None
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(invites).where(
                    invites.c.public_id == public_id, invites.c.kind == ERASURE_MAIL
                )
            )
        ).first()
    if row is None:
        return Confirmation(LinkState.GONE, None)
    request = record_from(Invite, row)
    if request.created_at + timedelta(seconds=LINK_TTL_SECONDS) <= now:
        return Confirmation(LinkState.EXPIRED, request)
    return Confirmation(LinkState.VALID, request)
