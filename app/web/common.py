"""What every endpoint needs: who is asking, what they accept, and how to answer errors."""

from __future__ import annotations

import ipaddress
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.templating import Jinja2Templates

from app.config import Settings
from app.invites.records import Account
from app.storage.database import Database

#: Session keys: the browser's own random id (CSRF, its sign-in mails), and the token of the
#: server-side session once someone signed in (``app.accounts.sessions``).
VISITOR_KEY = "visitante"
SESSION_KEY = "sessao"


def visitor_id(request: Request) -> str:
    """This browser's random id, from the signed session cookie (a new one on first visit)."""
    session = request.session
    value = session.get(VISITOR_KEY)
    if not isinstance(value, str) or not value:
        value = secrets.token_urlsafe(16)
        session[VISITOR_KEY] = value
    return value


def signed_in_account(request: Request) -> Account | None:
    """The account ``app.web.identity`` found for this request (``None``: nobody signed in)."""
    account: Account | None = getattr(request.state, "account", None)
    return account


def sender_id(request: Request) -> str:
    """The signed-in sender's id: what their invites, events and streams are scoped to."""
    account = signed_in_account(request)
    assert account is not None, "sender_id() outside a signed-in endpoint"
    return account.public_id


def client_network(request: Request) -> str:
    """The client as every limit counts it, and as ``/conta`` shows where a session is used: an
    IPv4 address, or an IPv6 address's /64 (one home or phone network hands out a whole /64,
    so counting its addresses one by one would let one network pass for thousands).

    The address is the proxy's view of it only when TRUST_PROXY_HEADERS is on."""
    host = request.client.host if request.client else ""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host or "desconhecido"
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer …`` header (``None`` for any other scheme)."""
    return authorization[7:].strip() if authorization[:7].lower() == "bearer " else None


#: Where requests authenticate by API key only (``app.web.api``): every answer is JSON, and no
#: CSRF token is asked (``app.web.middleware.csrf``). Every route under it is an
#: ``api_endpoint`` (a test of the route table checks it).
API_PREFIX = "/api/"


def wants_json(request: Request) -> bool:
    """JSON for API clients: anything under ``API_PREFIX``, an Accept that prefers JSON, or a
    JSON request body."""
    if request.url.path.startswith(API_PREFIX):
        return True
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/html" not in accept:
        return True
    return request.headers.get("content-type", "").startswith("application/json") and (
        "text/html" not in accept
    )


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def settings_of(request: Request) -> Settings:
    settings: Settings = request.state.settings
    return settings


def db_of(request: Request) -> Database:
    db: Database = request.state.db
    return db


def templates_of(request: Request) -> Jinja2Templates:
    templates: Jinja2Templates = request.state.templates
    return templates


def render(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200, **kwargs: Any
) -> Response:
    return templates_of(request).TemplateResponse(
        request, name, context, status_code=status_code, **kwargs
    )


def error_response(request: Request, status_code: int, message: str, **extra: Any) -> Response:
    """An error as the client wants it: JSON ``{"erro": …}`` or a pt-BR page; never a trace."""
    if wants_json(request):
        return JSONResponse({"erro": message, **extra}, status_code=status_code)
    if is_htmx(request):
        return render(request, "_error.html", {"message": message}, status_code=status_code)
    return render(
        request,
        "error.html",
        {"message": message, "status_code": status_code},
        status_code=status_code,
    )


def too_many_requests(request: Request, message: str, retry_after: int) -> Response:
    """429 with ``Retry-After`` (seconds) and a pt-BR ``message``."""
    response = error_response(request, 429, message)
    response.headers["Retry-After"] = str(retry_after)
    return response
