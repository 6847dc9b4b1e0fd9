"""``POST /convites/{id}/corrigir``: a ``devolvido`` invite goes out again to a corrected address.

Checked and counted like a new invite (an address on the suppression list is refused, and so
is one the sender already has another invite on its way to); its history keeps the bounce.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from app.consent.suppression import refusal_for
from app.invites import transitions
from app.invites.records import Duplicate
from app.invites.status import CORRECTABLE
from app.invites.validation import InvalidInvite, parse_invite
from app.web.common import db_of, error_response
from app.web.forms import BadBody, publish_fast, read_body
from app.web.identity import signed_in
from app.web.invites import (
    accepted,
    already_invited,
    mine_or_404,
    not_in_state,
    over_send_limits,
    refused_after_counting,
    row_form_refused,
)

log = logging.getLogger(__name__)


@signed_in
async def correct(request: Request) -> Response:
    """From ``devolvido`` only: a new attempt to the corrected address; otherwise 409, and 409
    as for a new invite when the sender has another invite on its way to that address."""
    invite = await mine_or_404(request)
    if isinstance(invite, Response):
        return invite
    try:
        data = await read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    try:
        checked = parse_invite({"email": data.get("email"), "nome": invite.name})
    except InvalidInvite as exc:
        return await row_form_refused(
            request, invite, "email", exc.errors.get("email", ""), data.get("email")
        )
    refusal = await refusal_for(db_of(request), checked.email)
    if refusal is not None:
        return await row_form_refused(request, invite, "email", refusal, data.get("email"))
    refused = await over_send_limits(request, checked.email)
    if refused is not None:
        return refused
    change = await transitions.correct_and_resend(
        db_of(request), invite.sender_id, invite.public_id, checked.email
    )
    if change is None or isinstance(change, Duplicate):
        await refused_after_counting(request, checked.email)
        if change is None:
            return not_in_state(request, invite, "corrigir", CORRECTABLE)
        # The corrected address has another invite of this sender on its way.
        return already_invited(request, change.invite)
    log.info(
        "corrected and sent again",
        extra={"invite": invite.public_id, "attempt": change.invite.attempt},
    )
    await publish_fast(request, change)
    return accepted(request, change)
