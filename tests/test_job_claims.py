"""The steady worker's batched job plumbing (``app.sending.job_claims``) keeps arq's rules, on a
real
Redis: a job is claimed by one worker only, never while it runs elsewhere, never before its
time, never once it is done; and jobs finished together end exactly as arq ends each."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from arq import Retry
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.constants import in_progress_key_prefix, result_key_prefix
from arq.utils import timestamp_ms
from redis.asyncio import Redis

from app.sending.job_claims import claim_many
from app.sending.steady_worker import SteadyWorker
from tests.services import RedisServer

QUEUE = "test:claims"
IN_PROGRESS_MS = 60_000


def settings_of(server: RedisServer) -> RedisSettings:
    """arq's settings for the test Redis, with time to connect: six polls at once open new
    connections together, and on a loaded CI machine arq's default of 1 s ran out (a
    ``TimeoutError`` connecting, nothing to do with the claims under test)."""
    return dataclasses.replace(RedisSettings.from_dsn(server.url), conn_timeout=10)


@pytest.fixture
async def pool(redis: Redis, redis_server: RedisServer) -> AsyncIterator[ArqRedis]:
    arq = await create_pool(settings_of(redis_server), default_queue_name=QUEUE)
    yield arq
    await arq.aclose()


async def test_a_claim_takes_due_jobs_and_skips_running_deferred_and_done_ones(
    pool: ArqRedis,
) -> None:
    now = timestamp_ms()
    await pool.zadd(QUEUE, {"due": now - 10, "running": now - 10, "later": now + 60_000})
    await pool.set(in_progress_key_prefix + "running", b"1")
    claimed = await claim_many(pool, QUEUE, ["due", "running", "later", "done"], IN_PROGRESS_MS)
    assert claimed == [now - 10, None, None, None]
    # The winner holds the job for arq's in-progress timeout; nobody else got a key.
    assert 0 < await pool.pttl(in_progress_key_prefix + "due") <= IN_PROGRESS_MS
    assert not await pool.exists(in_progress_key_prefix + "later", in_progress_key_prefix + "done")
    # Claimed once: a second claim (another worker's poll) finds it running.
    assert await claim_many(pool, QUEUE, ["due"], IN_PROGRESS_MS) == [None]


async def test_two_workers_claiming_the_same_jobs_at_once_split_them(
    pool: ArqRedis, redis_server: RedisServer
) -> None:
    ids = [f"job{i}" for i in range(300)]
    await pool.zadd(QUEUE, {job_id: timestamp_ms() - 1 for job_id in ids})
    other = await create_pool(settings_of(redis_server))
    # Six polls at once, from two connections, each asking for every job (in its own order).
    polls = [(client, ids[i::3] + ids) for i in range(3) for client in (pool, other)]
    try:
        results = await asyncio.gather(
            *(claim_many(client, QUEUE, ask, IN_PROGRESS_MS) for client, ask in polls)
        )
    finally:
        await other.aclose()
    won = Counter(
        job_id
        for (_, ask), scores in zip(polls, results, strict=True)
        for job_id, score in zip(ask, scores, strict=True)
        if score is not None
    )
    assert set(won) == set(ids)
    assert set(won.values()) == {1}


RUNS: Counter[str] = Counter()


async def record(ctx: dict[str, Any], name: str) -> str:
    RUNS[name] += 1
    await asyncio.sleep(0.01)  # jobs overlap, so their finishes share a MULTI
    if name == "again" and ctx["job_try"] == 1:
        raise Retry(defer=0)  # arq's finish_job puts it back on the queue (ZINCRBY)
    return name.upper()


async def run_workers(redis_url: str, count: int) -> list[SteadyWorker]:
    workers = [
        SteadyWorker(
            functions=[record],
            queue_name=QUEUE,
            redis_settings=RedisSettings.from_dsn(redis_url),
            burst=True,
            handle_signals=False,
            poll_delay=0.01,
            max_jobs=40,
            keep_result=60,
        )
        for _ in range(count)
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*(w.async_run() for w in workers)), 60)
    finally:
        for worker in workers:
            await worker.close()
    return workers


@pytest.mark.parametrize("workers", [1, 2])
async def test_steady_workers_run_each_job_once_and_end_it_as_arq_does(
    pool: ArqRedis, redis_server: RedisServer, workers: int
) -> None:
    RUNS.clear()
    names = [f"convite{i}" for i in range(150)] + ["again"]
    jobs = [await pool.enqueue_job("record", name, _queue_name=QUEUE) for name in names]
    done = await run_workers(redis_server.url, workers)

    assert Counter({**dict.fromkeys(names, 1), "again": 2}) == RUNS
    assert sum(w.jobs_complete for w in done) == len(names)
    assert sum(w.jobs_retried for w in done) == 1
    assert all(w.job_counter == 0 for w in done)  # every slot given back
    # Ended as arq ends a job: off the queue, its keys gone, its result kept.
    assert await pool.zcard(QUEUE) == 0
    assert not await pool.keys(in_progress_key_prefix + "*")
    for job, name in zip(jobs, names, strict=True):
        assert job is not None
        assert await job.result(timeout=1) == name.upper()
        assert await pool.pttl(result_key_prefix + job.job_id) > 0
