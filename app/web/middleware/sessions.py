"""The session cookie: Starlette's signed-cookie sessions, ``Secure`` by the request's scheme."""

from __future__ import annotations

from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send


class SchemeAwareSessionMiddleware:
    """Starlette's signed-cookie sessions, with ``Secure`` whenever the request came by HTTPS.

    ``always_secure`` for TLS ended somewhere that does not say so. A ``Secure`` cookie takes the
    ``__Host-`` prefix, so no subdomain can plant or read it.
    """

    def __init__(
        self, app: ASGIApp, *, secret_key: str, cookie: str, max_age: int, always_secure: bool
    ) -> None:
        def make(secure: bool) -> SessionMiddleware:
            return SessionMiddleware(
                app,
                secret_key=secret_key,
                session_cookie=f"__Host-{cookie}" if secure else cookie,
                max_age=max_age,
                same_site="lax",
                https_only=secure,
            )

        self.plain = make(always_secure)
        self.secure = make(True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("scheme") in ("https", "wss"):
            await self.secure(scope, receive, send)
        else:
            await self.plain(scope, receive, send)
