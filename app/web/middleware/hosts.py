"""Host checking: answer only for the names the app is really served under.

A request whose ``Host`` is not ``PUBLIC_URL``'s host (nor one of ``ALLOWED_HOSTS``, nor, outside
production, ``localhost``/``127.0.0.1``) gets a 400 before any endpoint runs. Links and cookies
are then never built for a name an attacker chose (DNS rebinding, poisoned caches).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.config import Settings

LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")
REFUSED = "Endereço (Host) desconhecido para este serviço."


def allowed_hosts(settings: Settings) -> frozenset[str]:
    """Lower-case host names (no port) this app answers for."""
    names = {(urlsplit(settings.public_url).hostname or "").lower(), *settings.allowed_hosts}
    if settings.app_env != "production":
        names.update(LOCAL_NAMES)
    names.discard("")
    return frozenset(name.lower() for name in names)


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8000
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostCheckMiddleware:
    """Pure ASGI: refuse (400, pt-BR) a request for a host name not in ``allowed``."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = _host_name(Headers(scope=scope).get("host", ""))
        if host in self.allowed:
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse(REFUSED, status_code=400)
        await response(scope, receive, send)
