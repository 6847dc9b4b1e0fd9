"""``python -m app worker``: stock arq workers, one after another, across Redis outages.

arq's worker ends at the first Redis error its poll cannot retry, and arq's answer is that a
supervisor starts it again. This module is that supervisor, in the same process, composed from
arq's public API only (``Worker``, ``async_run``, ``handle_sig_wait_for_completion``,
``allow_pick_jobs``, ``close``) and redis-py's own retry settings:

- short blips never reach arq: every Redis command is retried by redis-py
  (``redis_settings``);
- a longer outage ends the worker: its sends already handed to the SMTP server finish and record
  their verdict in the database (they only need the database), ``redis unavailable`` is logged
  once, Redis is pinged with a growing delay, ``redis available again`` is logged once, and a
  new stock worker starts (its start-up sweep re-enqueues from the database whatever Redis lost);
- a worker picks no job while the team has paused sending (``app.sending.pause``);
- SIGTERM or SIGINT stops it cleanly (exit 0), also in the middle of an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from arq.worker import Worker
from redis.asyncio import Redis

from app import clock
from app.config import Settings, load_settings
from app.logs import configure_logging
from app.sending.queue import OUTAGE_ERRORS
from app.sending.worker import process_worker_options

log = logging.getLogger(__name__)

FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 5.0
#: How often a running worker looks at the team's pause switch (the flag itself is cached).
PAUSE_CHECK_SECONDS = 0.5


class Supervisor:
    """Runs stock arq workers one after another until a stop is asked for."""

    def __init__(self, options: dict[str, Any], redis_url: str) -> None:
        self.options = options
        self.redis_url = redis_url
        self.stopping = asyncio.Event()
        self.worker: Worker | None = None
        self.down_since: float | None = None

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop picking jobs, let the running ones finish (arq's grace), then return."""
        self.stopping.set()
        if self.worker is not None:
            self.worker.handle_sig_wait_for_completion(signal.Signals(signum))

    async def run(self) -> None:
        while not self.stopping.is_set():
            if not await self._wait_for_redis():
                return
            # Each worker gets a ctx of its own: the clients a dead one's start-up made are
            # closed by then.
            ctx = dict(self.options.get("ctx") or {})
            options = {**self.options, "ctx": ctx}
            worker = self.worker = Worker(**options, handle_signals=False)
            try:
                await self._run_one(worker)
            finally:
                self.worker = None

    async def _run_one(self, worker: Worker) -> None:
        pause = asyncio.create_task(self._follow_pause(worker))
        try:
            await worker.async_run()
        except asyncio.CancelledError:
            # arq's stop cancels its main task; our own task is cancelled only from outside.
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
        except OUTAGE_ERRORS as exc:
            self._lost(exc)
            await self._after_outage(worker)
            return
        finally:
            pause.cancel()
        await self.close(worker)

    async def close(self, worker: Worker) -> None:
        """arq's ``close``, finished by hand where arq's stops half-way."""
        # A job that arq's stop cancelled is still putting its row back safely (released, or
        # incerto once bytes left); arq's close() would cancel it again and close its database.
        await _jobs_done(worker)
        try:
            await worker.close()
        except asyncio.CancelledError:
            # arq's close() gathers the job tasks and lets out the cancellation of a job that
            # started in the same moment as the stop, before its own clean-up; do that here.
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            await self._shut_down(worker)
        except OUTAGE_ERRORS as exc:
            log.warning("redis unavailable while stopping", extra={"error": repr(exc)})
            await self._shut_down(worker)

    async def _shut_down(self, worker: Worker) -> None:
        on_shutdown = self.options.get("on_shutdown")
        if on_shutdown is not None:
            await on_shutdown(worker.ctx)
        # arq's pool is None when Redis went away before the worker had connected.
        if worker.pool is None:
            return
        with contextlib.suppress(*OUTAGE_ERRORS):
            await worker.pool.aclose(close_connection_pool=True)

    async def _after_outage(self, worker: Worker) -> None:
        """The sends this worker started only need the database: let them finish and record
        their verdict before its clients are closed."""
        await _jobs_done(worker)
        await self._shut_down(worker)

    async def _wait_for_redis(self) -> bool:
        """Ping with a growing delay until Redis answers (``True``) or a stop is asked for."""
        delay = FIRST_DELAY_SECONDS
        redis = Redis.from_url(self.redis_url, socket_connect_timeout=1, socket_timeout=5)
        try:
            while not self.stopping.is_set():
                try:
                    await redis.ping()
                except OUTAGE_ERRORS as exc:
                    self._lost(exc)
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self.stopping.wait(), delay)
                    delay = min(delay * 2, MAX_DELAY_SECONDS)
                    continue
                self._back()
                return True
            return False
        finally:
            await redis.aclose()

    def _lost(self, exc: BaseException) -> None:
        if self.down_since is None:
            self.down_since = clock.monotonic()
            log.error(
                "redis unavailable; the worker waits for it and claims nothing meanwhile",
                extra={"error": repr(exc)},
            )

    def _back(self) -> None:
        if self.down_since is not None:
            seconds = round(clock.monotonic() - self.down_since, 1)
            self.down_since = None
            log.warning("redis available again; the worker resumes", extra={"seconds": seconds})

    async def _follow_pause(self, worker: Worker) -> None:
        """Pick no job while the team has paused sending; the jobs wait in the queue."""
        paused = False
        while True:
            flag: Callable[[], Awaitable[object]] | None = worker.ctx.get("pause")
            if flag is not None and not self.stopping.is_set():
                try:
                    now_paused = await flag() is not None
                except Exception:  # the database is unreachable: claims would fail anyway
                    now_paused = paused
                if now_paused != paused:
                    paused = now_paused
                    log.warning("sending paused by the team" if paused else "sending resumed")
                if not self.stopping.is_set():
                    worker.allow_pick_jobs = not paused
            await asyncio.sleep(PAUSE_CHECK_SECONDS)


async def _jobs_done(worker: Worker) -> None:
    running = worker.ctx.get("running")
    if running is not None:
        await running.wait_idle()


def use_uvloop() -> None:
    """uvloop's event loop, as uvicorn's web uses (``--loop auto``); arq takes whatever loop
    the policy makes."""
    try:
        import uvloop
    except ImportError:  # uvicorn[standard] brings it; plain asyncio works the same, slower
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def supervise(settings: Settings) -> None:
    """Run workers with ``settings`` until SIGTERM or SIGINT."""
    supervisor = Supervisor(process_worker_options(settings), settings.redis_url)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, supervisor.stop, signum)
    await supervisor.run()


def run() -> int:
    """``python -m app worker``."""
    configure_logging("worker")
    use_uvloop()
    asyncio.run(supervise(load_settings()))
    return 0
