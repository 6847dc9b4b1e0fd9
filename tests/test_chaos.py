"""Chaos: invites flow through the real processes while workers are SIGKILLed at random,
Redis is restarted without persistence and, on PostgreSQL, the database server is restarted.
Afterwards every accepted invite is terminal, none is ``enviado`` without a delivery at the SMTP
server, and no address got two mails.

The suite runs a bounded round (well under a minute); ``make chaos`` runs a long one through
the same test (``CHAOS_INVITES``, ``CHAOS_SECONDS``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import time
from pathlib import Path

import httpx
import pytest
from arq.worker import Worker
from sqlalchemy import select

from app.config import Settings
from app.invites.records import INVITE
from app.sending.worker import worker_options
from app.storage.database import Database
from app.storage.tables import invites
from tests.fixtures import SENDER, postgres, process_env, short_lease_settings
from tests.services import (
    AppProcess,
    PostgresServer,
    RedisServer,
    ScriptedSmtp,
    free_port,
    wait_for_port,
)
from tests.signing_in import sign_in
from tests.test_scale import _counts
from tests.waiting import eventually

INVITES = int(os.environ.get("CHAOS_INVITES", "300"))
CHAOS_SECONDS = float(os.environ.get("CHAOS_SECONDS", "15"))
WORKERS = 2
TERMINAL = {"enviado", "incerto", "falhou"}


@pytest.fixture
def chaos_settings(tmp_path: Path, own_redis: RedisServer, smtp: ScriptedSmtp) -> Settings:
    return short_lease_settings(
        tmp_path,
        own_redis.url,
        smtp.port,
        SENDS_PER_SENDER_PER_MINUTE=1_000_000,
        SENDS_PER_ADDRESS_PER_MINUTE=1_000_000,
        SENDS_PER_SENDER_PER_DAY=1_000_000,
        SENDER_SHARE_OF_HOUR_PERCENT=100,  # one sender is the whole load here
    )


class Chaos:
    """The real processes, and the harm done to them."""

    def __init__(
        self,
        settings: Settings,
        folder: Path,
        redis: RedisServer,
        database: PostgresServer | None,
    ) -> None:
        self.env = process_env(settings)
        self.folder = folder
        self.redis = redis
        self.database = database
        self.database_restarts = 0
        self.port = free_port()
        self.web = AppProcess.web(self.env, folder / "web.log", self.port)
        self.workers: list[AppProcess] = []
        self.started = 0
        self.kills = 0
        self.redis_restarts = 0
        self.random = random.Random(int(os.environ.get("CHAOS_SEED", "15")))

    def start_worker(self) -> AppProcess:
        self.started += 1
        worker = AppProcess.worker(self.env, self.folder / f"worker{self.started}.log").start()
        self.workers.append(worker)
        return worker

    def live_workers(self) -> list[AppProcess]:
        return [w for w in self.workers if w.process is not None and w.process.poll() is None]

    def kill_a_worker(self) -> None:
        """SIGKILL one live worker (mid-send or not, as it falls) and start one in its place,
        as a supervisor would. Workers that die by themselves are not replaced: they must ride
        out every Redis restart."""
        live = self.live_workers()
        if live:
            self.random.choice(live).kill()
            self.kills += 1
            self.start_worker()

    def restart_redis(self) -> None:
        self.redis.stop()
        time.sleep(self.random.uniform(0.2, 1.5))
        self.redis.start()  # empty: nothing was persisted
        self.redis_restarts += 1

    def restart_database(self) -> None:
        assert self.database is not None
        self.database.restart()
        self.database_restarts += 1

    async def run(self, seconds: float) -> None:
        """Harm at random intervals for ``seconds``: mostly killed workers, some Redis restarts,
        and on PostgreSQL a database restart halfway through."""
        started = time.monotonic()
        ends = started + seconds
        while time.monotonic() < ends:
            await asyncio.sleep(self.random.uniform(0.5, 2.0))
            halfway = time.monotonic() - started > seconds / 2
            if self.database is not None and not self.database_restarts and halfway:
                await asyncio.to_thread(self.restart_database)
                continue
            if self.random.random() < 0.25:
                await asyncio.to_thread(self.restart_redis)
            else:
                await asyncio.to_thread(self.kill_a_worker)

    def describe(self) -> str:
        return "\n".join(p.describe(2000) for p in [self.web, *self.workers])

    def stop(self) -> None:
        for process in [*self.workers, self.web]:
            process.kill()


async def post_paced(client: httpx.AsyncClient, count: int, seconds: float) -> list[str]:
    """``count`` invites spread over ``seconds``; each must be accepted (202), Redis or not. While
    the database restarts the web answers 503 and writes nothing; the client tries again, as a
    person (or a program) told "try again in a moment" would."""
    limits = asyncio.Semaphore(20)
    listed = await client.get("/convites", headers={"Accept": "application/json"})
    client.headers["X-CSRF-Token"] = listed.json()["csrf_token"]

    async def post(i: int) -> str:
        await asyncio.sleep(seconds * i / count)
        async with limits:
            email = f"caos{i}@exemplo.com"
            for _ in range(50):
                response = await client.post(
                    "/convites", json={"email": email}, headers={"Accept": "application/json"}
                )
                if response.status_code != 503:
                    break
                await asyncio.sleep(0.2)
            assert response.status_code == 202, response.text
            return email

    return await asyncio.gather(*(post(i) for i in range(count)))


@pytest.mark.long
async def test_chaos_loses_nothing_and_sends_nothing_twice(
    chaos_settings: Settings, smtp: ScriptedSmtp, own_redis: RedisServer, tmp_path: Path
) -> None:
    chaos = Chaos(chaos_settings, tmp_path, own_redis, postgres())
    db = Database(chaos_settings.database_url)
    try:
        chaos.web.start()
        for _ in range(WORKERS):
            chaos.start_worker()
        wait_for_port(chaos.port)
        url = f"http://127.0.0.1:{chaos.port}"
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            await sign_in(client, smtp, SENDER)  # before the chaos: the link mail goes out calmly
            posted, _ = await asyncio.gather(
                post_paced(client, INVITES, CHAOS_SECONDS * 0.8), chaos.run(CHAOS_SECONDS)
            )
        assert len(chaos.live_workers()) == WORKERS, "a worker died by itself"

        counts: dict[str, int] = {}

        async def terminal() -> bool:
            nonlocal counts
            counts = await _counts(db)
            return set(counts) <= TERMINAL

        # A worker killed after arq handed it a job, before the job claimed its row, leaves the
        # job locked for arq's in-progress timeout (the longest function's timeout + 10 s); only
        # then does another worker run it. The last kill may come at the chaos's very end.
        arq_lock = Worker(
            burst=True, handle_signals=False, **worker_options(chaos_settings)
        ).in_progress_timeout_s
        await eventually(terminal, arq_lock + CHAOS_SECONDS + 30, lambda: f"not terminal: {counts}")

        async with db.read() as conn:
            rows = (
                await conn.execute(
                    select(invites.c.email, invites.c.status).where(invites.c.kind == INVITE)
                )
            ).all()
        delivered = collections.Counter(r for m in smtp.received for r in m.rcpt_tos)
        sent = {email for email, status in rows if status == "enviado"}
        print(
            f"chaos: {chaos.kills} workers killed, {chaos.redis_restarts} Redis restarts, "
            f"{chaos.database_restarts} database restarts, {counts}"
        )
        assert sorted(email for email, _ in rows) == sorted(posted), "nothing lost"
        assert sent <= set(delivered), "enviado only with a delivery"
        assert not delivered or max(delivered.values()) == 1, "nobody got two mails"
        assert chaos.kills > 0 and chaos.redis_restarts > 0, "the chaos happened"
        assert chaos.database_restarts == (chaos.database is not None)
    except BaseException:
        print(chaos.describe())  # shown by pytest with the failure
        raise
    finally:
        chaos.stop()
        await db.dispose()
