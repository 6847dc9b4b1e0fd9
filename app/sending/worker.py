"""The arq worker's settings: its jobs (``send_invite``, ``deliver_webhook``, the reconciliation
cron), the clients its start-up hands them through ``ctx``, and its heartbeat.

Start it with ``python -m app worker`` (``app.sending.supervise``: stock arq workers kept
running across Redis outages), or ``arq app.sending.worker.WorkerSettings`` (the plain arq CLI,
which exits when Redis goes away).
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
from typing import Any, cast

from arq import cron, func
from arq.connections import RedisSettings
from arq.typing import WorkerCoroutine
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.clock import utcnow
from app.config import Settings, load_settings
from app.consent import retention
from app.live.wakeups import Announcer
from app.logs import configure_logging
from app.ops.heap import collector_tuned_for_serving
from app.ops.metrics import Observations, count_retention
from app.sending.attempt import send_invite
from app.sending.heartbeat import WORKERS, beat, forget
from app.sending.mailer import (
    Mailer,
)
from app.sending.pause import pause_flag
from app.sending.queue import (
    OUTAGE_ERRORS,
    SEND_FUNCTION,
    Publisher,
    cron_timeout_seconds,
    send_timeout_seconds,
)
from app.sending.reminders import send_due_reminders
from app.sending.sweep import reconcile as sweep
from app.storage.database import Database
from app.webhooks.deliver import DELIVER_FUNCTION, deliver_webhook, lease_seconds

log = logging.getLogger("app.sending.worker")


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


async def reconcile(ctx: dict[str, Any]) -> dict[str, int]:
    """The arq cron around one sweep (``app.sending.sweep.reconcile``)."""
    done = await sweep(
        ctx["db"],
        ctx["redis"],
        ctx["publisher"],
        ctx["announcer"],
        invite_ttl_seconds=ctx["settings"].invite_ttl_seconds,
        sending_lease_seconds=ctx["settings"].sending_lease_seconds,
        webhook_requeue_seconds=lease_seconds(ctx["settings"]),
    )
    return vars(done)


async def purge_ended(ctx: dict[str, Any]) -> dict[str, int]:
    """The hourly arq cron around the retention purge (``app.consent.retention``)."""
    removed = await retention.purge(ctx["db"], utcnow(), ctx["settings"].retention_days)
    await count_retention(ctx["redis"], removed)
    return dict(removed)


async def remind(ctx: dict[str, Any]) -> int:
    """The arq cron around one reminder pass (``app.sending.reminders``)."""
    return await send_due_reminders(
        ctx["db"], ctx["mailer"], ctx["announcer"], ctx["redis"], ctx["settings"], ctx["pause"]
    )


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
    for part in ("publisher", "mailer"):
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
    cron_timeout = cron_timeout_seconds(settings.sending_lease_seconds)
    return {
        "functions": [
            func(tracked(send_invite), name=SEND_FUNCTION, timeout=send_timeout, max_tries=5),
            func(
                tracked(deliver_webhook),
                name=DELIVER_FUNCTION,
                timeout=lease_seconds(settings),
                max_tries=3,
            ),
        ],
        "cron_jobs": [
            cron(
                tracked(reconcile),
                second=set(range(0, 60, 2)),
                run_at_startup=True,
                timeout=cron_timeout,
            ),
            # Every hour at minute 30; chunks done stay done.
            cron(
                tracked(purge_ended),
                minute={30},
                second={30},
                timeout=cron_timeout,
            ),
            # A reminder is never urgent: every ten seconds, on seconds the sweep leaves free.
            cron(
                tracked(remind),
                second=set(range(1, 60, 10)),
                run_at_startup=True,
                timeout=cron_timeout,
            ),
        ],
        "on_startup": startup,
        "on_shutdown": shutdown,
        "redis_settings": redis_settings(settings.redis_url),
        # A graceful stop lets in-flight sends finish; what is left is put back safely.
        "job_completion_wait": max(1, round(settings.worker_grace_seconds)),
        # A short poll keeps accepted→enviado low without a backlog; many concurrent jobs make
        # the group commits of claims and verdicts large. SMTP connections are capped
        # separately (SMTP_URL ?pool=).
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
