"""Group commit and pipelined enqueues: faster, and every guarantee of one-by-one kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from arq.connections import ArqRedis
from arq.jobs import Job
from sqlalchemy import Connection, event, text
from sqlalchemy.exc import IntegrityError

from app.batching import Batcher, Groups
from app.clock import utcnow
from app.config import Settings
from app.db import Database
from app.queue import SEND_FUNCTION, enqueue_attempts, job_id_for
from app.records import OutboxEntry
from app.transitions import claim_with_link, create_invite


def count_commits(db: Database) -> list[int]:
    """Every commit of ``db``'s writers: the group commit's own engine on SQLite too."""
    commits: list[int] = []
    lane = db.write_lane
    for engine in (db.writer.sync_engine, lane.engine if lane else None):
        if engine is not None:
            event.listen(engine, "commit", lambda _conn: commits.append(1))
    return commits


async def test_concurrent_invites_share_commits_and_each_is_durable_when_it_returns(
    db: Database, settings: Settings
) -> None:
    commits = count_commits(db)
    other = Database(settings.database_url)  # another pool: sees only what is committed

    async def create_and_look(n: int) -> int:
        change = await create_invite(
            db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id=f"c{n}"
        )
        # Another connection must already see the row, its event and its outbox entry.
        async with other.read() as conn:
            seen = await conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM invites WHERE id = :id)"
                    " + (SELECT count(*) FROM invite_events WHERE invite_id = :id)"
                    " + (SELECT count(*) FROM outbox WHERE invite_id = :id)"
                ),
                {"id": change.invite.id},
            )
            return int(seen.scalar_one())

    try:
        seen = await asyncio.gather(*(create_and_look(n) for n in range(30)))
    finally:
        await other.dispose()

    assert seen == [3] * 30
    assert 1 <= len(commits) < 30


async def test_a_failing_caller_fails_alone_not_its_batch(db: Database) -> None:
    def broken(conn: Connection, arguments: Sequence[None]) -> list[None]:
        conn.execute(text("INSERT INTO invites (id) VALUES (NULL)"))  # NOT NULL columns
        return [None] * len(arguments)

    async def good(n: int) -> Any:
        return await create_invite(
            db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id=f"c{n}"
        )

    results = await asyncio.gather(
        *(good(n) for n in range(5)), db.write_many(broken, None), *(good(n) for n in range(5, 10)),
        return_exceptions=True,
    )  # fmt: skip

    assert isinstance(results[5], IntegrityError)
    assert all(not isinstance(r, BaseException) for i, r in enumerate(results) if i != 5)


def an_entry(outbox_id: int, due_in: float = 0.0) -> OutboxEntry:
    return OutboxEntry(
        id=outbox_id,
        invite_id=outbox_id,
        public_id=f"convite{outbox_id}",
        attempt=1,
        available_at=utcnow() + timedelta(seconds=due_in),
        correlation_id="corr",
    )


@pytest.fixture
async def arq_redis(settings: Settings) -> Any:
    redis = ArqRedis.from_url(settings.redis_url)
    yield redis
    await redis.aclose()


async def test_pipelined_enqueue_writes_what_arq_enqueue_job_writes(arq_redis: ArqRedis) -> None:
    ours, theirs = an_entry(1, due_in=60), an_entry(2, due_in=60)

    [job_id] = await enqueue_attempts(arq_redis, [ours])
    await arq_redis.enqueue_job(
        SEND_FUNCTION, theirs.public_id, theirs.attempt, theirs.correlation_id,
        _job_id=job_id_for(theirs), _defer_until=theirs.available_at,
    )  # fmt: skip

    mine, arqs = Job(str(job_id), arq_redis), Job(job_id_for(theirs), arq_redis)
    info, expected = await mine.info(), await arqs.info()
    assert info is not None and expected is not None
    assert (info.function, info.args, info.kwargs, info.job_try) == (
        expected.function, (ours.public_id, 1, "corr"), expected.kwargs, expected.job_try,
    )  # fmt: skip
    assert abs(info.score - expected.score) < 1000  # type: ignore[operator]
    ttl, expected_ttl = (
        await arq_redis.pttl(f"arq:job:{job_id}"),
        await arq_redis.pttl(f"arq:job:{job_id_for(theirs)}"),
    )
    assert abs(ttl - expected_ttl) < 1000


async def test_pipelined_enqueue_refuses_an_id_whose_result_is_kept_like_arq(
    arq_redis: ArqRedis,
) -> None:
    entry = an_entry(3)
    await arq_redis.set(f"arq:result:{job_id_for(entry)}", b"kept result of an earlier run")

    [outcome] = await enqueue_attempts(arq_redis, [entry])

    # arq says "complete": the id comes back (as after a relay/fast-path race), nothing queued.
    assert outcome == job_id_for(entry)
    assert await arq_redis.zcard("arq:queue") == 0
    assert not await arq_redis.exists(f"arq:job:{job_id_for(entry)}")


async def test_a_second_writer_gets_its_turn_while_another_writes_nonstop(
    settings: Settings,
) -> None:
    # Two Database objects on one file behave like two processes (web and worker).
    busy, other = Database(settings.database_url), Database(settings.database_url)
    stop = asyncio.Event()

    async def write_nonstop() -> None:
        while not stop.is_set():
            async with busy.write() as conn:
                await conn.execute(text("UPDATE outbox SET job_id = NULL WHERE id = -1"))
                await asyncio.sleep(0.02)

    writer = asyncio.create_task(write_nonstop())
    try:
        await asyncio.sleep(0.2)
        began = asyncio.get_running_loop().time()
        async with other.write() as conn:
            await conn.execute(text("UPDATE outbox SET job_id = NULL WHERE id = -2"))
        waited = asyncio.get_running_loop().time() - began
    finally:
        stop.set()
        await writer
        await busy.dispose()
        await other.dispose()

    assert waited < 0.3  # one or two of the busy writer's turns, not its whole run


async def test_a_claim_asked_twice_in_one_batch_is_won_once(db: Database) -> None:
    created = [
        await create_invite(
            db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id=f"c{n}"
        )
        for n in range(3)
    ]
    ids = [change.invite.public_id for change in created]

    claims = await asyncio.gather(
        *(claim_with_link(db, public_id, 1, 60) for public_id in [*ids, ids[0], ids[0]])
    )

    assert [claim is not None for claim in claims] == [True, True, True, False, False]
    assert {claim.change.invite.public_id for claim in claims if claim} == set(ids)


async def test_callers_arriving_while_the_write_turn_is_busy_share_the_next_commit(
    db: Database, settings: Settings
) -> None:
    if not db.is_sqlite:
        pytest.skip("write turns are SQLite's: PostgreSQL has many writers")
    # Another process (here: another Database on the same file) holds the write turn.
    other = Database(settings.database_url)
    commits = count_commits(db)
    released = asyncio.Event()

    async def hold_the_turn() -> None:
        assert other._turns is not None
        async with other._turns.turn():
            await released.wait()

    holder = asyncio.create_task(hold_the_turn())
    await asyncio.sleep(0.05)
    try:
        first = asyncio.create_task(
            create_invite(db, sender_id="s", email="p0@exemplo.com", name=None, correlation_id="c")
        )
        await asyncio.sleep(0.05)  # the first caller's batch is waiting for the turn by now
        later = [
            asyncio.create_task(
                create_invite(
                    db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id="c"
                )
            )
            for n in range(1, 10)
        ]
        await asyncio.sleep(0.05)
        released.set()
        created = await asyncio.gather(first, *later)
    finally:
        released.set()
        await holder
        await other.dispose()

    assert len({change.invite.id for change in created}) == 10
    # One commit for all ten: the batch was formed when the turn came, not before it.
    assert len(commits) == 1


async def test_callers_whose_batch_gets_no_write_turn_get_the_error_instead_of_waiting() -> None:
    @asynccontextmanager
    async def no_turn() -> AsyncIterator[None]:
        raise TimeoutError("no turn at the database write lock")
        yield

    async def run_groups(groups: Groups) -> list[Sequence[Any]]:
        return [[None] * len(arguments) for _, arguments in groups]

    batcher: Batcher[Any] = Batcher(
        None, isolate_failures=True, run_groups=run_groups, hold=no_turn
    )

    outcomes = await asyncio.wait_for(
        asyncio.gather(*(batcher.submit("op", n) for n in range(3)), return_exceptions=True), 5
    )

    assert [type(outcome) for outcome in outcomes] == [TimeoutError] * 3
