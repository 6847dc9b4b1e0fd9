"""Live streams are capped per client address and per process, and each has a lifetime."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx

from app.config import Settings
from tests.fixtures import process_env
from tests.helpers import JSON
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
