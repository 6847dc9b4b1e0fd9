"""One attempt of one invite, as the arq job ``send_invite`` runs it: claim the row, check the
suppression list, spend the hourly budget, hand the mail to SMTP, record the verdict in the
database, then tell the pages.

Jobs carry ids, not rows: the row in the database is the only truth about an invite. The
verdict needs only the database, so a Redis outage never loses it; every step after it is best
effort. Where a row becomes ``falhou`` or ``incerto`` is ``app.invites.transitions``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from redis.asyncio import Redis

from app import clock, ratelimit
from app.accounts import signin
from app.clock import utcnow
from app.config import Settings
from app.consent import confirmation, suppression
from app.invites import queries, transitions
from app.invites.records import ERASURE_MAIL, INVITE, SIGNIN_MAIL, Change, Invite
from app.invites.status import Status
from app.logs import correlation_id
from app.ops.metrics import ACCEPTED_TO_SENT, SEND_DURATION
from app.sending.mailer import (
    PermanentSendError,
    SendProgress,
    TransientSendError,
    UnknownOutcomeError,
)
from app.sending.messages import build_message
from app.sending.queue import OUTAGE_ERRORS
from app.sending.sweep import LEASE_EXPIRED_REASON

log = logging.getLogger(__name__)

STOPPED_BEFORE_SENDING = "O envio foi interrompido antes de começar; ele será retomado."
HOURLY_BUDGET_SPENT = (
    "O limite de envios por hora do Convites foi atingido; seu convite sai quando ele renovar."
)
SENDER_SHARE_SPENT = (
    "Você usou sua parte dos envios desta hora, que é dividida entre todos os remetentes; "
    "seu convite sai quando ela renovar."
)


async def spend_hourly_budget(
    redis: Redis, settings: Settings, invite: Invite
) -> ratelimit.Refusal | None:
    """A sign-in or erasure confirmation mail always goes (it is only counted, so invitations
    give way to it); an invitation, or its reminder (``app.sending.reminders``), takes one unit
    of the shared hour and of its sender's share, or waits."""
    if invite.kind != INVITE:
        await ratelimit.count_send(redis, ratelimit.global_send_limit(settings))
        return None
    return await ratelimit.take(redis, ratelimit.hourly_send_limits(settings, invite.sender_id))


async def _record(ctx: dict[str, Any], change: Change | None) -> None:
    """Wake the sender's pages; enqueue the next attempt if the transition asked for one."""
    await ctx["announcer"].announce(change)
    await ctx["publisher"].publish_or_leave([change])


async def _after_transient(
    ctx: dict[str, Any], invite: Invite, error: TransientSendError
) -> Change | None:
    settings: Settings = ctx["settings"]
    tries_this_round = invite.attempt - invite.round_first_attempt + 1
    if tries_this_round >= settings.max_attempts:
        reason = f"Não foi possível enviar depois de {tries_this_round} tentativas. {error.reason}"
        return await transitions.mark_failed(ctx["db"], invite, reason, exhausted=True)
    return await transitions.schedule_retry(
        ctx["db"], invite, error.reason, settings.backoff_for(tries_this_round)
    )


async def _stop_safely(ctx: dict[str, Any], invite: Invite, progress: SendProgress) -> None:
    """The worker is stopping mid-send: never leave the row in ``enviando``."""
    if progress.data_started:
        change = await transitions.mark_uncertain(ctx["db"], invite, LEASE_EXPIRED_REASON)
    else:
        change = await transitions.release_claim(ctx["db"], invite, STOPPED_BEFORE_SENDING)
    await _record(ctx, change)


class TooLateToSend(Exception):
    """Less than half of this claim's lease is left (the job stalled after its claim, on Redis):
    the SMTP conversation could outlive the lease, and once the lease is over the sweep gives
    the row to someone else. Nothing has left: the claim is given back."""


def _lease_leaves_time(invite: Invite, lease_seconds: float) -> bool:
    """Whether this claim keeps its lease for the whole send (cut at half the lease). Only the
    sweep takes an ``enviando`` row away, and only once its lease is over; no cancel, answer or
    bounce touches one. Clocks of different machines may differ by less than half a lease."""
    if invite.lease_expires_at is None:
        return False
    return invite.lease_expires_at - utcnow() >= timedelta(seconds=lease_seconds / 2)


async def _send_timed(
    ctx: dict[str, Any], invite: Invite, link: str | None, progress: SendProgress
) -> None:
    settings: Settings = ctx["settings"]
    if not _lease_leaves_time(invite, settings.sending_lease_seconds):
        raise TooLateToSend
    # The mail's link is durable before the mail leaves: an invitation's was issued with its
    # claim (replacing older ones); a sign-in mail's is made now; an erasure confirmation's is
    # signed, nothing stored.
    if invite.kind == SIGNIN_MAIL:
        token: str | None = await signin.issue(ctx["db"], invite, settings.signin_ttl_seconds)
    elif invite.kind == ERASURE_MAIL:
        token = confirmation.link_token(settings.secret_key, invite.public_id)
    else:
        token = link
    await ctx["mailer"].send(
        build_message(settings, invite, token),
        progress,
        deadline=ctx["settings"].sending_lease_seconds / 2,
    )


