"""The invitee's link, ``/c/{token}``: who invites, their message, **Aceitar convite** and
**Recusar**, and below them "Não quero receber convites" (``app.web.optout``). No account
needed, no JavaScript needed (plain forms, CSRF protected).

Opening it (GET) changes nothing. **Aceitar convite** records ``aceito``, **Recusar** records
``recusado``; either answer is final. Each answer is one conditional UPDATE
(``app.invites.transitions.answered``): a second click, a replaced or closed link records
nothing and reads what is true now. A replaced, cancelled or expired link answers 410.

Answering never signs anyone in. The link is in a mail that can be forwarded, sit in a shared
inbox or land in a log: holding it proves nothing about who is at the keyboard, so it must not
open the invited address's account (its invites, their messages, its name) nor let the holder
send invites in that address's name. Signing in stays one thing: a link mailed on request to
the address, used once (``app.web.signin``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.consent import suppression
from app.consent.optout import UNDO_HOURS, optout_path
from app.invites import links as invite_links
from app.invites import transitions
from app.invites.links import GONE, LinkState, OpenedLink
from app.invites.records import Change
from app.invites.validation import same_address
from app.live.wakeups import Announcer
from app.storage.database import Database
from app.web.common import db_of, render, settings_of, wants_json
from app.web.identity import identify
from app.web.optout import suppressed_state

log = logging.getLogger(__name__)

#: ``transitions.accept`` or ``transitions.decline``: (db, token, link TTL) → the change or None.
Answer = Callable[[Database, str, float], Awaitable[Change | None]]

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
    entry = await suppression.entry_for(db_of(request), link.invite.email)
    context = {
        "link": link,
        "invite": link.invite,
        "token": token,
        "state": link.state.value,
        "optout": optout_path(
            settings_of(request).secret_key, link.invite.public_id, link.invite.email
        ),
        # On the list: the page says so, and neither offers the way out again nor suggests a
        # new invitation that would be refused.
        "suppressed": suppressed_state(entry),
        "undo_hours": UNDO_HOURS,
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


async def _answer(request: Request, answered: Answer) -> Response:
    """Record the answer through the link, tell the sender's pages, show the link's page.

    No session, no account: see the module's docstring."""
    token = request.path_params["token"]
    change = await answered(db_of(request), token, settings_of(request).invite_ttl_seconds)
    if change is not None:
        invite = change.invite
        log.info(
            "invite answered by the invitee",
            extra={"invite": invite.public_id, "status": invite.status.value},
        )
        await _announce(request, change)
        if not wants_json(request):
            return RedirectResponse(f"/c/{token}", status_code=303)
    # Answered now (JSON), answered already, or the link closed: say what is true now.
    return await _page(request, token, await _opened(request, token))


async def accept(request: Request) -> Response:
    """POST /c/{token}/aceitar: ``aceito``, then the link's page says so."""
    return await _answer(request, transitions.accept)


async def decline(request: Request) -> Response:
    """POST /c/{token}/recusar: ``recusado``, then the link's page says so."""
    return await _answer(request, transitions.decline)
