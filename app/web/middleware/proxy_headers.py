"""Who is really asking, and over what: proxy headers, trusted only when configured.

With ``TRUST_PROXY_HEADERS=true`` the app believes ``X-Forwarded-Proto`` (Secure cookies, HSTS)
and ``X-Forwarded-For`` (per-address rate limits) — from the last hop, i.e. what the one proxy
in front of us saw. Without it they are ignored: anyone could send them. Run uvicorn with
``--no-proxy-headers`` so this is the one switch (``python -m app dev`` does).
"""

from __future__ import annotations

import contextlib
import ipaddress

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send


def _last_hop(value: str | None) -> str:
    return value.rsplit(",", 1)[-1].strip() if value else ""


class TrustedProxyHeadersMiddleware:
    """Rewrite ``scope["scheme"]`` and ``scope["client"]`` from the proxy's headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = Headers(scope=scope)
            proto = _last_hop(headers.get("x-forwarded-proto")).lower()
            if proto in ("http", "https"):
                secure = proto == "https"
                if scope["type"] == "websocket":
                    scope["scheme"] = "wss" if secure else "ws"
                else:
                    scope["scheme"] = proto
            address = _last_hop(headers.get("x-forwarded-for"))
            with contextlib.suppress(ValueError):  # absent or not an address: keep the peer's
                scope["client"] = (str(ipaddress.ip_address(address)), 0)
        await self.app(scope, receive, send)
