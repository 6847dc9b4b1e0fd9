"""Who is asking: the signed-in account behind the session cookie, and the doors that need one."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from functools import wraps

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.accounts import sessions
from app.clock import utcnow
from app.invites.records import Account
from app.web.common import (
    SESSION_KEY,
    VISITOR_KEY,
    client_network,
    db_of,
    is_htmx,
    settings_of,
    wants_json,
)

Handler = Callable[[Request], Awaitable[Response]]
SIGN_IN_FIRST = "Entre com seu e-mail para continuar."


def session_token(request: Request) -> str | None:
    """The token of the server-side session this cookie carries, if any."""
    token = request.session.get(SESSION_KEY)
    return token if isinstance(token, str) and token else None


async def identify(request: Request) -> Account | None:
    """The account of this request's session (looked up once per request), or ``None``.

    A use is written down now and then (``sessions.TOUCH_SECONDS``), and at once from a new
    network: ``/conta`` then shows where a copied cookie is being used."""
    if hasattr(request.state, "account"):
        found: Account | None = request.state.account
        return found
    token = session_token(request)
    account = None
    if token is not None:
        db = db_of(request)
        live = await sessions.find(db, token)
        if live is not None:
            account = live.account
            request.state.session_id = live.public_id
            network = client_network(request)
            if live.needs_touch(network, utcnow()):
                await sessions.touch(db, live.public_id, network)
    request.state.account = account
    return account


def refuse_anonymous(request: Request) -> Response:
    if wants_json(request):
        return JSONResponse({"erro": SIGN_IN_FIRST}, status_code=401)
    if is_htmx(request):
        return Response(status_code=401, headers={"HX-Redirect": "/entrar"})
    return RedirectResponse("/entrar", status_code=303)


def signed_in(handler: Handler) -> Handler:
    """Run ``handler`` only for a signed-in account (``sender_id(request)`` is then its id)."""

    @wraps(handler)
    async def guarded(request: Request) -> Response:
        if await identify(request) is None:
            return refuse_anonymous(request)
        return await handler(request)

    return guarded


async def begin_session(request: Request, account: Account) -> None:
    """Sign this browser in as ``account`` with a new cookie: the old one stays a visitor's (no
    session fixation)."""
    settings = settings_of(request)
    token = await sessions.start(
        db_of(request),
        account.id,
        settings.session_ttl_seconds,
        request.headers.get("user-agent", ""),
        client_network(request),
    )
    request.session.clear()
    request.session[VISITOR_KEY] = secrets.token_urlsafe(16)
    request.session[SESSION_KEY] = token
    request.state.account = account


async def end_session(request: Request) -> None:
    """Sign out on the server too: a copy of the cookie is refused afterwards."""
    token = session_token(request)
    if token is not None:
        await sessions.end(db_of(request), token)
    forget_session(request)


def forget_session(request: Request) -> None:
    """This browser is a visitor from now on, with a new id (and so a new CSRF token)."""
    request.session.clear()
    request.session[VISITOR_KEY] = secrets.token_urlsafe(16)
    request.state.account = None
