"""The arq worker: claim, send, record the verdict; and the reconciliation sweep.

Start it with ``python -m app worker`` (``app.sending.supervise``: stock arq workers kept
running across Redis outages), or ``arq app.sending.worker.WorkerSettings`` (the plain arq CLI,
which exits when Redis goes away).
Jobs carry ids, not rows: the row in the database is the only truth about an invite.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack
from datetime import timedelta
from typing import Any, cast

from arq import cron, func
from arq.connections import RedisSettings
from arq.typing import WorkerCoroutine
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app import clock, ratelimit
from app.accounts import signin
from app.clock import utcnow
from app.config import Settings, load_settings
from app.invites import queries, transitions
from app.invites.records import SIGNIN_MAIL, Change, Invite
from app.invites.status import Status
from app.live.wakeups import Announcer
from app.logs import configure_logging, correlation_id
from app.ops.heap import collector_tuned_for_serving
from app.ops.metrics import ACCEPTED_TO_SENT, SEND_DURATION, Observations
from app.sending.heartbeat import WORKERS, beat, forget
from app.sending.mailer import (
    Mailer,
    PermanentSendError,
    SendProgress,
    TransientSendError,
    UnknownOutcomeError,
)
from app.sending.messages import build_message
from app.sending.pause import pause_flag
from app.sending.queue import (
    SEND_FUNCTION,
    SWEEP_TIMEOUT_SECONDS,
    Publisher,
    send_timeout_seconds,
)
from app.sending.sweep import LEASE_EXPIRED_REASON
from app.sending.sweep import reconcile as sweep
from app.storage.database import Database

log = logging.getLogger("app.sending.worker")

#: What "Redis is not there" looks like from redis-py and the socket below it.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    OSError,
    asyncio.TimeoutError,
)

STOPPED_BEFORE_SENDING = "O envio foi interrompido antes de começar; ele será retomado."
HOURLY_BUDGET_SPENT = (
    "O limite de envios por hora do Convites foi atingido; seu convite sai quando ele renovar."
)


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
    # claim (replacing older ones); a sign-in mail's is made now.
    if invite.kind == SIGNIN_MAIL:
        token: str | None = await signin.issue(ctx["db"], invite, settings.signin_ttl_seconds)
    else:
        token = link
    await ctx["mailer"].send(
        build_message(settings, invite, token),
        progress,
        deadline=ctx["settings"].sending_lease_seconds / 2,
    )


async def _observe_sent(ctx: dict[str, Any], change: Change | None) -> None:
    if change is None or change.invite.status != Status.ENVIADO or change.invite.sent_at is None:
        return
    started = await queries.round_started_at(ctx["db"], change.invite)
    latency = (change.invite.sent_at - started).total_seconds()
    await ctx["observations"].observe(ACCEPTED_TO_SENT, max(0.0, latency))


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


class RunningJobs:
    """The jobs this worker runs now. When Redis goes away, arq's worker ends, but its jobs
    only need the database to finish: the supervisor waits for them before closing their
    clients."""

    def __init__(self) -> None:
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()

    @contextlib.asynccontextmanager
    async def track(self) -> AsyncIterator[None]:
        self.count += 1
        self.idle.clear()
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                self.idle.set()

    async def wait_idle(self) -> None:
        await self.idle.wait()


def tracked(job: Callable[..., Awaitable[Any]]) -> WorkerCoroutine:
    """``job``, counted in ``ctx["running"]`` while it runs."""

    @functools.wraps(job)
    async def run(ctx: dict[str, Any], *args: Any) -> Any:
        async with ctx["running"].track():
            return await job(ctx, *args)

    return cast(WorkerCoroutine, run)


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
        ctx["db"], public_id, attempt, settings.sending_lease_seconds
    )
    if won is None:
        # A redelivered job, or an attempt that another job already ran: nothing to do.
        log.info("claim lost; duplicate delivery", extra={"invite": public_id, "attempt": attempt})
        return "duplicate"
    claimed = won.change
    await ctx["announcer"].announce(claimed)
    try:
        spent = await ratelimit.take(ctx["redis"], [ratelimit.global_send_limit(settings)])
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
        log.warning("hourly send budget spent; attempt deferred", extra={"invite": public_id})
        deferred = await transitions.release_claim(
            ctx["db"], claimed.invite, HOURLY_BUDGET_SPENT, due_in=spent.retry_after
        )
        await _record(ctx, deferred)
        return "deferred"
    log.info("sending", extra={"invite": public_id, "attempt": attempt})
    progress, started = SendProgress(), clock.monotonic()
    outcome = await _deliver(ctx, claimed.invite, won.link, progress)
    took = clock.monotonic() - started
    # What follows needs Redis; the verdict is already in the database.
    await _record(ctx, outcome)
    await ctx["observations"].observe(SEND_DURATION, took)
    await _observe_sent(ctx, outcome)
    status = outcome.invite.status.value if outcome else "lost"
    log.info("attempt finished", extra={"invite": public_id, "attempt": attempt, "status": status})
    return status


async def reconcile(ctx: dict[str, Any]) -> dict[str, int]:
    """The arq cron around one sweep (``app.sending.sweep.reconcile``)."""
    done = await sweep(
        ctx["db"],
        ctx["redis"],
        ctx["publisher"],
        ctx["announcer"],
        invite_ttl_seconds=ctx["settings"].invite_ttl_seconds,
    )
    return vars(done)


async def _heartbeat_forever(ctx: dict[str, Any], failing: bool) -> None:
    """Beat every interval; ``failing``: the last beat failed (logged once per outage, not once
    per beat)."""
    interval = ctx["settings"].worker_heartbeat_seconds
    while True:
        try:
            await beat(ctx["redis"], WORKERS, ctx["worker_id"])
        except Exception:
            if not failing:
                log.exception("heartbeat failed; retrying every interval")
            failing = True
        else:
            if failing:
                log.info("heartbeat resumed", extra={"worker_id": ctx["worker_id"]})
            failing = False
        await asyncio.sleep(interval)


async def startup(ctx: dict[str, Any]) -> None:
    settings: Settings = ctx["settings"]
    ctx["db"] = Database(settings.database_url)
    ctx["mailer"] = Mailer(settings.smtp)
    ctx["announcer"] = Announcer(ctx["redis"])
    ctx["observations"] = Observations(ctx["redis"])
    ctx["publisher"] = Publisher(ctx["db"], ctx["redis"])
    ctx["pause"] = pause_flag(ctx["db"])
    ctx["running"] = RunningJobs()
    ctx["worker_id"] = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    failing = False
    try:
        await beat(ctx["redis"], WORKERS, ctx["worker_id"])
    except OUTAGE_ERRORS:
        # Redis went away since arq connected: the loop below beats again every interval, and
        # the supervisor waits the outage out (app.sending.supervise). Starting up is not the
        # moment to give up.
        log.exception("heartbeat failed; retrying every interval")
        failing = True
    ctx["heartbeat"] = asyncio.create_task(_heartbeat_forever(ctx, failing))
    log.info("worker started", extra={"worker_id": ctx["worker_id"]})


async def shutdown(ctx: dict[str, Any]) -> None:
    task = ctx.get("heartbeat")
    if task is not None:
        task.cancel()
    if "worker_id" in ctx:
        try:
            await forget(ctx["redis"], WORKERS, ctx["worker_id"])
        except Exception as exc:  # Redis down: the beat goes stale by itself
            log.warning("could not withdraw the heartbeat", extra={"error": repr(exc)})
    for part in ("publisher", "announcer", "observations", "mailer"):
        if part in ctx:
            await ctx[part].close()
    if "db" in ctx:
        await ctx["db"].dispose()
    log.info("worker stopped", extra={"worker_id": ctx.get("worker_id")})


def redis_settings(url: str) -> RedisSettings:
    """arq's settings for ``url``, with redis-py retrying each command through a short blip
    (about a second); arq's own connection retries are off, since a longer outage is the
    supervisor's to wait out with one log line (``app.sending.supervise``)."""
    return dataclasses.replace(
        RedisSettings.from_dsn(url),
        conn_retries=0,
        retry_on_error=[RedisConnectionError, RedisTimeoutError, ConnectionError],
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.1), retries=3),
    )


