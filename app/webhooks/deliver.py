"""Delivering webhooks: each delivery row goes pendente → entregue | falhou, and says why.

The rows are written with the status change itself (``app.invites.transitions.core``). The
worker's sweep puts the due ones on the queue (``publish_due``, arq's ``enqueue_job``, a new job
id each time); the job ``deliver_webhook`` claims its row with a conditional UPDATE (two workers
never hold one row at once), checks the URL again after DNS (``app.webhooks.addresses``), then
signs and POSTs the body (``app.webhooks.post``), DNS and POST within one
``WEBHOOK_TIMEOUT_SECONDS``. A non-2xx, a timeout, a connection error or anything else that
stops the attempt is recorded and retried after ``WEBHOOK_RETRY_BACKOFF_SECONDS``, with the
same ``webhook-id`` and the same body (frozen at the first attempt) every time; once the steps
run out the row is ``falhou``, and after ``WEBHOOK_MAX_FAILURES`` failed deliveries in a row
the webhook is disabled and its owner mailed once (a ``WEBHOOK_MAIL`` row, sent by the workers
like a sign-in link). Nothing here can hold up or undo an invite's transition: it only ever
reads what they committed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from arq.connections import ArqRedis
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.bounces.history import bounces_of
from app.clock import utcnow
from app.config import Settings
from app.invites.queries import address_since, invite_history
from app.invites.records import WEBHOOK_MAIL, Change, Event, Invite, NewInvite, record_from
from app.invites.status import Status
from app.invites.transitions.sending import create_invites
from app.logs import correlation_id
from app.sending.queue import Publisher
from app.storage.database import Database
from app.storage.tables import accounts, invites, webhook_deliveries, webhooks
from app.web.present import invite_detail_json
from app.webhooks import addresses
from app.webhooks.post import TIMED_OUT, UNEXPECTED, Outcome, post, signed_headers
from app.webhooks.store import ENTREGUE, FALHOU, PENDENTE

log = logging.getLogger(__name__)

DELIVER_FUNCTION = "deliver_webhook"
#: Due deliveries the sweep puts on the queue per pass.
PUBLISH_LIMIT = 500


def lease_seconds(settings: Settings) -> float:
    """How long a claim holds a row: the whole POST fits in it with room to record the outcome;
    the sweep publishes a row again only after this too."""
    return settings.webhook_timeout_seconds * 3 + 5


@dataclass(frozen=True)
class Claimed:
    """A delivery this worker holds now, with its webhook."""

    id: int
    public_id: str
    webhook_id: int
    event_id: int
    invite_id: int
    event_type: str
    email: str | None  # the address its event was about (None: a row from before it was kept)
    attempts: int
    body: str | None
    url: str
    secret: str


def _active() -> Any:
    return select(webhooks.c.id).where(webhooks.c.disabled_at.is_(None))


def _claimable(now: datetime) -> list[Any]:
    return [
        webhook_deliveries.c.state == PENDENTE,
        webhook_deliveries.c.available_at <= now,
        (webhook_deliveries.c.leased_until.is_(None)) | (webhook_deliveries.c.leased_until < now),
        webhook_deliveries.c.webhook_id.in_(_active()),
    ]


async def publish_due(db: Database, redis: ArqRedis, requeue_seconds: float) -> int:
    """Put every due delivery without a job on the queue; how many were put.

    Each row is marked queued (``queued_until``) by a conditional UPDATE before its job is
    enqueued, so two sweeps never both publish it; a job Redis lost is published again once
    ``queued_until`` passes (a duplicate job meets the claim and does nothing)."""
    now = utcnow()
    query = (
        select(
            webhook_deliveries.c.id, webhook_deliveries.c.public_id, webhook_deliveries.c.enqueues
        )
        .where(
            *_claimable(now),
            (webhook_deliveries.c.queued_until.is_(None))
            | (webhook_deliveries.c.queued_until < now),
        )
        .order_by(webhook_deliveries.c.available_at)
        .limit(PUBLISH_LIMIT)
    )
    async with db.read() as conn:
        due = (await conn.execute(query)).all()
    if not due:
        return 0
    won: list[tuple[int, str, int]] = []
    async with db.write() as conn:
        for row in due:
            marked = await conn.execute(
                update(webhook_deliveries)
                .where(
                    webhook_deliveries.c.id == row.id,
                    webhook_deliveries.c.enqueues == row.enqueues,
                    webhook_deliveries.c.state == PENDENTE,
                )
                .values(
                    enqueues=row.enqueues + 1,
                    queued_until=now + timedelta(seconds=requeue_seconds),
                )
            )
            if marked.rowcount == 1:
                won.append((row.id, row.public_id, row.enqueues + 1))
    for row_id, public_id, enqueue in won:
        # A new id per publication: arq refuses an id whose job or result it still keeps.
        job = await redis.enqueue_job(
            DELIVER_FUNCTION, public_id, _job_id=f"webhook:{public_id}:{enqueue}"
        )
        if job is None:
            log.error("arq refused a new webhook job id", extra={"delivery": public_id})
            async with db.write() as conn:
                await conn.execute(
                    update(webhook_deliveries)
                    .where(webhook_deliveries.c.id == row_id)
                    .values(queued_until=None)
                )
    return len(won)


async def claim(db: Database, public_id: str, seconds: float) -> Claimed | None:
    """Hold the delivery ``public_id`` for ``seconds`` and count the attempt (one conditional
    UPDATE: ``None`` when it is not due, is held by another worker, is finished, or its
    webhook is disabled or gone)."""
    now = utcnow()
    async with db.write() as conn:
        row = (
            await conn.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.public_id == public_id, *_claimable(now))
                .values(
                    attempts=webhook_deliveries.c.attempts + 1,
                    leased_until=now + timedelta(seconds=seconds),
                    updated_at=now,
                )
                .returning(*webhook_deliveries.c)
            )
        ).first()
        if row is None:
            return None
        hook = (
            await conn.execute(
                select(webhooks.c.url, webhooks.c.secret).where(webhooks.c.id == row.webhook_id)
            )
        ).one()
    return Claimed(
        id=row.id,
        public_id=row.public_id,
        webhook_id=row.webhook_id,
        event_id=row.event_id,
        invite_id=row.invite_id,
        event_type=row.event_type,
        email=row.email,
        attempts=row.attempts,
        body=row.body,
        url=hook.url,
        secret=hook.secret,
    )


async def payload(db: Database, claimed: Claimed, slow_after_seconds: float) -> str:
    """The body ``{"type", "timestamp", "data"}``: ``data`` is the invite as
    ``GET /api/v1/convites/{id}`` gives it, as it stood at this event: what the history holds
    (its status, attempt and error, when the mail left, its reminder, the history up to it and
    the bounces received by then) is taken from it, and the address from the delivery (kept
    with the event: a correction since must not rename it); the rest (name, occasion) is the
    row's now."""
    async with db.read() as conn:
        row = (await conn.execute(select(invites).where(invites.c.id == claimed.invite_id))).one()
    history = [e for e in await invite_history(db, claimed.invite_id) if e.id <= claimed.event_id]
    event: Event = history[-1]
    # A corrected address (devolvido → pendente) was never sent to: its row has no send time.
    since = address_since(history)
    sent = [
        e
        for e in history
        if e.status == Status.ENVIADO and e.reminder is None and e.attempt >= since
    ]
    # A reminder belongs to its round: a resend (a new pendente) starts one without any.
    round_began = max((e.id for e in history if e.status == Status.PENDENTE), default=0)
    reminded = [e for e in history if e.reminder is not None and e.id > round_began]
    invite = dataclasses.replace(
        record_from(Invite, row),
        email=claimed.email or row.email,
        status=event.status,
        attempt=event.attempt,
        error=event.error,
        next_attempt_at=event.next_attempt_at,
        updated_at=event.created_at,
        sent_at=sent[-1].created_at if sent else None,
        reminder_status=reminded[-1].reminder if reminded else None,
        reminded_at=reminded[-1].created_at if reminded else None,
        reminder_requested_at=None,
    )
    bounces = [
        b for b in await bounces_of(db, claimed.invite_id) if b.received_at <= event.created_at
    ]
    data = invite_detail_json(invite, history, bounces, event.created_at, slow_after_seconds)
    body = {"type": claimed.event_type, "timestamp": event.created_at.isoformat(), "data": data}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


