"""What each mail says, in pt-BR: the invitation (naming its sender) and the sign-in link.

``app.sending.mailer.compose`` writes the MIME; every person-supplied text is escaped for the HTML
part.
"""

from __future__ import annotations

import html

from app.config import Settings
from app.invites.records import SIGNIN_MAIL, Invite
from app.sending.mailer import OutgoingMail, compose


def _greeting(invite: Invite) -> str:
    return f"Olá, {invite.name}!" if invite.name else "Olá!"


def _page(*paragraphs: str, link: tuple[str, str] | None = None) -> str:
    body = "".join(
        "<p>{}</p>".format(html.escape(text).replace("\n", "<br>")) for text in paragraphs
    )
    if link is not None:
        body += f'<p><a href="{html.escape(link[0])}">{html.escape(link[1])}</a></p>'
    return f'<!doctype html><html lang="pt-BR"><body>{body}</body></html>'


def _who_invites(invite: Invite) -> str:
    if invite.sender_email is None:  # written before senders were accounts
        return "Você foi convidado para o Convites."
    name = invite.sender_name or invite.sender_email
    return f"{name} ({invite.sender_email}) convidou você para o Convites."


def invitation(settings: Settings, invite: Invite, token: str) -> OutgoingMail:
    """The invitation: who invites, their message, and this attempt's answer link
    (``/c/{token}``); replies go to the sender."""
    link = f"{settings.public_url}/c/{token}"
    who = _who_invites(invite)
    said = (f"Mensagem de {invite.sender_name or invite.sender_email}:", invite.message)
    message = said if invite.message else ()
    answer = "Para aceitar ou recusar, abra o link:"
    text = "\n\n".join([_greeting(invite), who, *message, f"{answer}\n{link}"]) + "\n"
    reply_to = (invite.sender_name, invite.sender_email) if invite.sender_email else None
    return compose(
        settings,
        invite,
        "Você recebeu um convite",
        text,
        _page(_greeting(invite), who, *message, answer, link=(link, "Responder ao convite")),
        reply_to=reply_to,
    )


def signin_link(settings: Settings, invite: Invite, token: str, minutes: int) -> OutgoingMail:
    """The sign-in link: single use, valid for ``minutes``."""
    link = f"{settings.public_url}/entrar/{token}"
    lines = (
        "Use este link para entrar no Convites:",
        f"Ele vale por {minutes} minutos e só pode ser usado uma vez. "
        "Se não foi você quem pediu, ignore este e-mail.",
    )
    text = f"Olá!\n\n{lines[0]}\n{link}\n\n{lines[1]}\n"
    return compose(
        settings,
        invite,
        "Seu link de acesso ao Convites",
        text,
        _page("Olá!", lines[0], lines[1], link=(link, "Entrar no Convites")),
    )


def build_message(settings: Settings, invite: Invite, token: str | None = None) -> OutgoingMail:
    """The mail this row asks for, with the link ``token`` the worker issued for this attempt."""
    assert token is not None, "every mail carries the link the worker issued for it"
    if invite.kind == SIGNIN_MAIL:
        return signin_link(settings, invite, token, max(1, settings.signin_ttl_seconds // 60))
    return invitation(settings, invite, token)
