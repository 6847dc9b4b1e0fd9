"""Request bodies over ``MAX_BODY_BYTES`` get 413 before anyone parses them (pure ASGI)."""

from __future__ import annotations

import logging

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.logs import hide_secrets
from app.web.common import error_response

log = logging.getLogger(__name__)

TOO_LARGE = "O pedido é grande demais: o limite é de {limit}."


def readable_size(size: int) -> str:
    """``size`` bytes as a person reads it, in pt-BR: "64 KB", "2 MB", "1,5 MB"."""
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{round(size / scale, 1):g}".replace(".", ",") + f" {unit}"
    return f"{size} bytes"


class BodyTooLarge(Exception):
    """Raised from ``receive`` once the body passes the limit; turned into a 413 here."""


class BodyLimitMiddleware:
    """Refuse a declared ``Content-Length`` over the limit at once; count streamed bytes too.
    A chunked body has no length up front: ``receive`` raises ``BodyTooLarge`` once the total
    passes the limit, and the answer is a 413 with nothing written.
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, larger: tuple[tuple[str, int], ...] = ()
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = larger  # (path prefix, limit): a batch's upload is bigger than a form

    def _limit_for(self, path: str) -> int:
        for prefix, limit in self.larger:
            if path.startswith(prefix):
                return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self._limit_for(scope["path"])
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
            await self._refuse(scope, receive, send, declared, max_bytes)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise BodyTooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send, f">{max_bytes}", max_bytes)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, size: str, max_bytes: int
    ) -> None:
        log.warning(
            "request body too large",
            extra={"path": hide_secrets(scope["path"]), "content_length": size},
        )
        message = TOO_LARGE.format(limit=readable_size(max_bytes))
        response = error_response(Request(scope), 413, message)
        await response(scope, receive, send)