async def frozen_body(db: Database, claimed: Claimed, slow_after_seconds: float) -> str:
    """The delivery's body: built at its first attempt and kept, so every retry sends the very
    bytes the first one did."""
    if claimed.body is not None:
        return claimed.body
    body = await payload(db, claimed, slow_after_seconds)
    async with db.write() as conn:
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.id == claimed.id, webhook_deliveries.c.body.is_(None))
            .values(body=body)
        )
    return body


@dataclass(frozen=True)
class Recorded:
    state: str  # the row's new state (``lost``: the row was gone or re-sent meanwhile)
    notice: Change | None = None  # this failure disabled the webhook: the mail to its owner


async def record(db: Database, claimed: Claimed, outcome: Outcome, settings: Settings) -> Recorded:
    """Write the attempt's outcome on the row this claim holds."""
    now = utcnow()
    steps = settings.webhook_retry_backoff_seconds
    if outcome.delivered:
        state, available_at = ENTREGUE, None
    elif claimed.attempts <= len(steps):
        state, available_at = PENDENTE, now + timedelta(seconds=steps[claimed.attempts - 1])
    else:
        state, available_at = FALHOU, None
    values: dict[str, Any] = {
        "state": state,
        "status_code": outcome.status_code,
        "snippet": outcome.snippet,
        "leased_until": None,
        "queued_until": None,
        "updated_at": now,
    }
    if available_at is not None:
        values["available_at"] = available_at
    async with db.write() as conn:
        written = await conn.execute(
            update(webhook_deliveries)
            .where(
                webhook_deliveries.c.id == claimed.id,
                webhook_deliveries.c.attempts == claimed.attempts,
                webhook_deliveries.c.state == PENDENTE,
            )
            .values(**values)
        )
        if written.rowcount != 1:
            return Recorded("lost")  # deleted with its webhook, or re-sent meanwhile
        if state == ENTREGUE:
            await conn.execute(
                update(webhooks).where(webhooks.c.id == claimed.webhook_id).values(failures=0)
            )
        elif state == FALHOU:
            await conn.execute(
                update(webhooks)
                .where(webhooks.c.id == claimed.webhook_id)
                .values(failures=webhooks.c.failures + 1)
            )
            notice = await _disable_if_spent(
                conn, claimed.webhook_id, settings.webhook_max_failures, now
            )
            return Recorded(state, notice)
    return Recorded(state)


