"""The lifecycle with real arq worker processes: outages, stopped workers, killed workers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from arq.worker import Worker

from app.config import Settings
from app.invites.status import Status
from app.sending.queue import send_timeout_seconds
from app.sending.worker import worker_options
from app.storage.database import Database
from app.storage.migrate import upgrade
from tests.fixtures import SENDER, app_client, make_settings, process_env, short_lease_settings
from tests.helpers import invite_row, post_invite, wait_for_status
from tests.services import AppProcess, RedisServer, ScriptedSmtp, free_port
from tests.waiting import eventually


def _held(smtp: ScriptedSmtp) -> Callable[[], Awaitable[bool]]:
    async def held() -> bool:
        return smtp.held == 1

    return held


async def test_invites_wait_while_no_worker_runs_and_each_is_sent_once_when_one_starts(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    created = [await post_invite(client, f"fila{i}@exemplo.com") for i in range(3)]
    for item in created:
        assert (await invite_row(db, item["id"])).status == Status.PENDENTE

    with AppProcess.worker(process_env(settings), tmp_path / "worker.log"):
        for item in created:
            await wait_for_status(db, item["id"], Status.ENVIADO)

    recipients = sorted(r for message in smtp.received for r in message.rcpt_tos)
    assert recipients == [f"fila{i}@exemplo.com" for i in range(3)]


@pytest.fixture
def stopped_redis(tmp_path: Path, smtp: ScriptedSmtp) -> Iterator[tuple[RedisServer, Settings]]:
    """A private redis-server that is not running yet, and settings that point at it."""
    own_redis = RedisServer(tmp_path, free_port())
    settings = make_settings(tmp_path, own_redis.url, smtp.port)
    upgrade(settings)
    yield own_redis, settings
    own_redis.stop()


async def test_redis_down_during_post_still_accepts_and_sends_once_redis_is_back(
    stopped_redis: tuple[RedisServer, Settings], smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    own_redis, settings = stopped_redis
    database = Database(settings.database_url)
    try:
        own_redis.start()  # signing in sends a link, through Redis and a worker
        async with app_client(settings, smtp, SENDER) as http:
            own_redis.stop()  # the session lives in the database: still signed in
            created = await post_invite(http, "sem-redis@exemplo.com")
        assert (await invite_row(database, created["id"])).status == Status.PENDENTE

        own_redis.start()
        with AppProcess.worker(process_env(settings), tmp_path / "worker.log"):
            await wait_for_status(database, created["id"], Status.ENVIADO)
        assert len(smtp.received) == 1
    finally:
        await database.dispose()


@pytest.fixture
def short_lease(
    tmp_path: Path, redis_server: RedisServer, smtp: ScriptedSmtp, redis: object
) -> Settings:
    return short_lease_settings(tmp_path, redis_server.url, smtp.port, WORKER_GRACE_SECONDS=1)


async def test_a_worker_killed_mid_send_leaves_the_invite_incerto_and_never_resends_it(
    short_lease: Settings, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    settings = short_lease
    database = Database(settings.database_url)
    try:
        async with app_client(settings, smtp, SENDER) as http:
            smtp.stall()
            worker = AppProcess.worker(process_env(settings), tmp_path / "w1.log").start()
            created = await post_invite(http, "morto@exemplo.com")
            await eventually(_held(smtp), what="the SMTP server holds the send in DATA")
            worker.kill()
        smtp.stall(False)  # the server got the whole message: it may well have left

        with AppProcess.worker(process_env(settings), tmp_path / "w2.log"):
            uncertain = await wait_for_status(database, created["id"], Status.INCERTO)
            await asyncio.sleep(3)
        assert "não conseguimos confirmar" in (uncertain.error or "")
        assert (await invite_row(database, created["id"])).status == Status.INCERTO
        assert smtp.data_started == 1, "an incerto invite is never sent again on its own"
    finally:
        await database.dispose()


@pytest.mark.parametrize(
    ("stall_at", "expected"), [("rcpt", Status.ENVIADO), ("data", Status.INCERTO)]
)
async def test_a_graceful_stop_never_leaves_an_invite_enviando(
    short_lease: Settings, smtp: ScriptedSmtp, tmp_path: Path, stall_at: str, expected: Status
) -> None:
    settings = short_lease
    database = Database(settings.database_url)
    try:
        async with app_client(settings, smtp, SENDER) as http:
            smtp.stall(at=stall_at)
            worker = AppProcess.worker(process_env(settings), tmp_path / "w1.log").start()
            created = await post_invite(http, "parado@exemplo.com")
            await wait_for_status(database, created["id"], Status.ENVIANDO)
            await eventually(_held(smtp), what=f"the SMTP server holds the send at {stall_at}")
            assert worker.stop(timeout=15) == 0
        stopped = await invite_row(database, created["id"])
        assert stopped.status != Status.ENVIANDO
        smtp.stall(False)

        # Stopped before the message was handed over: put back and sent by the next worker.
        # Stopped while it was being handed over: incerto, never re-sent on its own.
        with AppProcess.worker(process_env(settings), tmp_path / "w2.log"):
            await wait_for_status(database, created["id"], expected)
    finally:
        await database.dispose()


@pytest.mark.parametrize("settings_fixture", ["settings", "short_lease"])
def test_a_killed_workers_send_jobs_are_free_again_after_the_send_timeout(
    settings_fixture: str, request: pytest.FixtureRequest
) -> None:
    """arq locks every job it starts for its longest function's timeout (+10 s): that is how long
    a send job a killed worker held waits for another worker. No cron (the sweep, retention,
    reminders) may stretch it past the send job's own timeout, however short the lease."""
    settings: Settings = request.getfixturevalue(settings_fixture)
    worker = Worker(burst=True, handle_signals=False, **worker_options(settings))

    send_timeout = send_timeout_seconds(settings.sending_lease_seconds)
    assert worker.in_progress_timeout_s == send_timeout + 10
