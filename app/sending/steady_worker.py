"""``python -m app worker``: an arq worker that rides out Redis outages of any length.

arq's own loop ends at the first ``ConnectionError`` from its poll, so a Redis restart (which
happens in every real deployment) stops a plain ``arq app.sending.worker.WorkerSettings`` for good.
This
worker instead:

- waits for Redis at start-up, however long it takes, also when Redis goes away again in the
  middle of starting;
- when Redis goes away, stops polling, logs once (``redis unavailable``), pings with a
  growing delay (``FIRST_DELAY_SECONDS`` doubling up to ``MAX_DELAY_SECONDS``), logs once more
  when it is back (``redis available again``, with the outage's length), and resumes polling,
  its heartbeat and its cron sweep (which re-enqueues from the database whatever the outage
  lost);
- stops cleanly (exit 0) on SIGTERM/SIGINT even while Redis is down;
- picks no job while the team has paused sending (``app.sending.pause``).

Nothing accepted meanwhile is lost: the database is the truth, the outbox relay and the sweep
enqueue what Redis never saw or forgot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from arq.connections import RedisSettings, create_pool
from arq.worker import Worker, get_kwargs
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.exceptions import WatchError

from app.sending.job_claims import Finish, Finishes, claim_many

log = logging.getLogger("app.sending.worker")

#: What "Redis is not there" looks like from redis-py and the socket below it. redis-py turns a
#: connection lost while arq WATCHes a job's key into a ``WatchError`` ("A ConnectionError
#: occurred on while watching…"); arq catches the real conflict one only at ``execute()``.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    WatchError,
    ConnectionError,
    OSError,
    asyncio.TimeoutError,
)
FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 5.0


class RedisOutage:
    """One outage at a time: logged when it starts and when it ends, never once per poll."""

    def __init__(self) -> None:
        self.down_since: float | None = None
        self.outages = 0

    def lost(self, exc: BaseException) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            self.outages += 1
            log.error(
                "redis unavailable; the worker waits for it and claims nothing meanwhile",
                extra={"error": repr(exc)},
            )

    def back(self) -> None:
        if self.down_since is not None:
            seconds = round(time.monotonic() - self.down_since, 1)
            self.down_since = None
            log.warning("redis available again; the worker resumes", extra={"seconds": seconds})

    async def wait_until_back(
        self, ping: Callable[[], Awaitable[Any]], meanwhile: Callable[[], None] = lambda: None
    ) -> None:
        """Ping with a growing delay until Redis answers; ``meanwhile()`` before each ping."""
        delay = FIRST_DELAY_SECONDS
        while True:
            await asyncio.sleep(delay)
            meanwhile()
            try:
                await ping()
            except OUTAGE_ERRORS as exc:
                self.lost(exc)
                delay = min(delay * 2, MAX_DELAY_SECONDS)
                continue
            self.back()
            return


class SteadyWorker(Worker):
    """arq's ``Worker``, with every Redis outage waited out instead of ending the process."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.outage = RedisOutage()
        self.paused = False
        self.stopping = False
        # We retry ourselves, forever and quietly; arq's start-up retries would give up.
        self.redis_settings = dataclasses.replace(
            self.redis_settings or RedisSettings(), conn_retries=0
        )
        # Until the app's start-up begins, an outage (between the connection and arq's INFO) is
        # waited out and the start tried again; from then on the poll handles outages.
        self.starting_app = False
        self._app_startup = self.on_startup
        self.on_startup = self._start_app
        # Jobs finishing together end in one MULTI (each awaits its own: nothing to close).
        self._finishes = Finishes(lambda: self.pool, self.queue_name)

    async def _start_app(self, ctx: dict[str, Any]) -> None:
        self.starting_app = True
        if self._app_startup is not None:
            await self._app_startup(ctx)

    async def _connect(self) -> Any:
        return await create_pool(
            self.redis_settings,
            job_deserializer=self.job_deserializer,
            job_serializer=self.job_serializer,
            default_queue_name=self.queue_name,
            expires_extra_ms=self.expires_extra_ms,
        )

    async def main(self) -> None:
        delay = FIRST_DELAY_SECONDS
        while True:
            while self._pool is None:
                try:
                    self._pool = await self._connect()
                except OUTAGE_ERRORS as exc:
                    self.outage.lost(exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, MAX_DELAY_SECONDS)
            self.outage.back()
            try:
                await super().main()
                return
            except OUTAGE_ERRORS as exc:
                if self.starting_app:
                    raise
                # Lost again before the app's start-up (arq's INFO): wait as for any outage,
                # the delay still growing if Redis keeps coming and going.
                self.outage.lost(exc)
                await self._pool.aclose()
                self._pool = None
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_DELAY_SECONDS)

    def handle_sig_wait_for_completion(self, signum: Any) -> None:
        self.stopping = True  # from now on, never pick jobs again (even after a resume)
        super().handle_sig_wait_for_completion(signum)

    async def _follow_pause(self) -> None:
        """Claim nothing while the team has paused sending (``app.sending.pause``)."""
        flag = self.ctx.get("pause")
        if flag is None or self.stopping:
            return
        try:
            paused = await flag() is not None
        except Exception:  # the database is unreachable: claims would fail anyway
            return
        if paused != self.paused:
            self.paused = paused
            log.warning("sending paused by the team" if paused else "sending resumed")
        self.allow_pick_jobs = not paused

    async def _poll_iteration(self) -> None:
        await self._follow_pause()
        try:
            await super()._poll_iteration()
        except OUTAGE_ERRORS as exc:
            self.outage.lost(exc)
            await self.outage.wait_until_back(self.pool.ping, self._forget_finished)

    def _forget_finished(self) -> None:
        """Drop finished job tasks, as arq's poll would: a SIGTERM during an outage waits for
        ``self.tasks`` to empty, and only the poll (stuck waiting for Redis) emptied it."""
        for job_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[job_id]
                if not task.cancelled() and task.exception() is not None:
                    log.warning("job ended with an error", extra={"error": repr(task.exception())})

    async def start_jobs(self, job_ids: Sequence[bytes]) -> None:
        """Start this poll's jobs with one claim for all of them (``app.sending.job_claims``), where
        arq's own ``start_jobs`` takes four round trips for each."""
        chosen: list[str] = []
        for job_id in job_ids:
            if self.job_counter >= self.max_jobs:
                break
            await self.sem.acquire()  # free: arq's semaphore has a slot more than max_jobs
            self.job_counter += 1
            chosen.append(job_id.decode())
        if not chosen:
            return
        try:
            scores = await claim_many(
                self.pool, self.queue_name, chosen, int(self.in_progress_timeout_s * 1000)
            )
        except BaseException:
            # Counted before the call: give every slot back, or each outage would leak them.
            for _ in chosen:
                self._release_sem_dec_counter_on_complete()
            raise
        for claimed, score in zip(chosen, scores, strict=True):
            if score is None:  # running elsewhere, done, or deferred again: as arq skips it
                self._release_sem_dec_counter_on_complete()
                continue
            task = self.loop.create_task(self.run_job(claimed, score))
            task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[claimed] = task

    async def finish_job(
        self,
        job_id: str,
        finish: bool,
        result_data: bytes | None,
        result_timeout_s: float | None,
        keep_result_forever: bool,
        incr_score: int | None,
        keep_in_progress: float | None,
    ) -> None:
        """arq's ``finish_job``, in one ``MULTI`` with the other jobs finishing meanwhile."""
        await self._finishes.finish(
            Finish(
                job_id,
                finish,
                result_data,
                result_timeout_s,
                keep_result_forever,
                incr_score,
                keep_in_progress,
            )
        )

    async def close(self) -> None:
        # arq's close() gathers every job task and lets a CancelledError out: a job started in
        # the same moment as the SIGTERM ("1 ongoing to cancel") made the worker exit 1. Wait
        # for them here, cancelled or not, and leave arq nothing to trip on.
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self._forget_finished()
        try:
            await super().close()
        except OUTAGE_ERRORS as exc:
            # Stopping while Redis is down: arq's own clean-up needs Redis; ours does not.
            log.warning("redis unavailable while stopping", extra={"error": repr(exc)})
            if self.on_shutdown:
                await self.on_shutdown(self.ctx)
            if self._pool is not None:
                await self._pool.close(close_connection_pool=True)
                self._pool = None


def use_uvloop() -> None:
    """uvloop's event loop, as uvicorn's web uses (``--loop auto``): the worker spends most of its
    time in socket hand-offs to Redis, SMTP and SQLite's thread, which uvloop does in C
    (docs/benchmarks.md, change log). arq takes whatever loop the policy makes."""
    try:
        import uvloop
    except ImportError:  # uvicorn[standard] brings it; plain asyncio works the same, slower
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def run() -> int:
    """Run a steady worker with the environment's settings until SIGTERM or SIGINT."""
    from app.sending.worker import _worker_settings_class

    use_uvloop()
    worker = SteadyWorker(**get_kwargs(_worker_settings_class()))
    worker.run()
    return 0
