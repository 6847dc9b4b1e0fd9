"""An account's webhooks and their deliveries, as the page and the API read and change them.

The secret (``whsec_`` + 24 random bytes, base64, as Standard Webhooks writes it) is shown once,
at creation, and kept as it is: signing every delivery needs it (SECURITY.md says what that
means). Deleting a webhook deletes its deliveries with it. An account has at most
``MAX_PER_ACCOUNT`` webhooks.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert, select, update

from app.accounts.store import hold
from app.clock import utcnow
from app.invites.records import record_from
from app.storage.database import Database
from app.storage.tables import invites, webhook_deliveries, webhooks
from app.webhooks import addresses

SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix Standard Webhooks gives secrets)
#: Deliveries shown per webhook on its page, newest first.
RECENT = 20
#: Webhooks an account may have, disabled ones included (**Reenviar** enables one again without
#: asking): every status change writes one delivery row per webhook in the change's own
#: transaction, so this bounds what one invite's transition writes.
MAX_PER_ACCOUNT = 10

PENDENTE = "pendente"
ENTREGUE = "entregue"
FALHOU = "falhou"


@dataclass(frozen=True)
class Webhook:
    id: int
    public_id: str
    account_id: int
    url: str
    created_at: datetime
    failures: int
    disabled_at: datetime | None


@dataclass(frozen=True)
class Delivery:
    """One delivery as the page shows it."""

    id: int
    public_id: str
    webhook_id: int
    event_type: str
    state: str
    attempts: int
    available_at: datetime
    status_code: int | None
    snippet: str | None
    created_at: datetime
    address: str  # the address its event was about (the invite's now, in rows kept before it)


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


class Full(Exception):
    """The account already has ``MAX_PER_ACCOUNT`` webhooks."""


class SameUrl(Exception):
    """The account already has a webhook for this URL (a form sent twice, say): every change
    would reach it twice."""


def _as_kept(url: str) -> str:
    """``url`` as registration writes it now: a row kept before (``…/hook?``, ``…/hook#x``)
    still counts as the same receiver."""
    try:
        return addresses.check_form(url, allow_private=True)
    except addresses.Refused:  # kept before its form was checked this closely
        return url


async def create(db: Database, account_id: int, url: str) -> tuple[Webhook, str]:
    """A new webhook of the account; its row and its secret (the only time it is given).
    ``Full`` or ``SameUrl`` when it cannot have one more."""
    secret = new_secret()
    async with db.write() as conn:
        await hold(conn, account_id)  # two creations at once must not both count nine
        mine = select(webhooks.c.url).where(webhooks.c.account_id == account_id)
        urls = list((await conn.execute(mine)).scalars())
        if len(urls) >= MAX_PER_ACCOUNT:
            raise Full
        if url in {_as_kept(kept) for kept in urls}:
            raise SameUrl
        row = (
            await conn.execute(
                insert(webhooks)
                .values(
                    public_id=secrets.token_urlsafe(12),
                    account_id=account_id,
                    url=url,
                    secret=secret,
                    created_at=utcnow(),
                    failures=0,
                    disabled_at=None,
                )
                .returning(*webhooks.c)
            )
        ).one()
    return record_from(Webhook, row), secret


async def of_account(db: Database, account_id: int) -> list[Webhook]:
    query = (
        select(webhooks).where(webhooks.c.account_id == account_id).order_by(webhooks.c.id.desc())
    )
    async with db.read() as conn:
        return [record_from(Webhook, row) for row in (await conn.execute(query)).all()]


async def one_of_account(db: Database, account_id: int, public_id: str) -> Webhook | None:
    query = select(webhooks).where(
        webhooks.c.account_id == account_id, webhooks.c.public_id == public_id
    )
    async with db.read() as conn:
        row = (await conn.execute(query)).first()
    return record_from(Webhook, row) if row else None


async def disabled_count(db: Database, account_id: int) -> int:
    """How many of the account's webhooks were disabled (``/conta`` shows a sign)."""
    query = select(func.count()).where(
        webhooks.c.account_id == account_id, webhooks.c.disabled_at.is_not(None)
    )
    async with db.read() as conn:
        return int((await conn.execute(query)).scalar_one())


async def remove(db: Database, account_id: int, public_id: str) -> bool:
    """Delete one webhook of the account and its deliveries; ``False``: it has no such one."""
    async with db.write() as conn:
        found = (
            await conn.execute(
                select(webhooks.c.id).where(
                    webhooks.c.account_id == account_id, webhooks.c.public_id == public_id
                )
            )
        ).scalar_one_or_none()
        if found is None:
            return False
        await conn.execute(
            delete(webhook_deliveries).where(webhook_deliveries.c.webhook_id == found)
        )
        await conn.execute(delete(webhooks).where(webhooks.c.id == found))
    return True


async def recent_deliveries(db: Database, webhook_ids: list[int]) -> dict[int, list[Delivery]]:
    """The newest ``RECENT`` deliveries of each webhook."""
    found: dict[int, list[Delivery]] = {webhook_id: [] for webhook_id in webhook_ids}
    async with db.read() as conn:
        for webhook_id in webhook_ids:
            query = (
                select(
                    webhook_deliveries,
                    func.coalesce(webhook_deliveries.c.email, invites.c.email).label("address"),
                )
                .join(invites, invites.c.id == webhook_deliveries.c.invite_id)
                .where(webhook_deliveries.c.webhook_id == webhook_id)
                .order_by(webhook_deliveries.c.id.desc())
                .limit(RECENT)
            )
            rows = (await conn.execute(query)).all()
            found[webhook_id] = [record_from(Delivery, row) for row in rows]
    return found


async def resend(db: Database, account_id: int, public_id: str) -> bool:
    """**Reenviar**: a ``falhou`` delivery of the account is due again, with a fresh round of
    attempts and the same ``webhook-id`` and body; its webhook is enabled again (the person says
    the receiver is back). ``False``: no such failed delivery."""
    now = utcnow()
    mine = select(webhooks.c.id).where(webhooks.c.account_id == account_id)
    async with db.write() as conn:
        webhook_id = (
            await conn.execute(
                update(webhook_deliveries)
                .where(
                    webhook_deliveries.c.public_id == public_id,
                    webhook_deliveries.c.state == FALHOU,
                    webhook_deliveries.c.webhook_id.in_(mine),
                )
                .values(
                    state=PENDENTE,
                    attempts=0,
                    available_at=now,
                    queued_until=None,
                    leased_until=None,
                    updated_at=now,
                )
                .returning(webhook_deliveries.c.webhook_id)
            )
        ).scalar_one_or_none()
        if webhook_id is None:
            return False
        await conn.execute(
            update(webhooks).where(webhooks.c.id == webhook_id).values(failures=0, disabled_at=None)
        )
    return True
