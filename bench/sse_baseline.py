"""The bare broadcast baseline: sse-starlette and nothing else (``uvicorn bench.sse_baseline:app``).

``GET /sse`` opens a stream fed by its own queue; ``POST /broadcast`` puts one pre-encoded event
(the next id) on every open stream's queue and answers with that id and the time it did so. No
database, no templates, no middleware: the floor the live scenario is measured against.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ROW = "<li>" + "x" * 600 + "</li>"  # about the size of one rendered invite row
queues: set[asyncio.Queue[bytes]] = set()
counter = [0]


async def sse(request: Request) -> Response:
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def generate() -> AsyncIterator[bytes]:
        queues.add(queue)
        try:
            yield ServerSentEvent(comment="ola").encode()
            while True:
                yield await queue.get()
        finally:
            queues.discard(queue)

    return EventSourceResponse(generate(), ping=15)


async def broadcast(request: Request) -> Response:
    counter[0] += 1
    data = ServerSentEvent(data=ROW, event="convite", id=str(counter[0])).encode()
    at = time.time()
    for queue in queues:
        queue.put_nowait(data)
    return JSONResponse({"id": counter[0], "at": at, "streams": len(queues)})


app = Starlette(
    routes=[Route("/sse", sse, methods=["GET"]), Route("/broadcast", broadcast, methods=["POST"])]
)
