"""Signing in by link: ask for it, open it, press **Entrar**; name yourself; sign out.

The link goes out through the same outbox, worker and states as an invite (a row of kind
``acesso`` scoped to this browser, never listed in "Meus convites"), so the page tells the same
truth: "Recebemos, enviando o link…", then sent, or the reason it failed.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app import ratelimit
from app.accounts import signin
from app.accounts import store as accounts
from app.clock import utcnow
from app.invites import queries, transitions
from app.invites.records import SIGNIN_MAIL, Change
from app.invites.validation import check_email, check_name
from app.logs import correlation_id
from app.web.common import (
    client_network,
    db_of,
    error_response,
    is_htmx,
    render,
    settings_of,
    too_many_requests,
    visitor_id,
    wants_json,
)
from app.web.forms import (
    BadBody,
    invalid_form,
    publish_fast,
    read_body,
    typed_values,
    wait_text,
)
from app.web.identity import begin_session, end_session, identify, signed_in
from app.web.middleware.csrf import csrf_token
from app.web.open_sessions import ENDED, SIGN_OUT_NOTICES, open_sessions
from app.web.present import invite_json
from app.webhooks import store as webhook_store

log = logging.getLogger(__name__)

MISSING_EMAIL = "Informe seu e-mail para receber o link de acesso."
LINK_USED = (
    "Este link de acesso não vale mais",
    "Cada link entra uma vez só. Quando você entra com um deles, os outros links enviados para o "
    "seu e-mail param de valer.",
)
LINK_EXPIRED = ("Este link de acesso expirou", "Os links valem por pouco tempo, por segurança.")
LINK_UNKNOWN = ("Este link de acesso não é válido", "Confira se o endereço veio inteiro.")
_LIMIT_MESSAGES = {
    "signin_address": "Já enviamos vários links para este e-mail. Tente de novo em {wait}.",
    "signin_client": "Muitos pedidos de acesso saindo da sua rede. Tente de novo em {wait}.",
}


async def _page_context(request: Request) -> dict[str, Any]:
    """This browser's sign-in mails, live (the stream is scoped to the browser's id)."""
    settings = settings_of(request)
    page = await queries.invite_page(db_of(request), visitor_id(request), kind=SIGNIN_MAIL)
    return {
        "invites": page.invites,
        "event_ids": page.event_ids,
        "cursor": page.cursor,
        "paused": await request.state.paused.now(),
        "now": utcnow(),
        "settings": settings,
        "errors": {},
        "values": {"email": ""},
    }


async def sign_in_page(request: Request, status_code: int = 200, **extra: Any) -> Response:
    """The sign-in form and this browser's link requests (``/entrar``, and ``/`` signed out)."""
    context = await _page_context(request)
    context.update(extra)
    return render(request, "entrar.html", context, status_code=status_code)


async def show_form(request: Request) -> Response:
    """GET /entrar (JSON: the CSRF token a client sends with ``POST /entrar``)."""
    if wants_json(request):
        return JSONResponse({"csrf_token": csrf_token(request)})
    if await identify(request) is not None:
        return RedirectResponse("/", status_code=303)
    return await sign_in_page(
        request, notice=SIGN_OUT_NOTICES.get(request.query_params.get("saiu", ""))
    )


async def _over_limit(request: Request, email: str) -> Response | None:
    limits = ratelimit.signin_limits(settings_of(request), email, client_network(request))
    refusal = await ratelimit.take(request.state.redis, limits)
    if refusal is None:
        return None
    message = _LIMIT_MESSAGES[refusal.limit.kind].format(wait=wait_text(refusal.retry_after))
    return too_many_requests(request, message, refusal.retry_after)


async def request_link(request: Request) -> Response:
    """POST /entrar: write the sign-in mail (pendente) + its outbox row, enqueue, answer 202."""
    try:
        data = await read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    email, error = check_email(data.get("email"), missing=MISSING_EMAIL)
    if email is None:
        return await _invalid(request, data, {"email": error or MISSING_EMAIL})
    refused = await _over_limit(request, email)
    if refused is not None:
        return refused
    change = await transitions.create_invite(
        db_of(request),
        sender_id=visitor_id(request),
        email=email,
        name=None,
        correlation_id=correlation_id.get() or "",
        kind=SIGNIN_MAIL,
    )
    assert isinstance(change, Change)  # only invitations can be duplicates
    log.info("sign-in link requested", extra={"invite": change.invite.public_id})
    await publish_fast(request, change)
    return _accepted(request, change)


