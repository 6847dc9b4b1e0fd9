"""Host checking: answer only for the names the app is really served under.

Links and cookies are never built for a name an attacker chose (DNS rebinding, poisoned caches).
Starlette's ``TrustedHostMiddleware`` decides; only the refusal is ours, since it speaks pt-BR.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings

LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")
REFUSED = "Endereço (Host) desconhecido para este serviço."
_SERVED = "convites.host_served"


def allowed_hosts(settings: Settings) -> list[str]:
    """Host names (no port) this app answers for."""
    names = {urlsplit(settings.public_url).hostname or "", *settings.allowed_hosts}
    if settings.app_env != "production":
        names.update(LOCAL_NAMES)
    names.discard("")
    return sorted(names)


async def _mark_served(scope: Scope, receive: Receive, send: Send) -> None:
    scope[_SERVED] = True


async def _drop(message: Message) -> None:
    """The library's own refusal goes nowhere: ours is sent instead."""


class HostCheckMiddleware:
    """Pure ASGI: refuse (400, pt-BR) a request for a host name not in ``allowed``."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.check = TrustedHostMiddleware(_mark_served, allowed_hosts=allowed, www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        await self.check(scope, receive, _drop)
        if scope.pop(_SERVED, False):
            await self.app(scope, receive, send)
            return
        await PlainTextResponse(REFUSED, status_code=400)(scope, receive, send)
