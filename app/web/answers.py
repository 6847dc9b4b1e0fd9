"""The invitee's link, ``/c/{token}``: who invites, their message, **Aceitar convite** and
**Recusar**. No account needed, no JavaScript needed (plain forms, CSRF protected).

Opening it (GET) changes nothing. **Aceitar convite** records ``aceito`` and signs the invitee
in as the invited address (the link proves they read that inbox); **Recusar** records
``recusado`` and leaves a way to accept while the link is valid. Each answer is one conditional
UPDATE (``app.invites.transitions.answered``): a second click, a replaced or closed link records
nothing
and reads what is true now. A replaced, cancelled or expired link answers 410.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.accounts import store as accounts
from app.invites import links as invite_links
from app.invites import transitions
from app.invites.links import GONE, LinkState, OpenedLink
from app.invites.records import Change
from app.invites.validation import same_address
from app.live.wakeups import Announcer
from app.web.common import db_of, render, settings_of, wants_json
from app.web.identity import begin_session, identify

log = logging.getLogger(__name__)

UNKNOWN = (
    "Link de convite não encontrado",
    "Confira se o endereço está completo, como no e-mail. Se não funcionar, peça um novo "
    "convite a quem convidou você.",
)


def _status_code(state: LinkState) -> int:
    if state in GONE:
        return 410
    return 409 if state == LinkState.NOT_READY else 200


async def _page(request: Request, token: str, link: OpenedLink | None) -> Response:
    """The page of the link as it is now: the invitation, the answer given, or why it closed."""
    if link is None:
        heading, message = UNKNOWN
        if wants_json(request):
            return JSONResponse({"erro": f"{heading}. {message}"}, status_code=404)
        return render(
            request,
            "convite_desconhecido.html",
            {"heading": heading, "message": message},
            status_code=404,
        )
    status_code = _status_code(link.state)
    if wants_json(request):
        invite = link.invite
        return JSONResponse(
            {
                "estado": link.state.value,
                "remetente": {"nome": invite.sender_name, "email": invite.sender_email},
                "mensagem": invite.message,
            },
            status_code=status_code,
        )
    me = await identify(request)
    context = {
        "link": link,
        "invite": link.invite,
        "token": token,
        "state": link.state.value,
        # "Você entrou como …" only where it is true: this browser is the invitee's.
        "signed_in_here": me is not None and me.email == same_address(link.invite.email),
    }
    return render(request, "convite_publico.html", context, status_code=status_code)


async def _opened(request: Request, token: str) -> OpenedLink | None:
    return await invite_links.open_link(
        db_of(request), token, settings_of(request).invite_ttl_seconds
    )


async def show(request: Request) -> Response:
    """GET /c/{token}: nothing is recorded by opening it (mail scanners prefetch links)."""
    token = request.path_params["token"]
    return await _page(request, token, await _opened(request, token))


async def _announce(request: Request, change: Change) -> None:
    announcer: Announcer = request.state.announcer
    await announcer.announce(change)


async def accept(request: Request) -> Response:
    """POST /c/{token}/aceitar: ``aceito``, the invitee signed in, and home with a sentence."""
    token = request.path_params["token"]
    db, settings = db_of(request), settings_of(request)
    change = await transitions.accept(db, token, settings.invite_ttl_seconds)
    if change is None:  # answered already, or the link closed: say what is true now
        return await _page(request, token, await _opened(request, token))
    invite = change.invite
    log.info("invite accepted by the invitee", extra={"invite": invite.public_id})
    await _announce(request, change)
    account = await accounts.find_or_create_account(db, invite.email)
    if account.name is None and invite.name:
        await accounts.set_name(db, account.id, invite.name)
        account = await accounts.find_or_create_account(db, invite.email)
    await begin_session(request, account)
    target = f"/?aceito={invite.public_id}"
    if wants_json(request):
        return JSONResponse({"estado": LinkState.ACCEPTED.value, "ir_para": target})
    return RedirectResponse(target, status_code=303)


async def decline(request: Request) -> Response:
    """POST /c/{token}/recusar: ``recusado`` (no sign-in); the page then offers to accept."""
    token = request.path_params["token"]
    change = await transitions.decline(
        db_of(request), token, settings_of(request).invite_ttl_seconds
    )
    if change is not None:
        log.info("invite declined by the invitee", extra={"invite": change.invite.public_id})
        await _announce(request, change)
        if not wants_json(request):
            return RedirectResponse(f"/c/{token}", status_code=303)
    return await _page(request, token, await _opened(request, token))
