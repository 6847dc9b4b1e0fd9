"""Response headers that tell the browser what this app will never do (pure ASGI)."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import Receive, Scope, Send

from app.web.middleware.response_headers import HttpMiddleware, sending_with_headers

#: No inline script or style, no eval, nothing from elsewhere, never inside a frame.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
    "object-src 'none'"
)

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Permissions-Policy": (
        "camera=(), microphone=(), geolocation=(), payment=(), usb=(), browsing-topics=()"
    ),
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
#: Pages and JSON hold a person's invites: no shared or disk cache keeps them.
DEFAULT_CACHE_CONTROL = "private, no-store"
HSTS = "max-age=31536000"


def add_security_headers(headers: MutableHeaders, scheme: str) -> None:
    """Set every security header the response does not set itself."""
    for name, value in SECURITY_HEADERS.items():
        headers.setdefault(name, value)
    headers.setdefault("Cache-Control", DEFAULT_CACHE_CONTROL)
    if scheme == "https":
        headers.setdefault("Strict-Transport-Security", HSTS)


class SecurityHeadersMiddleware(HttpMiddleware):
    """Adds the headers at ``http.response.start``; bodies (and SSE streams) pass untouched."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        scheme = scope.get("scheme", "http")
        await self.app(
            scope,
            receive,
            sending_with_headers(send, lambda headers: add_security_headers(headers, scheme)),
        )
