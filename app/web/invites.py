"""The invite endpoints: accept (202, never "sent"), read the truth, ask again."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app import ratelimit
from app.bounces.history import bounces_of
from app.clock import utcnow
from app.consent.suppression import refusal_for
from app.invites import queries, transitions
from app.invites.records import Account, Change, Duplicate, Invite, Occasion
from app.invites.status import RESENDABLE, WHERE_IT_IS, Status
from app.invites.validation import (
    InvalidInvite,
    check_occasion,
    check_send_at,
    check_send_before_occasion,
    parse_invite,
    shown_email,
)
from app.logs import correlation_id
from app.web.common import (
    client_network,
    db_of,
    error_response,
    is_htmx,
    render,
    sender_id,
    settings_of,
    too_many_requests,
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
from app.web.identity import identify, signed_in
from app.web.middleware.csrf import csrf_token
from app.web.present import invite_detail_json, invite_json
from app.web.signin import sign_in_page
from app.web.summary import chosen_filter, summary_of

log = logging.getLogger(__name__)


def accepted(request: Request, change: Change, *, fresh_form: bool = False) -> Response:
    """202 with a Location for JS and API clients; 303 to the status page for a plain form."""
    invite = change.invite
    location = str(URL(f"/convites/{invite.public_id}"))
    if wants_json(request):
        body = invite_json(invite, invite.updated_at, settings_of(request).slow_after_seconds)
        return JSONResponse(body, status_code=202, headers={"Location": location})
    if is_htmx(request):
        return render(
            request,
            "_accepted.html",
            {
                **row_context(request, invite, change.event_id),
                "fresh_form": fresh_form,
                "errors": {},
                "values": {},
            },
            status_code=202,
            headers={"Location": location},
        )
    return RedirectResponse(location, status_code=303)


def row_context(request: Request, invite: Invite, event_id: int) -> dict[str, Any]:
    """What ``_invite_row.html`` needs to render one row."""
    return {
        "invite": invite,
        "event_id": event_id,
        "now": utcnow(),
        "settings": settings_of(request),
    }


_LIMIT_MESSAGES = {
    "sender_minute": "Você enviou muitos convites em pouco tempo. Tente de novo em {wait}.",
    "address_minute": "Muitos convites saindo da sua rede agora. Tente de novo em {wait}.",
    "sender_day": "Você chegou ao limite de {limit} convites por dia. Tente de novo em {wait}.",
    "recipient_day": (
        "Este endereço já recebeu {limit} convites hoje, de todos os remetentes. "
        "Tente de novo em {wait}."
    ),
}


async def over_send_limits(request: Request, recipient: str) -> Response | None:
    """429 when this send would pass a rate limit (nothing is counted or written then)."""
    limits = ratelimit.send_limits(
        settings_of(request), sender_id(request), client_network(request), recipient
    )
    refusal = await ratelimit.take(request.state.redis, limits)
    if refusal is None:
        return None
    message = _LIMIT_MESSAGES[refusal.limit.kind].format(
        wait=wait_text(refusal.retry_after), limit=refusal.limit.limit
    )
    return too_many_requests(request, message, refusal.retry_after)


async def refused_after_counting(request: Request, recipient: str) -> None:
    """A send that ``over_send_limits`` counted but that wrote nothing (409) hands back its unit
    of the recipient's day: only invites written count toward an address's daily limit. The
    sender's and the network's own limits keep it: refusals still cost their requester."""
    limit = ratelimit.recipient_limit(settings_of(request), recipient)
    await ratelimit.give_back(request.state.redis, [limit])


def duplicate_message(existing: Invite) -> str:
    return (
        f"Você já convidou {shown_email(existing.email)} e o convite "
        f"{WHERE_IT_IS[existing.status]}. "
        "Acompanhe o convite existente em vez de enviar outro."
    )


def already_invited(request: Request, existing: Invite) -> Response:
    """409: this sender's invite to that address is still on its way (or arrived): a new
    invite, a resend and a correction to that address all answer it."""
    location = f"/convites/{existing.public_id}"
    message = duplicate_message(existing)
    if wants_json(request):
        return JSONResponse(
            {"erro": message, "convite": location, "status": existing.status.value},
            status_code=409,
            headers={"Location": location},
        )
    return render(
        request,
        "_error.html" if is_htmx(request) else "error.html",
        {"message": message, "status_code": 409, "link": location},
        status_code=409,
    )


@signed_in
async def create(request: Request) -> Response:
    """POST /convites: validate, write the row + event + outbox, enqueue, answer 202."""
    try:
        data = await read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    send_at, occasion, errors = when_and_occasion(request, data)
    if _json_body(request):
        # A program's typo ("mensgem") would otherwise send the invite without its message.
        errors |= {key: UNKNOWN_FIELD for key in data if key not in FORM_FIELDS}
    try:
        invite_request = parse_invite(data)
    except InvalidInvite as exc:
        return await _invalid(request, data, {**exc.errors, **errors})
    if errors:
        return await _invalid(request, data, errors)
    db, account = db_of(request), request.state.account
    refusal = await refusal_for(db, invite_request.email)
    if refusal is not None:
        # On the suppression list: refused like a bad address, before anything is counted.
        return await _invalid(request, data, {"email": refusal})
    refused = await over_send_limits(request, invite_request.email)
    if refused is not None:
        return refused
    change = await transitions.create_invite(
        db,
        sender_id=account.public_id,
        email=invite_request.email,
        name=invite_request.name,
        correlation_id=correlation_id.get() or "",
        sender_name=account.name,
        sender_email=account.email,
        message=invite_request.message,
        send_at=send_at,
        occasion=occasion,
    )
    if isinstance(change, Duplicate):
        await refused_after_counting(request, invite_request.email)
        if wants_json(request) or is_htmx(request):
            return already_invited(request, change.invite)
        # Without JavaScript: the form again as typed, the reason and the invite at E-mail.
        errors = {"email": duplicate_message(change.invite)}
        existing = f"/convites/{change.invite.public_id}"
        return await _form_page(request, data, errors, 409, existing=existing)
    log.info("invite accepted", extra={"invite": change.invite.public_id})
    await publish_fast(request, change)
    return accepted(request, change, fresh_form=True)


#: The fields of the invite form, as typed (shown again after a refusal); a JSON body has these.
FORM_FIELDS = ("email", "nome", "mensagem", "enviar_em", "ocasiao", "ocasiao_em", "ocasiao_local")
UNKNOWN_FIELD = f"Este campo não existe. Os campos de um convite são: {', '.join(FORM_FIELDS)}."


def _json_body(request: Request) -> bool:
    return request.headers.get("content-type", "").startswith("application/json")


def when_and_occasion(
    request: Request, data: dict[str, Any]
) -> tuple[datetime | None, Occasion | None, dict[str, str]]:
    """ "Enviar em" and the occasion, as the single form and a batch both take them: the moment,
    the occasion, and the pt-BR error of each field that is wrong (a moment not before the
    occasion included)."""
    send_at, send_at_error = send_at_of(request, data)
    occasion, errors = check_occasion(data, utcnow(), local=not _json_body(request))
    if send_at_error is None and occasion is not None:
        send_at_error = check_send_before_occasion(send_at, occasion.at)
    if send_at_error is not None:
        errors["enviar_em"] = send_at_error
    return send_at, occasion, errors


def send_at_of(request: Request, data: dict[str, Any]) -> tuple[datetime | None, str | None]:
    """The optional "Enviar em" of a form (São Paulo time) or ``enviar_em`` of a JSON body
    (with its offset), checked against now and ``SCHEDULE_MAX_DAYS``."""
    max_days = settings_of(request).schedule_max_days
    return check_send_at(data.get("enviar_em"), utcnow(), max_days, local=not _json_body(request))


async def _invalid(request: Request, data: dict[str, Any], errors: dict[str, str]) -> Response:
    values = typed_values(data, *FORM_FIELDS)
    answer = invalid_form(request, errors, values, "_form.html", "form-convite")
    if answer is not None:
        return answer
    return await _form_page(request, data, errors, 422)


async def _form_page(
    request: Request, data: dict[str, Any], errors: dict[str, str], status: int, **more: Any
) -> Response:
    """The whole page for a plain form refused: the form as typed, each reason at its field."""
    context = await _index_context(request)
    context.update(errors=errors, values=typed_values(data, *FORM_FIELDS), **more)
    return render(request, "index.html", context, status_code=status)


async def _list_context(request: Request, before: int | None = None) -> dict[str, Any]:
    """A page of "Meus convites" and what its live updates need to resume from it."""
    settings = settings_of(request)
    chosen = chosen_filter(request)
    page = await queries.invite_page(
        db_of(request), sender_id(request), before=before, statuses=chosen.statuses
    )
    return {
        "chosen": chosen,
        "summary": await summary_of(request),
        "list_url": "/" if request.url.path == "/" else "/convites",
        "invites": page.invites,
        "event_ids": page.event_ids,
        "cursor": page.cursor,
        "first_page": before is None,
        "paused": await request.state.paused.now(),
        "now": utcnow(),
        "settings": settings,
        "next_before": page.next_before,
    }


async def _index_context(request: Request) -> dict[str, Any]:
    context = await _list_context(request)
    context.update(errors={}, values=dict.fromkeys(FORM_FIELDS, ""))
    return context


async def index(request: Request) -> Response:
    """GET /: the form and "Meus convites"; signed out, what Convites is and the sign-in form."""
    account: Account | None = await identify(request)
    if account is None:
        return await sign_in_page(request)
    return render(request, "index.html", await _index_context(request))


def _before(request: Request) -> int | None:
    raw = request.query_params.get("antes", "")
    # ASCII digits only, and small enough for any database's integer.
    return int(raw) if re.fullmatch(r"[0-9]{1,18}", raw) else None


@signed_in
async def list_mine(request: Request) -> Response:
    """GET /convites: this sender's invites, newest first, in pages of
    ``app.invites.queries.PAGE_SIZE``."""
    before = _before(request)
    if wants_json(request):
        chosen = chosen_filter(request)
        page = await queries.invite_page(
            db_of(request), sender_id(request), before=before, statuses=chosen.statuses
        )
        now = utcnow()
        slow_after = settings_of(request).slow_after_seconds
        next_before = page.next_before
        return JSONResponse(
            {
                "convites": [invite_json(row, now, slow_after) for row in page.invites],
                "proxima_pagina": f"/convites?antes={next_before}" if next_before else None,
                # JSON clients send this back in X-CSRF-Token on every POST.
                "csrf_token": csrf_token(request),
            }
        )
    return render(request, "list.html", await _list_context(request, before))


def not_in_state(
    request: Request, invite: Invite, action: str, allowed: Sequence[Status]
) -> Response:
    """409: this action is only for invites in ``allowed`` (a double click's second request,
    or a page older than the row, lands here), saying the state it is in."""
    # Status words as names ("falhou" is no adjective: "está falhou" would not read).
    *first, last = [f"“{status.value}”" for status in allowed]
    states = f"{', '.join(first)} ou {last}" if first else last
    return error_response(
        request,
        409,
        f"O status deste convite é “{invite.status.value}”; só dá para {action} com o status "
        f"{states}.",
        status=invite.status.value,
    )


#: Someone else's invite reads the same: nothing says it exists.
NOT_FOUND = "Este convite não foi encontrado: talvez tenha sido apagado."


async def mine_or_404(request: Request) -> Invite | Response:
    invite = await queries.get_invite(
        db_of(request), sender_id(request), request.path_params["public_id"]
    )
    if invite is None:
        return error_response(request, 404, NOT_FOUND)
    return invite


@signed_in
async def show(request: Request) -> Response:
    """GET /convites/{id}: the truth about one invite, with its history."""
    invite = await mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    db = db_of(request)
    # The stream's cursor is read before the row it resumes from (see _list_context).
    cursor = await queries.last_event_id(db, invite.sender_id)
    invite = await queries.get_invite(db, invite.sender_id, invite.public_id) or invite
    history = await queries.invite_history(db, invite.id)
    now = utcnow()
    settings = settings_of(request)
    if wants_json(request):
        bounces = await bounces_of(db, invite.id)
        return JSONResponse(
            invite_detail_json(invite, history, bounces, now, settings.slow_after_seconds)
        )
    context = row_context(request, invite, history[-1].id if history else 0)
    if is_htmx(request):
        return render(request, "_invite_row.html", context)
    return await _invite_page(request, context, history, cursor)


async def _invite_page(
    request: Request,
    context: dict[str, Any],
    history: Sequence[Any],
    cursor: int,
    status_code: int = 200,
) -> Response:
    """``invite.html``: the row in ``context``, its history and bounces, live from ``cursor``."""
    context.update(
        history=history,
        cursor=cursor,
        paused=await request.state.paused.now(),
        bounces=await bounces_of(db_of(request), context["invite"].id),
    )
    return render(request, "invite.html", context, status_code=status_code)


async def row_form_refused(
    request: Request, invite: Invite, field: str, message: str, value: object
) -> Response:
    """422 for a row's own form (Corrigir e reenviar, Mudar horário): nothing changed. The row
    comes back with that form open, what was typed kept and the message next to its field
    (htmx swaps it in place of the row; app.js focuses the field and says the message once);
    without JavaScript, the invite's page with that row; an API client gets ``campos``."""
    if wants_json(request):
        return JSONResponse({"erro": "Confira os campos.", "campos": {field: message}}, 422)
    db = db_of(request)
    cursor = await queries.last_event_id(db, invite.sender_id)
    history = await queries.invite_history(db, invite.id)
    context = row_context(request, invite, history[-1].id if history else 0)
    context.update(row_error=message, row_value=value if isinstance(value, str) else "")
    if is_htmx(request):
        headers = {"HX-Retarget": f"#convite-{invite.public_id}", "HX-Reswap": "outerHTML"}
        return render(request, "_invite_row.html", context, status_code=422, headers=headers)
    return await _invite_page(request, context, history, cursor, status_code=422)


@signed_in
async def resend(request: Request) -> Response:
    """POST /convites/{id}/reenviar: from ``RESENDABLE`` only, one attempt per click, and not
    while the sender has another invite on its way to the address (409, as a new invite)."""
    invite = await mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    refusal = await refusal_for(db_of(request), invite.email)
    if refusal is not None:
        return error_response(request, 422, refusal)
    refused = await over_send_limits(request, invite.email)
    if refused is not None:
        return refused
    change = await transitions.request_resend(db_of(request), invite.sender_id, invite.public_id)
    if change is None or isinstance(change, Duplicate):
        await refused_after_counting(request, invite.email)
        if change is None:
            return not_in_state(request, invite, "reenviar", RESENDABLE)
        # Another invite to the address was written since this one stopped.
        return already_invited(request, change.invite)
    log.info(
        "resend requested", extra={"invite": invite.public_id, "attempt": change.invite.attempt}
    )
    await publish_fast(request, change)
    return accepted(request, change)
