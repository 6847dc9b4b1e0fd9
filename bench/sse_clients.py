"""Many SSE subscribers in one process: ``python -m bench.sse_clients URLS PLAN OUT``.

URLS is one URL, or several separated by commas (stream i opens URL i modulo their number: one
per web process). PLAN is a JSON list of header dicts, one per stream. Prints one line once
every stream has its response headers, then records ``[stream, event id, receive time]`` for
every event until SIGTERM, when it writes them to OUT as JSON.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit


async def _stream(
    index: int, url: str, headers: dict[str, str], ready: asyncio.Queue[int], out: list[list[float]]
) -> None:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    target = f"{parts.path}?{parts.query}" if parts.query else parts.path
    lines = [f"GET {target} HTTP/1.1", f"Host: {parts.netloc}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    status = await reader.readline()
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    await ready.put(index if b" 200 " in status else -1)
    while True:
        line = await reader.readline()
        if not line:
            return
        if line.startswith(b"id:"):
            value = line[3:].strip()
            if value.isdigit():
                out.append([index, int(value), time.time()])


async def main(urls: str, plan_path: str, out_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text())
    ready: asyncio.Queue[int] = asyncio.Queue()
    received: list[list[float]] = []
    each = urls.split(",")
    tasks = [
        asyncio.create_task(_stream(i, each[i % len(each)], h, ready, received))
        for i, h in enumerate(plan)
    ]
    ok = 0
    for _ in plan:
        ok += (await ready.get()) >= 0
    print(f"{ok}/{len(plan)} streams open", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    for task in tasks:
        task.cancel()
    Path(out_path).write_text(json.dumps(received))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
