"""GET /metrics: numbers read from the database and Redis at scrape time, so any web process
gives the same answer and they move as invites flow."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import httpx
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from app.config import Settings
from app.ops.metrics import ACCEPTED_TO_SENT, SEND_DURATION, SSE_KEY, Observations, SseConnections
from app.sending.heartbeat import WORKERS, beat
from tests.fixtures import drain, running_app
from tests.helpers import post_invite
from tests.services import ScriptedSmtp, free_port


async def scrape(client: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def test_metrics_move_as_invites_are_accepted_sent_and_refused(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, redis: Redis
) -> None:
    smtp.reply_next("250 OK", "550 5.1.1 No such user")
    await post_invite(client, "ana@exemplo.com")
    await post_invite(client, "ninguem@exemplo.com")
    await beat(redis, WORKERS, "worker-a")

    before = await scrape(client)
    await drain(settings)
    after = await scrape(client)

    assert value(before, "convites_invites_created_total") == 2
    assert value(before, "convites_queue_depth") == 2
    assert value(before, "convites_invites", status="pendente") == 2
    assert value(before, "convites_live_workers") == 1
    assert value(before, "convites_invites_sent_total") == 0
    assert value(after, "convites_queue_depth") == 0
    assert value(after, "convites_invites_sent_total") == 1
    assert value(after, "convites_send_attempts_total") == 2
    assert value(after, "convites_invites_failed_total", reason_class="permanent") == 1
    assert value(after, "convites_invites_failed_total", reason_class="transient_exhausted") == 0
    # Every SMTP send is timed, the sender's sign-in link mail (before) included.
    sends = value(after, "convites_send_duration_seconds_count")
    assert sends - value(before, "convites_send_duration_seconds_count") == 2
    assert value(after, "convites_send_duration_seconds_bucket", le="+Inf") == sends
    latency = "convites_accepted_to_sent_seconds_count"
    assert value(after, latency) - value(before, latency) == 1
    assert value(after, "convites_accepted_to_sent_seconds_sum") > 0
    assert value(after, "convites_dependency_up", store="redis") == 1


async def test_attempts_run_out_counts_as_transient_exhausted(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.always("421 4.7.0 Busy")
    await post_invite(client, "cheio@exemplo.com")
    await drain(settings)

    after = await scrape(client)

    assert value(after, "convites_invites_failed_total", reason_class="transient_exhausted") == 1
    assert value(after, "convites_invites_failed_total", reason_class="permanent") == 0
    assert value(after, "convites_send_attempts_total") == settings.max_attempts


async def test_two_web_processes_report_the_same_counters(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    await post_invite(client, "ana@exemplo.com")
    await drain(settings)

    async with running_app(settings) as other_app:
        transport = httpx.ASGITransport(app=other_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as other:
            theirs = await scrape(other)
    ours = await scrape(client)

    for name in ("convites_invites_created_total", "convites_invites_sent_total"):
        assert value(theirs, name) == value(ours, name) == 1
    name = "convites_send_duration_seconds_count"
    assert value(theirs, name) == value(ours, name) == 2  # the sign-in link, the invite


async def test_open_sse_connections_are_summed_over_live_web_processes(
    client: httpx.AsyncClient, redis: Redis
) -> None:
    first, second = SseConnections(), SseConnections()
    with first.track(), first.track(), second.track():
        await first.publish(redis)
        await second.publish(redis)
        # A web process that died an hour ago with connections open no longer counts.
        await redis.hset(SSE_KEY, "dead-process", f"7:{time.time() - 3600}")

        samples = await scrape(client)

    assert value(samples, "convites_sse_connections") == 3
    assert not await redis.hexists(SSE_KEY, "dead-process")


async def test_metrics_still_answer_when_redis_is_down(settings: Settings) -> None:
    down = replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    async with running_app(down) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            samples = await scrape(http)

    assert value(samples, "convites_dependency_up", store="redis") == 0
    assert value(samples, "convites_invites_created_total") == 0
    assert ("convites_queue_depth", ()) not in samples


async def test_concurrent_observations_are_each_counted(
    redis: Redis,
) -> None:
    await redis.delete(SEND_DURATION.key, ACCEPTED_TO_SENT.key)
    observations = Observations(redis)
    sends = [0.01 * i for i in range(60)]  # buckets 0.05, 0.1, 0.25, 0.5 and 1
    latencies = [0.2] * 25
    await asyncio.gather(
        *(observations.observe((SEND_DURATION, v)) for v in sends[25:]),
        *(
            observations.observe((SEND_DURATION, took), (ACCEPTED_TO_SENT, latency))
            for took, latency in zip(sends[:25], latencies, strict=True)
        ),
    )
    buckets, total = await SEND_DURATION.read(redis)
    assert dict(buckets)["0.05"] == 6 and dict(buckets)["0.1"] == 11 and dict(buckets)["+Inf"] == 60
    assert abs(total - sum(sends)) < 1e-9
    assert int(await redis.hget(SEND_DURATION.key, "count")) == 60
    buckets, total = await ACCEPTED_TO_SENT.read(redis)
    assert dict(buckets)["+Inf"] == 25 and abs(total - 5.0) < 1e-9