async def _observe(ctx: dict[str, Any], took: float, change: Change | None) -> None:
    """How long the SMTP conversation took and, for a sent invite, how long since its round
    began (the 202 or the resend), in one round trip."""
    points = [(SEND_DURATION, took)]
    invite = change.invite if change is not None else None
    if invite is not None and invite.status == Status.ENVIADO and invite.sent_at is not None:
        started = await queries.round_started_at(ctx["db"], invite)
        points.append((ACCEPTED_TO_SENT, max(0.0, (invite.sent_at - started).total_seconds())))
    await ctx["observations"].observe(*points)


async def _deliver(
    ctx: dict[str, Any], invite: Invite, link: str | None, progress: SendProgress
) -> Change | None:
    """Send, then record the verdict in the database; nothing here needs Redis, so a verdict
    is never lost to an outage."""
    try:
        await _send_timed(ctx, invite, link, progress)
    except TooLateToSend:
        log.warning("claim too old to send; given back", extra={"invite": invite.public_id})
        return await transitions.release_claim(ctx["db"], invite, STOPPED_BEFORE_SENDING)
    except TransientSendError as exc:
        log.warning(
            "transient send failure", extra={"invite": invite.public_id, "error": exc.reason}
        )
        return await _after_transient(ctx, invite, exc)
    except PermanentSendError as exc:
        log.warning(
            "permanent send failure", extra={"invite": invite.public_id, "error": exc.reason}
        )
        return await transitions.mark_failed(ctx["db"], invite, exc.reason)
    except UnknownOutcomeError as exc:
        log.error("send outcome unknown", extra={"invite": invite.public_id, "error": exc.reason})
        return await transitions.mark_uncertain(ctx["db"], invite, exc.reason)
    except asyncio.CancelledError:
        await asyncio.shield(_stop_safely(ctx, invite, progress))
        raise
    except Exception:
        log.exception("unexpected error while sending", extra={"invite": invite.public_id})
        if progress.data_started:
            return await transitions.mark_uncertain(ctx["db"], invite, LEASE_EXPIRED_REASON)
        return await transitions.mark_failed(
            ctx["db"], invite, "Erro interno ao preparar o envio. Tente de novo em instantes."
        )
    return await transitions.mark_sent(ctx["db"], invite)


async def _cancelled_as_suppressed(ctx: dict[str, Any], invite: Invite) -> bool:
    """An invitation whose address joined the suppression list after it was queued is never
    sent: ``cancelado``, with the reason in its row and history. A sign-in mail always goes
    (the address's owner asked for it), and so does an erasure's confirmation link: an address
    that opted out may still want its data gone."""
    if invite.kind != INVITE:
        return False
    reason = await suppression.reason_for(ctx["db"], invite.email)
    if reason is None:
        return False
    note = suppression.NOT_SENT.format(refusal=suppression.REFUSALS[reason])
    cancelled = await transitions.cancel_claim(ctx["db"], invite, note)
    log.info(
        "address on the suppression list; invite cancelled",
        extra={"invite": invite.public_id, "reason": reason.value},
    )
    await _record(ctx, cancelled)
    return True


async def send_invite(ctx: dict[str, Any], public_id: str, attempt: int, correlation: str) -> str:
    """Run one attempt: claim the row, hand the mail to SMTP, record what happened."""
    correlation_id.set(correlation)
    settings: Settings = ctx["settings"]
    if await ctx["pause"]() is not None:
        # Paused by the team (app.sending.pause): the row stays pendente; the sweep enqueues it
        # again once sending resumes.
        log.info("sending paused; job left for later", extra={"invite": public_id})
        return "paused"
    won = await transitions.claim_with_link(
        ctx["db"],
        public_id,
        attempt,
        settings.sending_lease_seconds,
        link_key=settings.secret_key,
    )
    if won is None:
        # A redelivered job, or an attempt that another job already ran: nothing to do.
        log.info("claim lost; duplicate delivery", extra={"invite": public_id, "attempt": attempt})
        return "duplicate"
    claimed = won.change
    await ctx["announcer"].announce(claimed)
    if await _cancelled_as_suppressed(ctx, claimed.invite):
        return "suppressed"
    try:
        spent = await spend_hourly_budget(ctx["redis"], settings, claimed.invite)
    except OUTAGE_ERRORS:
        # Redis went away between the claim and the send: nothing left, so the claim is given
        # back at once rather than left to expire as incerto.
        log.warning(
            "redis unavailable before sending; claim given back", extra={"invite": public_id}
        )
        released = await transitions.release_claim(
            ctx["db"], claimed.invite, STOPPED_BEFORE_SENDING
        )
        await _record(ctx, released)
        return "released"
    if spent is not None:
        # Nothing refused, nothing lost: the row waits as pendente until the window renews.
        log.warning(
            "hourly send budget spent; attempt deferred",
            extra={"invite": public_id, "limit": spent.limit.kind},
        )
        reason = SENDER_SHARE_SPENT if spent.limit.kind == "sender_hour" else HOURLY_BUDGET_SPENT
        deferred = await transitions.release_claim(
            ctx["db"], claimed.invite, reason, due_in=spent.retry_after
        )
        await _record(ctx, deferred)
        return "deferred"
    log.info("sending", extra={"invite": public_id, "attempt": attempt})
    progress, started = SendProgress(), clock.monotonic()
    outcome = await _deliver(ctx, claimed.invite, won.link, progress)
    took = clock.monotonic() - started
    # What follows needs Redis; the verdict is already in the database.
    await _record(ctx, outcome)
    await _observe(ctx, took, outcome)
    status = outcome.invite.status.value if outcome else "lost"
    log.info("attempt finished", extra={"invite": public_id, "attempt": attempt, "status": status})
    return status
