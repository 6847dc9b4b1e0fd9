"""``POST /convites/{id}/lembrar``: the sender asks for a reminder (Lembrar)."""

from __future__ import annotations

import logging
from datetime import timedelta

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.clock import local_moment, utcnow
from app.consent.suppression import refusal_for
from app.invites import queries
from app.invites.status import Status
from app.invites.transitions import reminders
from app.web.common import db_of, error_response, is_htmx, render, settings_of, wants_json
from app.web.identity import signed_in
from app.web.invites import mine_or_404, not_in_state, row_context
from app.web.present import invite_json

log = logging.getLogger(__name__)


@signed_in
async def remind(request: Request) -> Response:
    """From ``enviado`` only (409 otherwise), at most once per ``REMINDER_MIN_GAP_SECONDS``
    (409 saying from when); 202 and the row saying the reminder was asked for."""
    invite = await mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    # On the suppression list since the invitation went: no reminder either (the worker would
    # refuse it and the history would say "não enviado"). Any other state: its 409 below.
    if invite.status == Status.ENVIADO and (
        refusal := await refusal_for(db_of(request), invite.email)
    ):
        return error_response(request, 422, refusal)
    settings = settings_of(request)
    gap = settings.reminder_min_gap_seconds
    asked = await reminders.request(
        db_of(request), invite.sender_id, invite.public_id, min_gap_seconds=gap
    )
    if asked is None:
        now_invite = await queries.get_invite(db_of(request), invite.sender_id, invite.public_id)
        current = now_invite or invite
        if current.status != Status.ENVIADO:
            return not_in_state(request, current, "lembrar", (Status.ENVIADO,))
        if current.reminder_requested_at is not None or current.reminded_at is None:
            message = "O lembrete já foi pedido e sai em instantes."
        else:
            again = current.reminded_at + timedelta(seconds=gap)
            message = "Você já lembrou esta pessoa. " + (
                f"Dá para lembrar de novo a partir de {local_moment(again)}."
                # Its link was issued moments before it was sent.
                if again
                < reminders.invitation_ends(
                    current, current.sent_at or current.updated_at, settings.invite_ttl_seconds
                )
                else "O convite termina antes de dar para lembrar de novo."
            )
        return error_response(request, 409, message, status=current.status.value)
    log.info("reminder requested", extra={"invite": invite.public_id})
    # No event yet (nothing was sent): the row itself says it was asked for, and the event of
    # the reminder's outcome tells the open pages.
    location = str(URL(f"/convites/{invite.public_id}"))
    if wants_json(request):
        body = invite_json(asked, utcnow(), settings.slow_after_seconds)
        return JSONResponse(body, status_code=202, headers={"Location": location})
    if is_htmx(request):
        last = await queries.invite_history(db_of(request), asked.id)
        context = row_context(request, asked, last[-1].id if last else 0)
        return render(request, "_invite_row.html", context, status_code=202)
    return RedirectResponse(location, status_code=303)
