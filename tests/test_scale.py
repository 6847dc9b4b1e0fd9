"""Many processes at once: two web servers, two workers, a thousand invites, a killed worker."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from app.config import Settings
from app.invites.records import INVITE
from app.storage.database import Database
from app.storage.tables import invites
from tests.fixtures import BACKEND, SENDER, process_env, short_lease_settings
from tests.services import AppProcess, RedisServer, ScriptedSmtp, free_port, wait_for_port
from tests.signing_in import sign_in
from tests.waiting import eventually

# Scale-out is PostgreSQL's job; on SQLite (one machine, one writer at a time) the same
# guarantees are checked with one web process and a smaller load.
INVITES = 1000 if BACKEND == "postgresql" else 300
WEB_PROCESSES = 2 if BACKEND == "postgresql" else 1


@pytest.fixture
def scale_settings(
    tmp_path: Path, redis_server: RedisServer, smtp: ScriptedSmtp, redis: object
) -> Settings:
    return short_lease_settings(
        tmp_path,
        redis_server.url,
        smtp.port,
        # A thousand invites from two browsers in seconds is the load, not abuse.
        SENDS_PER_SENDER_PER_MINUTE=10_000,
        SENDS_PER_ADDRESS_PER_MINUTE=10_000,
        SENDS_PER_SENDER_PER_DAY=10_000,
        SENDER_SHARE_OF_HOUR_PERCENT=100,  # one sender is the whole load here
    )


async def _counts(db: Database) -> dict[str, int]:
    """Invitations by status (the sender's sign-in link mail is not one)."""
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(invites.c.status, func.count())
                .where(invites.c.kind == INVITE)
                .group_by(invites.c.status)
            )
        ).all()
    return {status: count for status, count in rows}


async def _post_all(ports: list[int], smtp: ScriptedSmtp) -> None:
    limits = asyncio.Semaphore(50)
    clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) for port in ports]
    for client in clients:  # one sender, signed in on each web process
        await sign_in(client, smtp, SENDER)
        listed = await client.get("/convites", headers={"Accept": "application/json"})
        client.headers["X-CSRF-Token"] = listed.json()["csrf_token"]

    async def post(i: int) -> None:
        async with limits:
            response = await clients[i % len(clients)].post(
                "/convites",
                json={"email": f"n{i}@exemplo.com"},
                headers={"Accept": "application/json"},
            )
            assert response.status_code == 202, response.text

    try:
        await asyncio.gather(*(post(i) for i in range(INVITES)))
    finally:
        for client in clients:
            await client.aclose()


@pytest.mark.long
async def test_a_thousand_invites_through_two_webs_and_two_workers_one_killed_midway(
    scale_settings: Settings, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    settings = scale_settings
    env = process_env(settings)
    ports = [free_port() for _ in range(WEB_PROCESSES)]
    webs = [
        AppProcess.web(env, tmp_path / f"web{i}.log", port).start() for i, port in enumerate(ports)
    ]
    workers = [AppProcess.worker(env, tmp_path / f"worker{i}.log").start() for i in range(2)]
    db = Database(settings.database_url)
    try:
        for port in ports:
            wait_for_port(port)
        posting = asyncio.create_task(_post_all(ports, smtp))

        async def started() -> bool:
            return len(smtp.received) >= INVITES // 4

        await eventually(started, 60, "a quarter of the sends arrive")
        workers[0].kill()  # mid-run: some of its sends never finish
        await posting

        counts: dict[str, int] = {}

        async def settled() -> bool:
            nonlocal counts
            counts = await _counts(db)
            return counts.get("pendente", 0) + counts.get("enviando", 0) == 0

        await eventually(settled, 120, lambda: f"stuck: {counts}")

        per_recipient = collections.Counter(r for m in smtp.received for r in m.rcpt_tos)
        assert sum(counts.values()) == INVITES, "nothing lost"
        assert set(counts) <= {"enviado", "incerto"}, counts
        assert max(per_recipient.values()) == 1, "nothing sent twice"
        assert (
            counts["enviado"] <= len(per_recipient) <= counts["enviado"] + counts.get("incerto", 0)
        )
    except BaseException:
        for process in [*webs, *workers]:
            print(process.describe())  # shown by pytest with the failure
        raise
    finally:
        for process in [*workers, *webs]:
            process.kill()
        await db.dispose()
