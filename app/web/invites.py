"""The invite endpoints: accept (202, never "sent"), read the truth, ask again."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from redis.exceptions import RedisError
from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app import invites as transitions
from app import ratelimit
from app.invites import Change, Invite
from app.live import Announcer
from app.logs import correlation_id
from app.queue import EnqueueError, Publisher
from app.status import RESENDABLE
from app.validation import InvalidInvite, parse_invite
from app.web.common import (
    client_address,
    db_of,
    error_response,
    is_htmx,
    render,
    sender_id,
    settings_of,
    too_many_requests,
    wants_json,
)
from app.web.csrf import csrf_token
from app.web.present import event_json, invite_json

log = logging.getLogger(__name__)

PAGE_SIZE = 20


class BadBody(ValueError):
    """The request body is not something we can read (malformed JSON, not an object)."""


async def _read_body(request: Request) -> dict[str, Any]:
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            data = json.loads(await request.body())
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise BadBody("O corpo da requisição não é um JSON válido.") from None
        if not isinstance(data, dict):
            raise BadBody('Envie um objeto JSON, por exemplo {"email": "ana@exemplo.com"}.')
        return data
    form = await request.form()
    return {key: value for key, value in form.items() if isinstance(value, str)}


async def _publish_fast(request: Request, change: Change) -> None:
    """Enqueue right after the commit; if Redis is down the outbox relay does it later."""
    publisher: Publisher = request.state.publisher
    try:
        await publisher.publish(change)
    except (RedisError, OSError, EnqueueError) as exc:
        log.warning(
            "enqueue failed; the outbox relay will publish",
            extra={"invite": change.invite.public_id, "error": str(exc)},
        )
    announcer: Announcer = request.state.announcer
    await announcer.announce(change)


def _accepted(request: Request, change: Change, *, fresh_form: bool = False) -> Response:
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
                **_row_context(request, invite, change.event_id),
                "fresh_form": fresh_form,
                "errors": {},
                "values": {},
            },
            status_code=202,
            headers={"Location": location},
        )
    return RedirectResponse(location, status_code=303)


def _row_context(request: Request, invite: Invite, event_id: int) -> dict[str, Any]:
    return {
        "invite": invite,
        "event_id": event_id,
        "now": transitions.utcnow(),
        "settings": settings_of(request),
    }


_LIMIT_MESSAGES = {
    "sender_minute": "Você enviou muitos convites em pouco tempo. Tente de novo em {wait}.",
    "address_minute": "Muitos convites saindo da sua rede agora. Tente de novo em {wait}.",
    "sender_day": "Você chegou ao limite de {limit} convites por dia. Tente de novo em {wait}.",
}


def _wait_text(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} segundos"
    if seconds < 2 * 3600:
        return f"{-(-seconds // 60)} minutos"
    return f"{-(-seconds // 3600)} horas"


async def _over_limit(request: Request) -> Response | None:
    """429 when this send would pass a rate limit (nothing is counted or written then)."""
    limits = ratelimit.send_limits(
        settings_of(request), sender_id(request), client_address(request)
    )
    refusal = await ratelimit.take(request.state.redis, limits)
    if refusal is None:
        return None
    message = _LIMIT_MESSAGES[refusal.limit.kind].format(
        wait=_wait_text(refusal.retry_after), limit=refusal.limit.limit
    )
    return too_many_requests(request, message, refusal.retry_after)


async def create(request: Request) -> Response:
    """POST /convites: validate, write the row + event + outbox, enqueue, answer 202."""
    try:
        data = await _read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    try:
        invite_request = parse_invite(data)
    except InvalidInvite as exc:
        return await _invalid(request, data, exc.errors)
    refused = await _over_limit(request)
    if refused is not None:
        return refused
    change = await transitions.create_invite(
        db_of(request),
        sender_id=sender_id(request),
        email=invite_request.email,
        name=invite_request.name,
        correlation_id=correlation_id.get() or "",
    )
    log.info("invite accepted", extra={"invite": change.invite.public_id})
    await _publish_fast(request, change)
    return _accepted(request, change, fresh_form=True)


async def _invalid(request: Request, data: dict[str, Any], errors: dict[str, str]) -> Response:
    if wants_json(request):
        return JSONResponse({"erro": "Confira os campos.", "campos": errors}, status_code=422)
    values = {
        key: data.get(key) if isinstance(data.get(key), str) else "" for key in ("email", "nome")
    }
    if is_htmx(request):
        # The form posts with hx-swap="none" (the row goes to the list); errors replace the form.
        return render(
            request,
            "_form.html",
            {"errors": errors, "values": values},
            status_code=422,
            headers={"HX-Retarget": "#form-convite", "HX-Reswap": "outerHTML"},
        )
    context = await _index_context(request)
    context.update(errors=errors, values=values)
    return render(request, "index.html", context, status_code=422)


async def _list_context(request: Request, before: int | None = None) -> dict[str, Any]:
    """A page of "Meus convites" and what its live updates need to resume from it."""
    db, sender, settings = db_of(request), sender_id(request), settings_of(request)
    # The cursor is read before the rows, so the stream re-sends (never skips) what lands between.
    cursor = await transitions.last_event_id(db, sender)
    rows = await transitions.list_invites(db, sender, before=before, limit=PAGE_SIZE)
    return {
        "invites": rows,
        "event_ids": await transitions.latest_event_ids(db, [row.id for row in rows]),
        "cursor": cursor,
        "first_page": before is None,
        "paused": await request.state.paused(),
        "now": transitions.utcnow(),
        "settings": settings,
        "next_before": rows[-1].id if len(rows) == PAGE_SIZE else None,
    }


async def _index_context(request: Request) -> dict[str, Any]:
    context = await _list_context(request)
    context.update(errors={}, values={"email": "", "nome": ""})
    return context


async def index(request: Request) -> Response:
    """GET /: the form and "Meus convites"."""
    return render(request, "index.html", await _index_context(request))


def _before(request: Request) -> int | None:
    raw = request.query_params.get("antes", "")
    # ASCII digits only, and small enough for any database's integer.
    return int(raw) if re.fullmatch(r"[0-9]{1,18}", raw) else None


async def list_mine(request: Request) -> Response:
    """GET /convites: this sender's invites, newest first, in pages of ``PAGE_SIZE``."""
    before = _before(request)
    if wants_json(request):
        rows = await transitions.list_invites(
            db_of(request), sender_id(request), before=before, limit=PAGE_SIZE
        )
        next_before = rows[-1].id if len(rows) == PAGE_SIZE else None
        now = transitions.utcnow()
        settings = settings_of(request)
        return JSONResponse(
            {
                "convites": [invite_json(row, now, settings.slow_after_seconds) for row in rows],
                "proxima_pagina": f"/convites?antes={next_before}" if next_before else None,
                # JSON clients send this back in X-CSRF-Token on every POST.
                "csrf_token": csrf_token(request),
            }
        )
    return render(request, "list.html", await _list_context(request, before))


