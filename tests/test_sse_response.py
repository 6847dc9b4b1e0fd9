"""The live stream's response (sse-starlette's ``EventSourceResponse``, as ``app.web.events``
configures it) on a real uvicorn process: the client hanging up frees the stream's slot, a quiet
stream pings, and HEAD answers without opening a stream. (The server stopping ends every stream
cleanly: ``tests/test_live.py``.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from app.config import Settings
from tests.fixtures import process_env
from tests.services import AppProcess, free_port, wait_for_port

EVENTS = "/convites/eventos?depois=0"
#: Generous: how long a test waits for something the server does at once.
PATIENCE_SECONDS = 30
#: A resting stream's own periodic look (``WORKER_HEARTBEAT_SECONDS``) and lifetime: far past
#: ``PATIENCE_SECONDS``, so only the response itself can end a stream within a test.
NEVER = "3600"


async def _open_when_a_slot_is_free(browser: httpx.AsyncClient) -> None:
    while True:
        async with browser.stream("GET", EVENTS) as again:
            if again.status_code == 200:
                return
            assert again.status_code == 429
        await asyncio.sleep(0.1)


async def test_a_stream_whose_client_hung_up_gives_its_slot_back(
    settings: Settings, tmp_path: Path
) -> None:
    env = process_env(
        settings, WORKER_HEARTBEAT_SECONDS=NEVER, STREAM_MAX_SECONDS=NEVER, STREAMS_PER_SENDER="1"
    )
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as browser:
            async with browser.stream("GET", EVENTS) as first:
                assert first.status_code == 200
                assert await anext(first.aiter_lines()) == ": ola"
            # The sender's one slot: taken until the server sees the hang-up.
            await asyncio.wait_for(_open_when_a_slot_is_free(browser), PATIENCE_SECONDS)


async def test_a_quiet_stream_pings(settings: Settings, tmp_path: Path) -> None:
    # sse-starlette's own ping (every 15 s unless told) would come after the patience: only the
    # configured interval brings one in time.
    env = process_env(settings, WORKER_HEARTBEAT_SECONDS=NEVER, STREAM_PING_SECONDS="0.5")
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as browser,
            browser.stream("GET", EVENTS) as response,
        ):
            lines = response.aiter_lines()
            assert await anext(lines) == ": ola"

            async def first_ping() -> str:
                async for line in lines:
                    if line.startswith(":"):
                        return line
                raise AssertionError("the stream ended without a ping")

            assert await asyncio.wait_for(first_ping(), 10) == ": ping"


async def test_head_answers_the_headers_and_opens_no_stream(
    settings: Settings, tmp_path: Path
) -> None:
    env = process_env(settings, STREAMS_PER_SENDER="1")
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as browser:
            for _ in range(3):  # each would take the sender's one slot if it opened a stream
                head = await browser.head("/convites/eventos")
                assert head.status_code == 200
                assert head.headers["content-type"].startswith("text/event-stream")
                assert head.headers["cache-control"] == "no-store"
            async with browser.stream("GET", EVENTS) as stream:
                assert stream.status_code == 200


async def test_a_stream_whose_request_fails_under_it_ends_and_gives_its_slot_back(
    settings: Settings, tmp_path: Path
) -> None:
    # A GET that goes on sending a body past the limit: reading it fails (BodyLimitMiddleware)
    # where the response waits for the hang-up, and nobody is listening to that stream any more.
    env = process_env(
        settings,
        WORKER_HEARTBEAT_SECONDS=NEVER,
        STREAM_MAX_SECONDS=NEVER,
        STREAMS_PER_ADDRESS="1",
        MAX_BODY_BYTES="1024",
    )
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = f"GET {EVENTS} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n"
        writer.write(head.encode() + b"\r\n")
        assert b" 200 " in await asyncio.wait_for(reader.readline(), 5)
        writer.write(b"800\r\n" + b"x" * 0x800 + b"\r\n")  # 2 KB: over the limit
        # The stream ends instead of living out its lifetime: the server closes the connection
        # (the request failed, so the response is cut rather than completed).
        await asyncio.wait_for(reader.read(), PATIENCE_SECONDS)
        writer.close()
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as browser,
            browser.stream("GET", EVENTS) as again,
        ):
            assert again.status_code == 200  # the address's one slot was given back
