"""A running worker process rides out a 10 s Redis outage: it stays up, logs the outage once,
and sends what was accepted meanwhile once Redis is back (restarted without persistence)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from arq.worker import Worker
from redis.asyncio import Redis

from app.config import Settings
from app.invites.status import Status
from app.sending.heartbeat import WORKERS, alive
from app.sending.supervise import Supervisor
from app.sending.worker import redis_settings, shutdown, startup, worker_options
from app.storage.database import Database
from tests.fixtures import process_env, short_lease_settings
from tests.helpers import client_for, post_invite, wait_for_status
from tests.services import AppProcess, RedisServer, ScriptedSmtp, free_port
from tests.waiting import eventually

OUTAGE_SECONDS = 10


@pytest.fixture
def outage_settings(tmp_path: Path, own_redis: RedisServer, smtp: ScriptedSmtp) -> Settings:
    return short_lease_settings(tmp_path, own_redis.url, smtp.port)


async def test_a_worker_rides_out_a_redis_outage_and_sends_what_came_meanwhile(
    tmp_path: Path, own_redis: RedisServer, smtp: ScriptedSmtp, outage_settings: Settings
) -> None:
    settings = outage_settings
    db = Database(settings.database_url)
    worker = AppProcess.worker(process_env(settings), tmp_path / "worker.log")
    try:
        with worker:
            worker.wait_for_log('"worker started"', timeout=60)
            async with client_for(settings, smtp=smtp) as browser:
                before = await post_invite(browser, "antes@exemplo.com")
                await wait_for_status(db, before["id"], Status.ENVIADO, timeout=30)

                own_redis.stop()
                during = [await post_invite(browser, f"durante{i}@exemplo.com") for i in range(3)]
                outage_ends = time.monotonic() + OUTAGE_SECONDS
                while time.monotonic() < outage_ends:
                    assert worker.process is not None and worker.process.poll() is None, (
                        worker.describe()
                    )
                    await asyncio.sleep(0.2)
                own_redis.start()  # empty: nothing persisted

                for invite in during:
                    await wait_for_status(db, invite["id"], Status.ENVIADO, timeout=60)
            redis = Redis.from_url(own_redis.url)
            try:

                async def beating() -> bool:
                    return bool(await alive(redis, WORKERS, settings.worker_heartbeat_seconds))

                await eventually(beating, 30, "the worker's heartbeat after the outage")
            finally:
                await redis.aclose()
            assert worker.stop() == 0, worker.describe()
        log = worker.log()
        assert log.count("redis unavailable") == 1, worker.describe()
        assert log.count("redis available again") == 1, worker.describe()
        assert log.count("heartbeat failed") <= 1, worker.describe()
        assert sorted(m.rcpt_tos[0] for m in smtp.received) == sorted(
            ["antes@exemplo.com"] + [f"durante{i}@exemplo.com" for i in range(3)]
        )
    finally:
        await db.dispose()


async def test_a_worker_started_while_redis_is_down_waits_for_it(
    tmp_path: Path, own_redis: RedisServer, smtp: ScriptedSmtp, outage_settings: Settings
) -> None:
    settings = outage_settings
    own_redis.stop()
    worker = AppProcess.worker(process_env(settings), tmp_path / "worker.log")
    with worker:
        worker.wait_for_log("redis unavailable", timeout=60)
        time.sleep(3)
        assert worker.process is not None and worker.process.poll() is None, worker.describe()
        own_redis.start()
        worker.wait_for_log('"worker started"', timeout=60)
        assert worker.stop() == 0, worker.describe()
    assert worker.log().count("redis unavailable") == 1, worker.describe()


@pytest.fixture
def patient_settings(tmp_path: Path, own_redis: RedisServer, smtp: ScriptedSmtp) -> Settings:
    """A stalled send outlasts the time it takes to notice the outage (redis-py retries first):
    not the short SMTP timeout of the other process tests."""
    return short_lease_settings(
        tmp_path,
        own_redis.url,
        smtp.port,
        SENDING_LEASE_SECONDS=60,
        SMTP_URL=f"smtp://127.0.0.1:{smtp.port}?timeout=30",
    )


async def test_a_worker_stopped_during_an_outage_exits_cleanly_and_soon(
    tmp_path: Path, own_redis: RedisServer, smtp: ScriptedSmtp, patient_settings: Settings
) -> None:
    settings = patient_settings
    db = Database(settings.database_url)
    # A long grace: the stop must not wait for it when nothing is being sent.
    env = process_env(settings, WORKER_GRACE_SECONDS="60")
    worker = AppProcess.worker(env, tmp_path / "worker.log")
    try:
        with worker:
            worker.wait_for_log('"worker started"', timeout=60)
            async with client_for(settings, smtp=smtp) as browser:
                smtp.stall(at="rcpt")  # a send in flight when Redis goes away
                created = await post_invite(browser, "durante@exemplo.com")
                await wait_for_status(db, created["id"], Status.ENVIANDO, timeout=30)
                own_redis.stop()
                worker.wait_for_log("redis unavailable", timeout=30)
                smtp.stall(False)  # the send ends; arq cannot record the job's end in Redis
                await wait_for_status(db, created["id"], Status.ENVIADO, timeout=30)
            await asyncio.sleep(1)
            # Well inside the grace: a stop that waited it out would raise here.
            assert worker.stop(timeout=30) == 0, worker.describe()
    finally:
        await db.dispose()


async def test_stopping_just_as_a_job_started_exits_cleanly(settings: Settings) -> None:
    """SIGTERM in the moment a poll starts a job: arq cancels that job's task ("1 ongoing to
    cancel") and its close() then lets the CancelledError out before its own clean-up; the
    supervisor finishes the clean-up instead of exiting 1."""
    options = worker_options(settings)
    worker = Worker(**options, handle_signals=False)
    running = asyncio.create_task(worker.async_run())
    await eventually(lambda: _now("worker_id" in worker.ctx), 30, "the start-up")
    started = asyncio.create_task(asyncio.sleep(30))  # a job's task, not yet in our code
    worker.tasks["convite:x:1:1"] = started

    worker.handle_sig(signal.SIGTERM)  # what arq's handler ends with: cancel what still runs
    with contextlib.suppress(asyncio.CancelledError):
        await running
    await Supervisor(options, settings.redis_url).close(worker)  # must not raise

    assert started.cancelled()
    redis = Redis.from_url(settings.redis_url)
    try:  # the app's own shutdown ran: the heartbeat is withdrawn
        assert not await _beats(redis, str(worker.ctx["worker_id"]))
    finally:
        await redis.aclose()


async def _heartbeat_of(redis_url: str, worker_id: str, timeout: float) -> None:
    redis = Redis.from_url(redis_url)
    try:
        await eventually(
            lambda: _beats(redis, worker_id), timeout, f"a heartbeat of {worker_id} in Redis"
        )
    finally:
        await redis.aclose()


async def _now(value: bool) -> bool:
    return value


async def _beats(redis: Redis, worker_id: str) -> bool:
    return worker_id in await alive(redis, WORKERS, 1)


async def test_the_first_heartbeat_failing_does_not_end_the_start_up(
    own_redis: RedisServer, outage_settings: Settings
) -> None:
    """Redis gone between arq's connection and the app's start-up: the start-up goes on (a chaos
    run saw a worker exit 1 here) and the heartbeat comes once Redis is back."""
    ctx: dict[str, object] = {"settings": outage_settings, "redis": Redis.from_url(own_redis.url)}
    own_redis.stop()
    try:
        await startup(ctx)  # must not raise
        own_redis.start()
        await _heartbeat_of(own_redis.url, str(ctx["worker_id"]), 20)
    finally:
        await shutdown(ctx)
        await ctx["redis"].aclose()  # type: ignore[attr-defined]


async def test_redis_gone_before_the_worker_connected_is_an_outage_not_a_crash(
    outage_settings: Settings,
) -> None:
    """Redis answered the supervisor's ping but was gone when arq's worker connected: the
    worker never had a pool to close (a chaos round saw the supervisor crash on it)."""
    options = worker_options(outage_settings)
    options["redis_settings"] = redis_settings(f"redis://127.0.0.1:{free_port()}/0")  # no one
    supervisor = Supervisor(options, outage_settings.redis_url)
    worker = Worker(**options, handle_signals=False)
    await supervisor._run_one(worker)  # must not raise
    assert supervisor.down_since is not None and worker.pool is None


async def test_a_worker_that_loses_redis_while_starting_waits_and_then_sends(
    own_redis: RedisServer, smtp: ScriptedSmtp, outage_settings: Settings
) -> None:
    """Redis goes away right after the worker connected (before the app's start-up): the
    supervisor waits it out as any outage, then a new worker starts and sends."""
    settings = outage_settings
    options = worker_options(settings)
    starts = 0

    async def loses_redis_on_the_first_start(ctx: dict[str, Any]) -> None:
        nonlocal starts
        starts += 1
        if starts == 1:
            own_redis.stop()
        await startup(ctx)

    options["on_startup"] = loses_redis_on_the_first_start
    supervisor = Supervisor(options, settings.redis_url)
    running = asyncio.create_task(supervisor.run())
    db = Database(settings.database_url)
    try:
        await eventually(lambda: _now(supervisor.down_since is not None), 60, "the outage")
        await asyncio.to_thread(own_redis.start)
        await eventually(lambda: _now(starts == 2 or running.done()), 60, "a second start")
        assert not running.done(), running.exception()
        async with client_for(settings, smtp=smtp) as browser:
            created = await post_invite(browser, "depois@exemplo.com")
            await wait_for_status(db, created["id"], Status.ENVIADO, timeout=30)
    finally:
        supervisor.stop()
        await asyncio.wait_for(running, 60)
        await db.dispose()
