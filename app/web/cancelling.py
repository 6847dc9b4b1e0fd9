"""``POST /convites/{id}/cancelar``: the sender calls off an invite that has no answer yet."""

from __future__ import annotations

import logging

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.clock import utcnow
from app.invites import transitions
from app.invites.status import CANCELLABLE, Status
from app.invites.transitions.reminders import ReminderStatus
from app.web.common import db_of, error_response, is_htmx, render, settings_of, wants_json
from app.web.forms import publish_fast
from app.web.identity import signed_in
from app.web.invites import mine_or_404, not_in_state, row_context
from app.web.present import invite_json

log = logging.getLogger(__name__)


@signed_in
async def cancel(request: Request) -> Response:
    """From a state with no answer yet (and not mid-send); otherwise 409 with the state."""
    invite = await mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    change = await transitions.cancel(db_of(request), invite.sender_id, invite.public_id)
    if change is None:
        busy = None
        if invite.status == Status.ENVIANDO:
            busy = "Este convite está sendo enviado agora."
        elif invite.reminder_status == ReminderStatus.SENDING:
            busy = "O lembrete deste convite está sendo enviado agora."
        if busy is not None:
            message = f"{busy} Tente cancelar de novo em instantes."
            return error_response(request, 409, message, status=invite.status.value)
        return not_in_state(request, invite, "cancelar", CANCELLABLE)
    log.info("invite cancelled", extra={"invite": invite.public_id})
    await publish_fast(request, change)
    if wants_json(request):
        slow_after = settings_of(request).slow_after_seconds
        return JSONResponse(invite_json(change.invite, utcnow(), slow_after))
    if is_htmx(request):
        context = row_context(request, change.invite, change.event_id)
        return render(request, "_invite_row.html", context)
    return RedirectResponse(str(URL(f"/convites/{invite.public_id}")), status_code=303)