async def _disable_if_spent(
    conn: AsyncConnection, webhook_id: int, max_failures: int, now: datetime
) -> Change | None:
    """Disable the webhook once its failures in a row reach ``max_failures`` and, in the same
    transaction, write the mail that tells its owner. Only the UPDATE that turns an enabled
    webhook into a disabled one writes the mail (a webhook already disabled matches nothing),
    so each disabling mails once, and nothing repeats it; **Reenviar** enables it again."""
    disabled = (
        await conn.execute(
            update(webhooks)
            .where(
                webhooks.c.id == webhook_id,
                webhooks.c.disabled_at.is_(None),
                webhooks.c.failures >= max_failures,
            )
            .values(disabled_at=now)
            .returning(webhooks.c.url, webhooks.c.account_id)
        )
    ).first()
    if disabled is None:
        return None
    owner = (
        await conn.execute(
            select(accounts.c.public_id, accounts.c.email).where(
                accounts.c.id == disabled.account_id
            )
        )
    ).one()
    notice = NewInvite(
        sender_id=owner.public_id,
        email=owner.email,
        name=None,
        correlation_id=correlation_id.get() or "",
        kind=WEBHOOK_MAIL,
        message=disabled.url,
    )
    # The mail row and its outbox row, committed with the disabling: the caller publishes it
    # after the commit, and the outbox relay does if that fails.
    [change] = await conn.run_sync(create_invites, [notice])
    assert isinstance(change, Change)  # only invitations can be duplicates
    log.warning("webhook disabled", extra={"webhook": webhook_id})
    return change


async def attempt(claimed: Claimed, body: str, settings: Settings) -> Outcome:
    """Check the URL after DNS, sign and POST: what came of it, always an ``Outcome``.

    DNS is inside the attempt's ``WEBHOOK_TIMEOUT_SECONDS`` (the OS resolver has no timeout of
    ours, and a hung one would hold the claim until its lease runs out). Anything else that
    goes wrong (a row written before a check existed, a corrupt secret) is a failed attempt,
    recorded and retried like a refused connection: raising here would leave the row claimed,
    unrecorded, its attempts climbing and its webhook never disabled."""
    seconds = settings.webhook_timeout_seconds
    try:
        async with asyncio.timeout(seconds):
            target = await addresses.resolve(
                claimed.url, allow_private=settings.webhook_allow_private_networks
            )
            headers = signed_headers(claimed.secret, claimed.public_id, body, utcnow())
            return await post(target, body, headers, seconds)
    except addresses.Refused as exc:
        return Outcome(False, None, str(exc))
    except TimeoutError:
        return Outcome(False, None, TIMED_OUT.format(seconds=seconds))
    except Exception:
        log.exception("webhook attempt failed unexpectedly", extra={"delivery": claimed.public_id})
        return Outcome(False, None, UNEXPECTED)


async def deliver(
    db: Database, public_id: str, settings: Settings, publisher: Publisher | None = None
) -> str:
    """One attempt at the delivery ``public_id``; its state after it (``not claimed``: nothing
    was done). The mail of a disabling is put on the queue with ``publisher`` (without one,
    the outbox relay does it)."""
    claimed = await claim(db, public_id, lease_seconds(settings))
    if claimed is None:
        return "not claimed"
    body = await frozen_body(db, claimed, settings.slow_after_seconds)
    outcome = await attempt(claimed, body, settings)
    recorded = await record(db, claimed, outcome, settings)
    state = recorded.state
    if recorded.notice is not None and publisher is not None:
        await publisher.publish_or_leave([recorded.notice])
    log.info(
        "webhook delivery attempted",
        extra={
            "delivery": claimed.public_id,
            "event_type": claimed.event_type,
            "attempt": claimed.attempts,
            "status_code": outcome.status_code,
            "state": state,
        },
    )
    return state


async def deliver_webhook(ctx: dict[str, Any], public_id: str) -> str:
    """The arq job: one attempt at one delivery."""
    return await deliver(ctx["db"], public_id, ctx["settings"], ctx["publisher"])
