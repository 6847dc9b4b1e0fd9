"""The worker's reminder pass: claim what is due (once, whoever else runs it), send each
reminder through the Mailer, record what became of it. An arq cron of the worker.

A reminder never changes the invite's status and is never retried on its own: a refusal is
recorded as ``falhou`` (in the history and the metrics), a send cut mid-message as ``incerto``.
It takes the hourly send budget like an invitation; while that is spent, the claim is given
back untouched and a later pass sends it.
"""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis

from app.config import Settings
from app.consent import suppression
from app.invites.transitions.reminders import (
    Reminder,
    ReminderStatus,
    claim_due,
    finish,
    give_back,
)
from app.live.wakeups import Announcer
from app.sending.attempt import spend_hourly_budget
from app.sending.mailer import Mailer, SendError, SendProgress, UnknownOutcomeError
from app.sending.messages import reminder
from app.sending.pause import Pause
from app.sending.sweep import REMINDER_CUT_SHORT
from app.storage.database import Database
from app.ttl_cache import TtlCache

log = logging.getLogger(__name__)

INTERNAL_ERROR = "Erro interno ao preparar o lembrete."
KEY_CHANGED = "O link do convite não pôde ser refeito (a chave do servidor mudou desde o envio)."


async def _send_one(
    db: Database, mailer: Mailer, redis: Redis, settings: Settings, claimed: Reminder
) -> tuple[ReminderStatus, str | None] | None:
    """What became of the reminder; ``None``: the hourly budget is spent and nothing left."""
    invite = claimed.invite
    refusal = await suppression.refusal_for(db, invite.email)
    if refusal is not None:
        # Suppressed since the invitation left (by another invite's opt-out, bounce or
        # complaint): the reminder is not mailed, and the history says why.
        return ReminderStatus.FAILED, refusal
    if claimed.token is None:
        log.error("reminder link cannot be rebuilt", extra={"invite": invite.public_id})
        return ReminderStatus.FAILED, KEY_CHANGED
    spent = await spend_hourly_budget(redis, settings, invite)
    if spent is not None:
        log.info(
            "hourly send budget spent; reminder deferred",
            extra={"invite": invite.public_id, "limit": spent.limit.kind},
        )
        return None
    progress = SendProgress()
    try:
        message = reminder(settings, invite, claimed.token, claimed.expires_at)
        await mailer.send(message, progress, deadline=settings.sending_lease_seconds / 2)
    except UnknownOutcomeError as exc:
        log.error("reminder outcome unknown", extra={"invite": invite.public_id})
        return ReminderStatus.UNCERTAIN, exc.reason
    except SendError as exc:
        log.warning("reminder not sent", extra={"invite": invite.public_id, "error": exc.reason})
        return ReminderStatus.FAILED, exc.reason
    except Exception:
        log.exception(
            "unexpected error while sending a reminder", extra={"invite": invite.public_id}
        )
        if progress.data_started:
            return ReminderStatus.UNCERTAIN, REMINDER_CUT_SHORT
        return ReminderStatus.FAILED, INTERNAL_ERROR
    return ReminderStatus.SENT, None


async def send_due_reminders(
    db: Database,
    mailer: Mailer,
    announcer: Announcer,
    redis: Redis,
    settings: Settings,
    paused: TtlCache[Pause | None],
) -> int:
    """Claim and send the reminders due now; how many were claimed. Nothing while the team has
    paused sending: the claim waits, so the reminder goes once sending resumes."""
    if await paused() is not None:
        return 0
    claimed = await claim_due(
        db,
        after_seconds=settings.reminder_after_seconds,
        ttl_seconds=settings.invite_ttl_seconds,
        key=settings.secret_key,
    )

    async def deliver(one: Reminder) -> None:
        result = await _send_one(db, mailer, redis, settings, one)
        if result is None:
            await give_back(db, one)
            return
        change = await finish(db, one.invite, *result)
        await announcer.announce(change)

    await asyncio.gather(*(deliver(one) for one in claimed))
    if claimed:
        log.info("reminders sent", extra={"claimed": len(claimed)})
    return len(claimed)