async def _mine_or_404(request: Request) -> Invite | Response:
    invite = await transitions.get_invite(
        db_of(request), sender_id(request), request.path_params["public_id"]
    )
    if invite is None:
        return error_response(request, 404, "Convite não encontrado.")
    return invite


async def show(request: Request) -> Response:
    """GET /convites/{id}: the truth about one invite, with its history."""
    invite = await _mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    db = db_of(request)
    # The stream's cursor is read before the row it resumes from (see _list_context).
    cursor = await transitions.last_event_id(db, invite.sender_id)
    invite = await transitions.get_invite(db, invite.sender_id, invite.public_id) or invite
    history = await transitions.invite_history(db, invite.id)
    now = transitions.utcnow()
    settings = settings_of(request)
    if wants_json(request):
        body = invite_json(invite, now, settings.slow_after_seconds)
        body["historico"] = [event_json(event) for event in history]
        return JSONResponse(body)
    context = _row_context(request, invite, history[-1].id if history else 0)
    if is_htmx(request):
        return render(request, "_invite_row.html", context)
    paused = await request.state.paused()
    context.update(history=history, cursor=cursor, paused=paused)
    return render(request, "invite.html", context)


async def resend(request: Request) -> Response:
    """POST /convites/{id}/reenviar: from ``falhou`` or ``incerto`` only; one attempt per click."""
    invite = await _mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    refused = await _over_limit(request)
    if refused is not None:
        return refused
    change = await transitions.request_resend(db_of(request), invite.sender_id, invite.public_id)
    if change is None:
        allowed = " ou ".join(status.value for status in RESENDABLE)
        return error_response(
            request,
            409,
            f"Este convite está {invite.status.value}; só dá para reenviar quando está {allowed}.",
            status=invite.status.value,
        )
    log.info(
        "resend requested", extra={"invite": invite.public_id, "attempt": change.invite.attempt}
    )
    await _publish_fast(request, change)
    return _accepted(request, change)
