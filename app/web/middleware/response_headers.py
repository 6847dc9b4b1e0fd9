"""What the header-setting middlewares share: HTTP only, and a ``send`` that edits the
response's headers as they start, leaving the body (and an SSE stream) untouched."""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def sending_with_headers(send: Send, set_headers: Callable[[MutableHeaders], None]) -> Send:
    """``send``, with ``set_headers`` applied at ``http.response.start``."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            set_headers(MutableHeaders(scope=message))
        await send(message)

    return wrapped


class HttpMiddleware:
    """A pure-ASGI middleware that acts on HTTP requests only (``handle``); the rest pass."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError
