"""``POST /convites/{id}/reagendar``: the sender moves a scheduled invite to another moment."""

from __future__ import annotations

import logging

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.clock import utcnow
from app.invites import transitions
from app.invites.status import RESCHEDULABLE
from app.invites.validation import check_send_before_occasion
from app.web.common import db_of, error_response, is_htmx, render, settings_of, wants_json
from app.web.forms import BadBody, publish_fast, read_body
from app.web.identity import signed_in
from app.web.invites import (
    mine_or_404,
    not_in_state,
    row_context,
    row_form_refused,
    send_at_of,
)
from app.web.present import invite_json

log = logging.getLogger(__name__)


@signed_in
async def reschedule(request: Request) -> Response:
    """Only while ``agendado`` (409 with the state once it was released or cancelled); a moment
    past, beyond ``SCHEDULE_MAX_DAYS`` or not before the invite's occasion is a 422 and changes
    nothing."""
    invite = await mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    try:
        data = await read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    send_at, problem = send_at_of(request, data)
    if problem is None:
        problem = check_send_before_occasion(send_at, invite.occasion_at)
    if send_at is None or problem is not None:
        message = problem or "Informe a nova data e hora de envio."
        return await row_form_refused(request, invite, "enviar_em", message, data.get("enviar_em"))
    change = await transitions.reschedule(
        db_of(request), invite.sender_id, invite.public_id, send_at
    )
    if change is None:
        return not_in_state(request, invite, "mudar o horário", RESCHEDULABLE)
    log.info("invite rescheduled", extra={"invite": invite.public_id})
    await publish_fast(request, change)
    if wants_json(request):
        slow_after = settings_of(request).slow_after_seconds
        return JSONResponse(invite_json(change.invite, utcnow(), slow_after))
    if is_htmx(request):
        return render(
            request, "_invite_row.html", row_context(request, change.invite, change.event_id)
        )
    return RedirectResponse(str(URL(f"/convites/{invite.public_id}")), status_code=303)
