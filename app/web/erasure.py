"""**Apagar meus dados**, for the invitee: asked for on the invitation's page (``/c/{token}``)
or on the opt-out page (``/descadastro/{id}/{signature}``), confirmed through a link mailed to
the invite's address (``app.consent.confirmation``), done by the same erasure as ``python -m
app esquecer`` (``app.consent.erasure``).

Holding an invitation link proves nothing about who is at the keyboard (it can be forwarded):
asking only mails the address, and only the mailbox's reader can confirm. Opening the mailed
link (GET) changes nothing (mail scanners prefetch links); its button posts with the CSRF token.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from app import ratelimit
from app.clock import utcnow
from app.consent import confirmation
from app.consent.confirmation import Confirmation, LinkState
from app.consent.erasure import forget
from app.consent.optout import optout_path
from app.invites import links as invite_links
from app.invites import transitions
from app.invites.records import ERASURE_MAIL, Change
from app.logs import correlation_id
from app.web.common import (
    client_network,
    db_of,
    render,
    settings_of,
    too_many_requests,
    visitor_id,
)
from app.web.forms import publish_fast, wait_text
from app.web.optout import signed_invite

log = logging.getLogger(__name__)

BACK_TO_INVITE = "Voltar para o convite"
BACK_TO_OPTOUT = "Voltar para a página anterior"
TOO_MANY = "Já enviamos vários links para este e-mail. Tente de novo em {wait}."
INVALID = {
    None: ("Este link não é válido", "Confira se o endereço veio inteiro, como no e-mail."),
    LinkState.EXPIRED: (
        "Este link expirou",
        "Os links para apagar dados valem por 24 horas. Peça outro na página do convite.",
    ),
    LinkState.GONE: (
        "Este link já foi usado",
        "Os dados deste endereço já foram apagados do Convites.",
    ),
}


async def ask(request: Request) -> Response:
    """POST /c/{token}/apagar: mail the confirmation link to the invite's address."""
    token = request.path_params["token"]
    settings = settings_of(request)
    link = await invite_links.open_link(db_of(request), token, settings.invite_ttl_seconds)
    if link is None or link.state == invite_links.LinkState.ELSEWHERE:
        # An old address's link: the invite's address now is someone else's.
        return render(request, "apagar_invalido.html", _invalid(None), status_code=404)
    return await _mail_confirmation(request, link.invite.email, f"/c/{token}", BACK_TO_INVITE)


async def ask_from_optout(request: Request) -> Response:
    """POST /descadastro/{id}/{signature}/apagar: the same request, from the opt-out page (its
    signed path names the invite)."""
    invite = await signed_invite(request)
    if invite is None:
        return render(request, "apagar_invalido.html", _invalid(None), status_code=404)
    path = optout_path(settings_of(request).secret_key, invite.public_id, invite.email)
    return await _mail_confirmation(request, invite.email, path, BACK_TO_OPTOUT)


async def _mail_confirmation(request: Request, email: str, back: str, back_label: str) -> Response:
    """Mail ``email`` the link that confirms its erasure; the page says where it went and
    links ``back`` to the page it was asked on."""
    settings = settings_of(request)
    # The same limits as a sign-in link: a mail to an address, on anyone's request.
    limits = ratelimit.signin_limits(settings, email, client_network(request))
    refusal = await ratelimit.take(request.state.redis, limits)
    if refusal is not None:
        message = TOO_MANY.format(wait=wait_text(refusal.retry_after))
        return too_many_requests(request, message, refusal.retry_after)
    change = await transitions.create_invite(
        db_of(request),
        sender_id=visitor_id(request),
        email=email,
        name=None,
        correlation_id=correlation_id.get() or "",
        kind=ERASURE_MAIL,
    )
    assert isinstance(change, Change)  # only invitations can be duplicates
    log.info("erasure confirmation requested", extra={"invite": change.invite.public_id})
    await publish_fast(request, change)
    context = {"email": email, "back": back, "back_label": back_label}
    return render(request, "apagar_pedido.html", context, status_code=202)


def _invalid(state: LinkState | None) -> dict[str, str]:
    heading, message = INVALID[state]
    return {"heading": heading, "message": message}


async def _confirmation(request: Request) -> Confirmation | Response:
    found = await confirmation.confirmation(
        db_of(request),
        settings_of(request).secret_key,
        request.path_params["token"],
        utcnow(),
    )
    if found is None or found.state != LinkState.VALID:
        state = None if found is None else found.state
        status = 404 if found is None else 410
        return render(request, "apagar_invalido.html", _invalid(state), status_code=status)
    return found


async def show(request: Request) -> Response:
    """GET /apagar/{token}: what will be erased, and the button; nothing happens yet."""
    found = await _confirmation(request)
    if isinstance(found, Response):
        return found
    assert found.request is not None
    context = {"email": found.request.email, "token": request.path_params["token"]}
    return render(request, "apagar_confirmar.html", context)


async def confirm(request: Request) -> Response:
    """POST /apagar/{token}: erase the address everywhere, then say it is done."""
    found = await _confirmation(request)
    if isinstance(found, Response):
        return found
    assert found.request is not None
    removed = await forget(db_of(request), found.request.email)
    log.info("erased at the invitee's request", extra={"rows": sum(removed.values())})
    return render(request, "apagar_feito.html", {})
