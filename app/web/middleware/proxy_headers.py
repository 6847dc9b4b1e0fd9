"""Who is really asking, and over what: proxy headers, trusted only when configured.

With ``TRUST_PROXY_HEADERS=true``, and only on connections from a peer in ``TRUSTED_PROXIES``
(loopback by default), the app believes ``X-Forwarded-Proto`` (Secure cookies, HSTS) and
``X-Forwarded-For`` (per-address rate limits) — from the last hop, i.e. what the one proxy in
front of us saw. Otherwise they are ignored: anyone could send them. Run uvicorn with
``--no-proxy-headers`` so this is the one switch (``python -m app dev`` does).
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.config import Network


def _last_hop(value: str | None) -> str:
    return value.rsplit(",", 1)[-1].strip() if value else ""


def _peer_is_trusted(scope: Scope, trusted: Sequence[Network]) -> bool:
    client = scope.get("client")
    try:
        peer = ipaddress.ip_address(client[0]) if client else None
    except ValueError:  # a unix socket path, or anything that is not an address
        return False
    return peer is not None and any(peer in network for network in trusted)


class TrustedProxyHeadersMiddleware:
    """Rewrite ``scope["scheme"]`` and ``scope["client"]`` from the proxy's headers, only for
    requests whose peer is one of ``trusted`` (``TRUSTED_PROXIES``)."""

    def __init__(self, app: ASGIApp, trusted: Sequence[Network]) -> None:
        self.app = app
        self.trusted = tuple(trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and _peer_is_trusted(scope, self.trusted):
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