def worker_options(settings: Settings) -> dict[str, Any]:
    """Everything ``arq.Worker`` needs, for the CLI class below and for in-process test workers."""
    send_timeout = send_timeout_seconds(settings.sending_lease_seconds)
    return {
        "functions": [
            func(tracked(send_invite), name=SEND_FUNCTION, timeout=send_timeout, max_tries=5)
        ],
        "cron_jobs": [
            cron(
                tracked(reconcile),
                second=set(range(0, 60, 2)),
                run_at_startup=True,
                timeout=SWEEP_TIMEOUT_SECONDS,
            )
        ],
        "on_startup": startup,
        "on_shutdown": shutdown,
        "redis_settings": redis_settings(settings.redis_url),
        # A graceful stop lets in-flight sends finish; what is left is put back safely.
        "job_completion_wait": max(1, round(settings.worker_grace_seconds)),
        # Measured (docs/benchmarks.md): a short poll keeps accepted→enviado low without backlog;
        # many concurrent jobs make the group commits of claims and verdicts large. SMTP
        # connections are capped separately (SMTP_URL ?pool=).
        "poll_delay": 0.02,
        "max_jobs": 200,
        "keep_result": 3600,
        "ctx": {"settings": settings},
    }


async def _startup_with_json_logs(ctx: dict[str, Any]) -> None:
    # arq's CLI installs its own log handlers after importing the settings; ours win here.
    configure_logging("worker")
    await startup(ctx)
    # A worker process, like the web's, keeps what start-up built out of the collector's sight
    # (``app.ops.heap`` says why). Only here, in the worker's own process: in-process test workers
    # share the interpreter with the web's app.
    collector = ctx["collector"] = ExitStack()
    collector.enter_context(collector_tuned_for_serving())


async def _shutdown_of_the_process(ctx: dict[str, Any]) -> None:
    try:
        await shutdown(ctx)
    finally:
        if "collector" in ctx:
            ctx["collector"].close()


def process_worker_options(settings: Settings) -> dict[str, Any]:
    """``worker_options`` for a worker process of its own (``python -m app worker``, arq's CLI)."""
    options = worker_options(settings)
    options["on_startup"] = _startup_with_json_logs
    options["on_shutdown"] = _shutdown_of_the_process
    return options


def _worker_settings_class() -> type:
    configure_logging("worker")
    return type("WorkerSettings", (), process_worker_options(load_settings()))


def __getattr__(name: str) -> Any:
    # `arq app.sending.worker.WorkerSettings` reads the environment only when the worker starts,
    # so importing this module (tests, the web) never depends on worker variables.
    if name == "WorkerSettings":
        return _worker_settings_class()
    raise AttributeError(name)
