"""CSRF: every state-changing request carries a token only this sender's pages can know.

An HMAC of the browser's id (in the session cookie) with ``SECRET_KEY``: no storage, and
worthless after sign-in gives the browser a new id. Sent as the ``csrf_token`` field or the
``X-CSRF-Token`` header; an unsafe method without a valid one gets 403 before any endpoint.
Besides ``API_PREFIX`` (API keys only, never a cookie), one path is let through: the signed
one-click opt-out (``app.consent.optout``, RFC 8058).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence
from typing import Any

from jinja2 import pass_context
from markupsafe import Markup
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.consent.optout import is_one_click_path
from app.logs import hide_secrets
from app.signing import FULL, Purpose, sign, verify
from app.web.common import (
    API_PREFIX,
    VISITOR_KEY,
    bearer_token,
    error_response,
    settings_of,
    visitor_id,
)

log = logging.getLogger(__name__)

HEADER = "x-csrf-token"
FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
REFUSED = (
    "Não foi possível confirmar que este pedido veio desta página. Recarregue e tente de novo."
)


def token_for(secret_key: str, sender: str) -> str:
    """The CSRF token of ``sender``: stable for the session, unguessable without the key."""
    return sign(secret_key, Purpose.CSRF, sender, length=FULL)


def csrf_token(request: Request) -> str:
    """The token for this request's sender ("" where there is no session, e.g. a 413 page)."""
    if "session" not in request.scope:
        return ""
    return token_for(settings_of(request).secret_key, visitor_id(request))


@pass_context
def csrf_token_global(context: Any, request: Request | None = None) -> str:
    """Jinja: ``{{ csrf_token() }}`` or ``{{ csrf_token(request) }}`` ("" without a request)."""
    request = request or context.get("request")
    return csrf_token(request) if request is not None else ""


@pass_context
def csrf_field(context: Any) -> Markup:
    """Jinja: ``{{ csrf_field() }}`` inside every ``<form method="post">``; none without a
    request (an SSE row lives on a page whose htmx sends the header)."""
    token = csrf_token_global(context)
    if not token:
        return Markup("")
    return Markup('<input type="hidden" name="{}" value="{}">').format(FIELD, token)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body to the app, then the real stream."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _form_token(scope: Scope, body: bytes, receive: Receive) -> str | None:
    request = Request(scope, _replay(body, receive))
    try:
        # No part is larger than the body, which the body limit outside has bounded; the
        # default (1 MiB) would refuse a pasted list as if it had no token.
        async with request.form(max_part_size=max(len(body), 1)) as form:
            value = form.get(FIELD)
    except HTTPException:  # a malformed multipart body: it carries no token we can trust
        return None
    return value if isinstance(value, str) else None


class CsrfMiddleware:
    """Pure ASGI (SSE streams pass unbuffered): refuse unsafe methods without a valid token;
    a form body is read here, bounded by the body limit outside, and replayed."""

    def __init__(
        self,
        app: ASGIApp,
        secret_key: str,
        *,
        routes: Sequence[BaseRoute],
        ops_token: str | None = None,
    ) -> None:
        self.app = app
        self.secret_key = secret_key
        self.ops_token = ops_token
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith(API_PREFIX):
            # Only an API key in the Authorization header authenticates there, never a cookie
            # (``app.web.api``): a forged cross-site request carries nothing that signs it in.
            await self.app(scope, receive, send)
            return
        if is_one_click_path(scope["path"]):
            # RFC 8058: a mail provider POSTs the one-click opt-out with no cookie and no
            # token; the HMAC in this one path is the proof (checked by app.web.optout).
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self._operator_bearer(scope["path"], headers.get("authorization", "")):
            # A bearer token is never attached by a browser on its own (unlike cookies or
            # Basic credentials), so such a request cannot be forged cross-site. Only the real
            # OPS_TOKEN, and only under /operacao: any other "Bearer x" is checked like a cookie.
            await self.app(scope, receive, send)
            return
        given = headers.get(HEADER)
        if given is None and headers.get("content-type", "").startswith(_FORM_TYPES):
            try:
                body = await _read_body(receive)
            except ClientDisconnect:
                return
            given = await _form_token(scope, body, receive)
            receive = _replay(body, receive)
        if not self._valid(scope, given) and self._reaches_an_endpoint(scope):
            log.warning(
                "request refused: missing or invalid CSRF token",
                extra={"method": scope["method"], "path": hide_secrets(scope["path"])},
            )
            await error_response(Request(scope), 403, REFUSED)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _reaches_an_endpoint(self, scope: Scope) -> bool:
        """Whether an endpoint takes this method at this path. Where none does, the router
        answers 404 or 405, which says what is wrong; a 403 would send the person looking for
        a token."""
        return any(route.matches(scope)[0] == Match.FULL for route in self.routes)

    def _operator_bearer(self, path: str, header: str) -> bool:
        given = bearer_token(header)
        if self.ops_token is None or given is None:
            return False
        if path != "/operacao" and not path.startswith("/operacao/"):
            return False
        return hmac.compare_digest(given.encode(), self.ops_token.encode())

    def _valid(self, scope: Scope, given: str | None) -> bool:
        sender = scope.get("session", {}).get(VISITOR_KEY)
        if not given or not isinstance(sender, str) or not sender:
            return False
        return verify(given, self.secret_key, Purpose.CSRF, sender, length=FULL)
