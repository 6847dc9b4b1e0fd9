"""The invitee's way out: ``/descadastro/{public_id}/{signature}`` (``app.consent.optout``).

- ``GET`` shows what would happen and a button: nothing is recorded by opening it (mail
  scanners prefetch links), only by the person's confirmation.
- ``POST`` records the opt-out: from the page's button, or from a mail provider's RFC 8058
  one-click (body ``List-Unsubscribe=One-Click``, no cookie, no CSRF token: the signature in
  the path is the proof). Idempotent: the second time changes nothing and answers the same.
- ``POST …/apagar`` ("Apagar meus dados", ``app.web.erasure``) mails the erasure's
  confirmation link, as on the invitation's page.
- ``POST …/voltar`` ("Quero voltar a receber convites") takes back an opt-out the person made
  themselves, from the browser that made it, within a day (``UNDO_COOKIE``), with the CSRF
  token like every other form: the link can be forwarded, and its reader may opt the address
  out but not undo its owner's opt-out. A bounce or a spam report stays for an operator to
  lift.

The sender's row turns ``recusado`` with the reason, announced once on their pages.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from app.consent import suppression
from app.consent.optout import (
    UNDO_COOKIE,
    UNDO_HOURS,
    UNDO_SECONDS,
    may_undo,
    optout_path,
    signed,
    signed_before_addresses,
    undo_token,
)
from app.consent.suppression import Reason, Suppression
from app.invites.queries import current_address_since
from app.invites.records import INVITE, Invite, record_from
from app.live.wakeups import Announcer
from app.storage.tables import invites
from app.web.common import db_of, render, settings_of

log = logging.getLogger(__name__)

NOT_FOUND = (
    "Link não encontrado",
    "Confira se o endereço está completo, como no e-mail.",
)
ONE_CLICK = ("List-Unsubscribe", "One-Click")


async def signed_invite(request: Request) -> Invite | None:
    """The invite this signed path names (``None``: a bad signature, no such invite, or a path
    from a mail to an address the invite no longer goes to)."""
    public_id, given = request.path_params["public_id"], request.path_params["signature"]
    key = settings_of(request).secret_key
    query = invites.select().where(invites.c.public_id == public_id, invites.c.kind == INVITE)
    async with db_of(request).read() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return None
    invite = record_from(Invite, row)
    if signed(key, public_id, invite.email, given):
        return invite
    if signed_before_addresses(key, public_id, given):
        if await current_address_since(db_of(request), invite.id) == 1:
            return invite
        log.warning("opt-out refused: a link mailed to the address before its correction")
    return None


def _not_found(request: Request) -> Response:
    heading, message = NOT_FOUND
    context = {"heading": heading, "message": message}
    return render(request, "convite_desconhecido.html", context, status_code=404)


async def show(request: Request) -> Response:
    """GET: the question, or what is true now (opted out: the way back)."""
    invite = await signed_invite(request)
    if invite is None:
        return _not_found(request)
    return _page(request, invite, await _state_now(request, invite))


async def _state_now(request: Request, invite: Invite) -> str:
    """What the page says is true now: the question (or that the way back was taken), the
    person's own opt-out, or a block (a bounce, a spam report) only an operator lifts."""
    suppressed = suppressed_state(await suppression.entry_for(db_of(request), invite.email))
    if suppressed is None:
        return "voltou" if request.query_params.get("voltou") == "1" else "pergunta"
    return suppressed


def suppressed_state(entry: Suppression | None) -> str | None:
    """What both pages of the invitee (this one and ``/c/{token}``) say of an address on the
    list: ``descadastrado``, its owner's own opt-out (the way back is here, from the browser
    that made it, for ``UNDO_HOURS``), or ``bloqueado``, a bounce or a spam report that only
    an operator lifts; ``None`` when it is not on the list."""
    if entry is None:
        return None
    return "descadastrado" if entry.reason == Reason.OPTED_OUT else "bloqueado"


def _page(request: Request, invite: Invite, state: str, status_code: int = 200) -> Response:
    key = settings_of(request).secret_key
    context = {
        "invite": invite,
        "state": state,
        "action": optout_path(key, invite.public_id, invite.email),
        "may_undo": may_undo(key, invite.public_id, request.cookies.get(UNDO_COOKIE)),
        "undo_hours": UNDO_HOURS,
    }
    return render(request, "descadastro.html", context, status_code=status_code)


async def confirm(request: Request) -> Response:
    """POST: the opt-out (the page's button, or RFC 8058 one-click); 200 to a one-click, 303
    back to the page for a browser."""
    invite = await signed_invite(request)
    if invite is None:
        return _not_found(request)
    async with db_of(request).write() as conn:
        done = await suppression.suppress_from_invite(
            conn, invite, Reason.OPTED_OUT, "link do convite"
        )
    announcer: Announcer = request.state.announcer
    await announcer.announce_all([done.change, *done.called_off])
    form = await request.form()
    one_click = form.get(ONE_CLICK[0]) == ONE_CLICK[1]
    log.info("opted out", extra={"invite": invite.public_id, "one_click": one_click})
    if one_click:
        return PlainTextResponse("Pronto: este endereço não recebe mais convites.")
    response = RedirectResponse(request.url.path, status_code=303)
    if done.added:  # only the browser that made the opt-out may take it back
        settings = settings_of(request)
        response.set_cookie(
            UNDO_COOKIE,
            undo_token(settings.secret_key, invite.public_id),
            max_age=UNDO_SECONDS,
            path=request.url.path,
            httponly=True,
            samesite="lax",
            secure=settings.https_only_cookies or request.url.scheme == "https",
        )
    return response


async def take_back(request: Request) -> Response:
    """POST …/voltar: lifts the person's own opt-out (only that reason); back to the page."""
    invite = await signed_invite(request)
    if invite is None:
        return _not_found(request)
    if not may_undo(
        settings_of(request).secret_key, invite.public_id, request.cookies.get(UNDO_COOKIE)
    ):
        log.warning("opt-out undo refused: not the browser that opted out")
        return _page(request, invite, await _state_now(request, invite), status_code=403)
    lifted = await suppression.lift(
        db_of(request),
        invite.email,
        by="a pessoa (link do convite)",
        why="Quero voltar a receber convites",
        only=Reason.OPTED_OUT,
    )
    path = optout_path(settings_of(request).secret_key, invite.public_id, invite.email)
    response = RedirectResponse(f"{path}?voltou=1" if lifted else path, status_code=303)
    response.delete_cookie(UNDO_COOKIE, path=path)
    return response