def _accepted(request: Request, change: Change) -> Response:
    mail = change.invite
    location = str(URL(f"/entrar/pedido/{mail.public_id}"))
    if wants_json(request):
        body = invite_json(mail, mail.updated_at, settings_of(request).slow_after_seconds)
        return JSONResponse(body, status_code=202, headers={"Location": location})
    if is_htmx(request):
        context = {
            "invite": mail,
            "event_id": change.event_id,
            "fresh_form": True,
            "errors": {},
            "values": {},
        }
        return render(
            request,
            "_signin_accepted.html",
            context,
            status_code=202,
            headers={"Location": location},
        )
    return RedirectResponse(location, status_code=303)


async def _invalid(request: Request, data: dict[str, Any], errors: dict[str, str]) -> Response:
    values = typed_values(data, "email")
    answer = invalid_form(request, errors, values, "_signin_form.html", "form-entrar")
    return answer or await sign_in_page(request, 422, errors=errors, values=values)


async def show_request(request: Request) -> Response:
    """GET /entrar/pedido/{id}: how this browser's sign-in mail is doing (the no-JS page)."""
    mail = await queries.get_invite(
        db_of(request), visitor_id(request), request.path_params["public_id"], kind=SIGNIN_MAIL
    )
    if mail is None:
        return error_response(request, 404, "Pedido de acesso não encontrado.")
    context = await _page_context(request)
    context["invites"] = [mail]
    return render(request, "entrar.html", context)


def _invalid_link(request: Request, state: signin.LinkState | None, email: str | None) -> Response:
    texts = {signin.LinkState.USED: LINK_USED, signin.LinkState.EXPIRED: LINK_EXPIRED}
    heading, message = LINK_UNKNOWN if state is None else texts.get(state, LINK_UNKNOWN)
    context = {"heading": heading, "message": message, "email": email}
    status = 404 if state is None else 410
    if wants_json(request):
        return JSONResponse({"erro": f"{heading}. {message}"}, status_code=status)
    return render(request, "entrar_invalido.html", context, status_code=status)


async def open_link(request: Request) -> Response:
    """GET /entrar/{token}: the **Entrar** button; nothing is spent by opening it."""
    token = request.path_params["token"]
    link = await signin.peek(db_of(request), token)
    if link is None or link.state != signin.LinkState.VALID:
        return _invalid_link(request, link.state if link else None, link.email if link else None)
    return render(request, "entrar_link.html", {"email": link.email, "token": token})


async def use_link(request: Request) -> Response:
    """POST /entrar/{token}: spend the link, sign in (a new session and cookie), go home."""
    db, token = db_of(request), request.path_params["token"]
    email = await signin.redeem(db, token)
    if email is None:
        link = await signin.peek(db, token)
        return _invalid_link(request, link.state if link else None, link.email if link else None)
    account = await accounts.find_or_create_account(db, email)
    await begin_session(request, account)
    log.info("signed in", extra={"account": account.public_id})
    target = "/" if account.name else "/conta?primeira=1"
    if wants_json(request):
        return JSONResponse({"conta": account.email, "ir_para": target})
    return RedirectResponse(target, status_code=303)


async def _account_page(
    request: Request, first: bool, errors: dict[str, str], values: dict[str, str], status: int
) -> Response:
    """``/conta``: the name invitations show, then this account's open sessions."""
    context = {
        "account": request.state.account,
        "first": first,
        "errors": errors,
        "values": values,
        "open_sessions": await open_sessions(request),
        "notice": ENDED if request.query_params.get("encerrada") == "1" else None,
        "disabled_webhooks": await webhook_store.disabled_count(
            db_of(request), request.state.account.id
        ),
    }
    return render(request, "conta.html", context, status_code=status)


@signed_in
async def show_account(request: Request) -> Response:
    """GET /conta: the name invitations show, and where this account is signed in."""
    account = request.state.account
    first = request.query_params.get("primeira") == "1" or account.name is None
    return await _account_page(request, first, {}, {"nome": account.name}, 200)


@signed_in
async def save_account(request: Request) -> Response:
    """POST /conta: **Seu nome** (required)."""
    account = request.state.account
    try:
        data = await read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    name, error = check_name(data.get("nome"))
    if name is None:
        errors = {"nome": error or "Informe o nome que vai aparecer nos seus convites."}
        if wants_json(request):
            return JSONResponse({"erro": "Confira os campos.", "campos": errors}, status_code=422)
        raw = data.get("nome")
        values = {"nome": raw if isinstance(raw, str) else ""}
        return await _account_page(request, account.name is None, errors, values, 422)
    await accounts.set_name(db_of(request), account.id, name)
    if wants_json(request):
        return JSONResponse({"nome": name})
    return RedirectResponse("/", status_code=303)


async def sign_out(request: Request) -> Response:
    """POST /sair: the session ends on the server; the browser goes back to the sign-in page."""
    await end_session(request)
    if wants_json(request):
        return JSONResponse({"saiu": True})
    return RedirectResponse("/entrar", status_code=303)
