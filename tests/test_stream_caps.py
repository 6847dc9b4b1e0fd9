"""Live streams are capped per sender, per client network (IPv6 by /64) and per process, and
each has a lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.web.stream_caps import STREAM_SLOT_SECONDS, TooManyStreams, open_stream_slot
from tests.fixtures import process_env
from tests.helpers import JSON, client_for
from tests.services import AppProcess, free_port, wait_for_port


async def open_streams(url: str, senders: int, stack: contextlib.AsyncExitStack) -> None:
    """One open stream for each of ``senders`` different browsers (own cookie jars)."""
    for _ in range(senders):
        browser = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=10))
        response = await stack.enter_async_context(browser.stream("GET", "/convites/eventos"))
        assert response.status_code == 200


async def test_one_address_cannot_open_more_streams_than_its_cap_whatever_the_sender(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    env = process_env(settings, STREAMS_PER_ADDRESS="2")
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        url = f"http://127.0.0.1:{port}"
        async with contextlib.AsyncExitStack() as stack:
            await open_streams(url, 2, stack)
            async with httpx.AsyncClient(base_url=url, timeout=10) as third:
                refused = await third.get("/convites/eventos", headers=JSON)
        assert refused.status_code == 429
        assert "sua rede" in refused.json()["erro"]
        assert int(refused.headers["retry-after"]) > 0


async def test_one_process_cannot_hold_more_streams_than_its_cap(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    env = process_env(settings, STREAMS_PER_PROCESS="2")
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        url = f"http://127.0.0.1:{port}"
        async with contextlib.AsyncExitStack() as stack:
            await open_streams(url, 2, stack)
            async with httpx.AsyncClient(base_url=url, timeout=10) as third:
                refused = await third.get("/convites/eventos", headers=JSON)
        assert refused.status_code == 503
        assert "conexões demais" in refused.json()["erro"]
        assert refused.headers["retry-after"] == "10"


async def test_a_stream_ends_after_its_lifetime_and_the_slot_is_given_back(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    env = process_env(settings, STREAM_MAX_SECONDS="2", STREAMS_PER_SENDER="1")
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as browser:
            async with browser.stream("GET", "/convites/eventos") as response:
                assert response.status_code == 200
                # The body ends (no exception): the server completed the response.
                await asyncio.wait_for(_read_to_the_end(response), 20)
            # The only slot of this sender was released: a reconnect is let in at once.
            async with browser.stream("GET", "/convites/eventos?depois=0") as again:
                assert again.status_code == 200


async def _read_to_the_end(response: httpx.Response) -> None:
    async for _ in response.aiter_lines():
        pass


async def test_a_sender_can_hold_only_so_many_open_streams(redis: Redis) -> None:
    first = await open_stream_slot(redis, "s1", limit=2)
    await open_stream_slot(redis, "s1", limit=2)

    with pytest.raises(TooManyStreams) as refused:
        await open_stream_slot(redis, "s1", limit=2)
    assert refused.value.retry_after > 0
    await open_stream_slot(redis, "s2", limit=2)  # another sender is not affected

    await first.release()
    await open_stream_slot(redis, "s1", limit=2)


async def test_a_stream_slot_is_released_when_the_stream_ends(redis: Redis) -> None:
    for _ in range(3):
        slot = await open_stream_slot(redis, "s1", limit=1)
        with pytest.raises(TooManyStreams):
            await open_stream_slot(redis, "s1", limit=1)
        await slot.release()


async def test_slots_of_a_dead_process_drop_out_but_refreshed_ones_stay(redis: Redis) -> None:
    kept = await open_stream_slot(redis, "s1", limit=2)
    # A process that died an hour ago never released its slot.
    await redis.zadd("convites:limite:streams:s1", {"dead": time.time() - STREAM_SLOT_SECONDS - 1})
    await kept.refresh()

    await open_stream_slot(redis, "s1", limit=2)
    with pytest.raises(TooManyStreams):
        await open_stream_slot(redis, "s1", limit=2)


async def test_with_redis_down_streams_are_allowed(caplog: pytest.LogCaptureFixture) -> None:
    down = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    try:
        with caplog.at_level(logging.WARNING):
            slot = await open_stream_slot(down, "s1", limit=1)
            await slot.refresh()
            await slot.release()
    finally:
        await down.aclose()
    assert "stream limiter unavailable" in caplog.text


async def test_addresses_of_one_ipv6_64_share_the_per_address_cap(
    settings: Settings, redis: Redis
) -> None:
    """One home or phone network hands out a whole /64: its addresses count as one client.
    Fails (the stream opens, and the wait times out) if the cap keys on the full address."""
    limited = replace(settings, streams_per_address=1)
    held = await open_stream_slot(redis, "endereco:2001:db8:1:2::/64", 1)  # one open already
    try:
        async with client_for(limited, client=("2001:db8:1:2:aaaa::9", 1)) as neighbour:
            refused = await asyncio.wait_for(
                neighbour.get("/convites/eventos", headers=JSON), timeout=10
            )
    finally:
        await held.release()
    assert refused.status_code == 429 and "sua rede" in refused.json()["erro"]
