"""The live scenario's baseline: a bare sse-starlette broadcast to as many streams, same run.

The same uvicorn flags as the app's web process and the same client process
(``bench.sse_clients``); the server is ``bench.sse_baseline`` (no database, no templates, no
middleware). Latency is from the moment the server queued an event to the moment each stream
read it, exactly as the live scenario measures from the event's commit time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from bench import procs
from bench.scenarios import pct

BROADCASTS = 20
BROADCAST_GAP_SECONDS = 0.1


def last_subscriber(received: list[list[float]], sent_at: dict[int, float]) -> dict[str, float]:
    """Per delivery and per event (its last stream): p50 and p99 in ms."""
    latencies: list[float] = []
    per_event: dict[int, float] = {}
    for _stream, event_id, at in received:
        if int(event_id) in sent_at:
            delay = (at - sent_at[int(event_id)]) * 1000
            latencies.append(delay)
            per_event[int(event_id)] = max(per_event.get(int(event_id), 0.0), delay)
    last = list(per_event.values())
    return {
        "deliveries": len(latencies),
        "events": len(last),
        "p50_ms": pct(latencies, 50),
        "p99_ms": pct(latencies, 99),
        "last_subscriber_p50_ms": pct(last, 50),
        "last_subscriber_p99_ms": pct(last, 99),
    }


def _server(folder: Path, port: int) -> procs.Proc:
    args = [sys.executable, "-m", "uvicorn", "bench.sse_baseline:app"]
    args += ["--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http", "httptools"]
    args += ["--no-access-log", "--backlog", "2048", "--timeout-graceful-shutdown", "3"]
    return procs.Proc("sse baseline", args, {}, folder / "sse-baseline.log")


async def broadcast_baseline(stack: Any, streams: int, timeout: float) -> dict[str, Any]:
    """``BROADCASTS`` events, each to ``streams`` open streams of one bare sse-starlette app."""
    folder = stack.folder / "sse-baseline"
    folder.mkdir(parents=True, exist_ok=True)
    port = procs.free_port()
    server = _server(folder, port)
    server.env = procs._pythonpath(dict(stack.env("sse-baseline")))
    server.start()
    plan, out = folder / "streams.json", folder / "received.json"
    plan.write_text(json.dumps([{"Accept": "text/event-stream"}] * streams))
    sent_at: dict[int, float] = {}
    try:
        server.wait_ready(port=port)
        rss_idle = procs.rss_mb(server.pid)
        url = f"http://127.0.0.1:{port}/sse"
        client = subprocess.Popen(
            [sys.executable, "-m", "bench.sse_clients", url, str(plan), str(out)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=procs.ROOT,
            env=server.env,
        )
        try:
            assert client.stdout is not None
            ready = await asyncio.wait_for(asyncio.to_thread(client.stdout.readline), timeout)
            rss_open = procs.rss_mb(server.pid)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                for _ in range(BROADCASTS):
                    body = (await http.post("/broadcast")).json()
                    sent_at[int(body["id"])] = float(body["at"])
                    await asyncio.sleep(BROADCAST_GAP_SECONDS)
            await asyncio.sleep(1.0)
        finally:
            client.terminate()
            client.wait(30)
    finally:
        server.stop()
    received = json.loads(out.read_text()) if out.exists() else []
    return {
        "streams": streams,
        "connected": ready.strip(),
        "broadcasts": len(sent_at),
        **last_subscriber(received, sent_at),
        "kb_per_stream": max(0.0, rss_open - rss_idle) * 1024 / streams,
    }
