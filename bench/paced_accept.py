"""Scenario 7: accept paced at a fixed 300 requests a second (below saturation), JSON, with every
guard on (session, CSRF, rate limit, body limit): the latency a person sees when the app is busy
but not overloaded. Open loop: each request leaves at its own scheduled moment, whether the
earlier ones were answered or not, so a slow answer cannot hide by slowing the sender down.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from bench.scenarios import INVITE, Sizes, pct
from bench.stack import Stack

RATE = 300.0


class RawClient:
    """Keep-alive HTTP/1.1 connections over bare asyncio streams: a paced client far cheaper
    than httpx, so the bench process keeps the pace on a busy machine."""

    #: uvicorn closes a keep-alive connection idle for 5 s (``--timeout-keep-alive``); one the
    #: client kept longer could be closed under it as it sends (a run failed that way).
    IDLE_SECONDS = 4.0

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.netloc = parts.netloc
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self._idle:
            reader, writer, since = self._idle.pop()
            if time.monotonic() - since < self.IDLE_SECONDS:
                return reader, writer
            writer.close()
        return await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, headers: dict[str, str], body: str) -> int:
        reader, writer = await self._connection()
        data = body.encode()
        head = [f"POST {path} HTTP/1.1", f"Host: {self.netloc}", f"Content-Length: {len(data)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        answer = await reader.readuntil(b"\r\n\r\n")
        lines = answer.decode("latin-1").split("\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        await reader.readexactly(length)
        self._idle.append((reader, writer, time.monotonic()))
        return int(lines[0].split()[1])

    async def close(self) -> None:
        for _, writer, _ in self._idle:
            writer.close()
        self._idle.clear()


async def paced(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    env, _ = stack.fresh_database("paced")
    seconds = max(2.0, sizes.accept_seconds)
    with stack.web(env, "paced") as web:
        session = await web.session()
        request = session.post_json("/convites", INVITE)
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        client = RawClient(web.base_url)

        async def one(number: int) -> None:
            began = time.perf_counter()
            status = await client.post(request.path, request.headers, request.body_for(number))
            latencies.append((time.perf_counter() - began) * 1000)
            statuses[status] = statuses.get(status, 0) + 1

        try:
            await _at_rate(one, 0, 0.5)  # warm-up at the same rate, not measured
            latencies.clear()
            statuses.clear()
            with _no_collector_pauses():
                sent = await _at_rate(one, 1_000_000, seconds)
        finally:
            await client.close()
    return {
        "rate": RATE,
        "seconds": seconds,
        "sent": sent,
        "statuses": {str(k): v for k, v in statuses.items()},
        "p50_ms": pct(latencies, 50),
        "p99_ms": pct(latencies, 99),
        "max_ms": max(latencies, default=float("nan")),
    }


@contextmanager
def _no_collector_pauses() -> Iterator[None]:
    """No garbage collection in the bench process while it measures: a full collection here
    (38 ms, seen in the middle of a run) stalls every request in flight, and the pause was the
    client's, not the web's. The web collects as it always does."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


async def _at_rate(one: Any, first: int, seconds: float) -> int:
    tasks = []
    began = time.monotonic()
    sent = 0
    while time.monotonic() - began < seconds:
        tasks.append(asyncio.create_task(one(first + sent)))
        sent += 1
        await asyncio.sleep(max(0.0, began + sent / RATE - time.monotonic()))
    await asyncio.gather(*tasks)
    return sent


def section(data: dict[str, Any]) -> list[str]:
    ok = data["statuses"].get("202", 0)
    kept_pace = data["sent"] >= 0.9 * data["rate"] * data["seconds"]
    return [
        f"## 8. Accept paced at {data['rate']:,.0f} requests/s (JSON, every guard on)",
        "",
        "| what | figure |",
        "|---|---|",
        f"| requests (202 answers) in {data['seconds']:.0f} s | {data['sent']:,} ({ok:,}) |",
        f"| p50 / p99 / max | {data['p50_ms']:,.1f} / {data['p99_ms']:,.1f} / "
        f"{data['max_ms']:,.1f} ms |",
        "",
        f"- paced accept p99 {data['p99_ms']:,.1f} ms (an absolute time: reported without a "
        "target)"
        + ("" if ok == data["sent"] else f"; {data['sent'] - ok:,} requests not answered 202")
        + ("" if kept_pace else "; the client could not keep the pace (a starved bench process)"),
        "",
    ]
