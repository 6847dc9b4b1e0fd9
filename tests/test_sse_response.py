"""The live stream's own response (``app.web.sse_response``) on a real uvicorn process: it sees
the client hang up, pings when quiet, and answers HEAD without opening a stream."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from app.config import Settings
from tests.fixtures import process_env
from tests.services import AppProcess, free_port, wait_for_port

EVENTS = "/convites/eventos?depois=0"


async def test_a_stream_whose_client_hung_up_gives_its_slot_back_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    # A resting stream's periodic look is a minute away: only the hang-up ringing its doorbell
    # can free the sender's one slot in time.
    env = process_env(settings, WORKER_HEARTBEAT_SECONDS="60", STREAMS_PER_SENDER="1")
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as browser:
            async with browser.stream("GET", EVENTS) as first:
                assert first.status_code == 200
                assert await anext(first.aiter_lines()) == ": ola"
                await asyncio.sleep(0.5)  # past its first read, resting
            deadline = time.monotonic() + 3
            while True:
                async with browser.stream("GET", EVENTS) as again:
                    if again.status_code == 200:
                        break
                    assert again.status_code == 429
                assert time.monotonic() < deadline, "the closed stream still holds its slot"
                await asyncio.sleep(0.1)


async def test_a_quiet_stream_pings(settings: Settings, tmp_path: Path) -> None:
    env = process_env(settings, WORKER_HEARTBEAT_SECONDS="60", STREAM_PING_SECONDS="1")
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as browser,
            browser.stream("GET", EVENTS) as response,
        ):
            lines = response.aiter_lines()
            started = time.monotonic()
            pings = []
            while len(pings) < 2:
                line = await asyncio.wait_for(anext(lines), 5)
                if line == ": ping":
                    pings.append(time.monotonic() - started)
    assert 0.5 < pings[0] < 3
    assert 0.5 < pings[1] - pings[0] < 3


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
    # in the task that waits for the hang-up, and nobody is listening to that stream any more.
    env = process_env(
        settings, WORKER_HEARTBEAT_SECONDS="60", STREAMS_PER_ADDRESS="1", MAX_BODY_BYTES="1024"
    )
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = f"GET {EVENTS} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n"
        writer.write(head.encode() + b"\r\n")
        assert b" 200 " in await asyncio.wait_for(reader.readline(), 5)
        writer.write(b"800\r\n" + b"x" * 0x800 + b"\r\n")  # 2 KB: over the limit
        # The response ends (its last chunk) instead of living out the stream's lifetime.
        received = b""
        while not received.endswith(b"0\r\n\r\n"):
            chunk = await asyncio.wait_for(reader.read(4096), 5)
            assert chunk, "the connection closed before the response completed"
            received += chunk
        writer.close()
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as browser,
            browser.stream("GET", EVENTS) as again,
        ):
            assert again.status_code == 200  # the address's one slot was given back
