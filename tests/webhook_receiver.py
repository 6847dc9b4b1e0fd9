"""A real webhook receiver for the tests: a small Starlette app under uvicorn on a free port, in
the test's own event loop. It verifies every delivery's signature with ``standardwebhooks`` (as
a receiver following the specification would) and answers what the test scripts: a status code
per delivery, or ``STALL`` (no answer until the test ends)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.services import free_port
from tests.waiting import eventually, until

STALL = "stall"


@dataclass
class Delivery:
    headers: dict[str, str]
    body: dict[str, Any]
    verified: bool


@dataclass
class Receiver:
    port: int
    secret: str | None = None
    #: What to answer to each delivery, in order; once used up, 200.
    script: list[int | str] = field(default_factory=list)
    received: list[Delivery] = field(default_factory=list)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/ganchos"

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        headers = {key: value for key, value in request.headers.items()}
        verified = False
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(raw, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
        self.received.append(Delivery(headers, json.loads(raw), verified))
        answer = self.script.pop(0) if self.script else 200
        if answer == STALL:
            await self.released.wait()
            answer = 200
        return PlainTextResponse("recebido" if answer == 200 else "falhou aqui", int(answer))


@contextlib.asynccontextmanager
async def webhook_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver(free_port())
    app = Starlette(routes=[Route("/ganchos", receiver.handle, methods=["POST"])])
    config = uvicorn.Config(
        app, host="127.0.0.1", port=receiver.port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())

    async def listening() -> bool:
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0)
        return bool(server.started)

    await eventually(listening, what="the webhook receiver listening")
    try:
        yield receiver
    finally:
        receiver.released.set()
        server.should_exit = True
        await task


@contextlib.contextmanager
def webhook_receiver_thread() -> Iterator[Receiver]:
    """``webhook_receiver`` for a synchronous test (the browser tests): uvicorn in a thread of
    its own, with its own event loop."""
    receiver = Receiver(free_port())
    app = Starlette(routes=[Route("/ganchos", receiver.handle, methods=["POST"])])
    config = uvicorn.Config(
        app, host="127.0.0.1", port=receiver.port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    until(lambda: server.started or not thread.is_alive(), what="the webhook receiver listening")
    assert server.started, "the webhook receiver did not start"
    try:
        yield receiver
    finally:
        server.should_exit = True
        thread.join(10)
