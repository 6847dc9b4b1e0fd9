"""What each mail says, in pt-BR: the invitation (naming its sender), the sign-in link and the
confirmation of an erasure.

The standard ``email`` package writes the message (RFC 5322 headers, encoded words for names,
MIME parts); every person-supplied text is escaped for the HTML part.
"""

from __future__ import annotations

import html
import re
from datetime import datetime
from email.headerregistry import Address, BaseHeader, HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import formatdate
from typing import Any

import icalendar

from app.bounces.addresses import bounce_address, envelope_id, opt_out_address
from app.clock import local_moment, utcnow
from app.config import Settings
from app.consent.confirmation import LINK_TTL_SECONDS
from app.consent.optout import UNSUBSCRIBE_SUBJECT, optout_path
from app.invites.occasion import ZONE, occasion_of, occasion_words
from app.invites.records import ERASURE_MAIL, SIGNIN_MAIL, WEBHOOK_MAIL, Invite
from app.sending.mailer import OutgoingMail, PermanentSendError


class _HeaderClasses(HeaderRegistry):
    """The standard registry builds a new class for every header it parses (``type(...)`` in
    ``__getitem__``), which was a third of the time to write a mail; each is built once here."""

    def __init__(self) -> None:
        super().__init__()
        self._built: dict[str, type[BaseHeader]] = {}

    def __getitem__(self, name: str) -> type[BaseHeader]:
        key = name.lower()
        if key not in self._built:
            self._built[key] = super().__getitem__(name)
        return self._built[key]


_BETWEEN_URIS = re.compile(r"(?<=>)\s*,\s*(?=<)")


class _UriList(UnstructuredHeader, BaseHeader):
    """RFC 2369's ``List-Unsubscribe``: ``<URI>``s separated by commas, which mail providers read
    as written. The standard folding writes a word longer than a line (a signed URL) as RFC 2047
    encoded words, which no provider decodes there (and which lost the space after the comma);
    this one folds only between the URIs."""

    def fold(self, *, policy: Any) -> str:
        uris = f",{policy.linesep} ".join(_BETWEEN_URIS.split(str(self)))
        return f"{self.name}: {uris}{policy.linesep}"


#: ``policy.SMTP`` with the registry above, through the policy's documented ``header_factory``.
_HEADER_CLASSES = _HeaderClasses()
_HEADER_CLASSES.map_to_type("List-Unsubscribe", _UriList)
POLICY = SMTP.clone(header_factory=_HEADER_CLASSES)


def _address(name: str | None, email: str) -> Address:
    """The address for a header; one that could bend the header (a line break, a malformed
    address) is refused, so the row fails with the reason instead of sending something else."""
    try:
        return Address(display_name=name or "", addr_spec=email)
    except (ValueError, IndexError) as exc:  # the parser raises IndexError on "ana@"
        raise PermanentSendError("O endereço de e-mail não é válido.") from exc


def compose(
    settings: Settings,
    invite: Invite,
    subject: str,
    text: str,
    page: str,
    *,
    reply_to: tuple[str | None, str] | None = None,
    headers: dict[str, str] | None = None,
    tag: str = "",
    calendar: str | None = None,
) -> OutgoingMail:
    """One message to ``invite.email``, text and HTML, its Message-ID made of the row and the
    attempt (and ``tag``: ``.lembrete`` for a reminder) so that a mail log or a returned message
    leads to them."""
    message = EmailMessage(policy=POLICY)
    message["From"] = settings.mail_from
    message["To"] = _address(invite.name, invite.email)
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False)
    if reply_to is not None:
        message["Reply-To"] = _address(*reply_to)
    message["Message-ID"] = f"<{invite.public_id}.{invite.attempt}{tag}@{settings.mail_domain}>"
    message["X-Correlation-ID"] = invite.correlation_id
    message["X-Convite-ID"] = invite.public_id
    for name, value in (headers or {}).items():
        message[name] = value
    # base64 keeps the bodies 7-bit in short lines, whatever they hold: policy.SMTP would
    # otherwise write 8-bit text, and we never ask the server for 8BITMIME.
    message.set_content(text, cte="base64")
    message.add_alternative(page, subtype="html", cte="base64")
    if calendar is not None:
        message.add_attachment(
            calendar,
            subtype="calendar",
            filename="convite.ics",
            params={"method": "PUBLISH"},
            cte="base64",
        )
    return OutgoingMail(
        invite.email,
        message.as_bytes(),
        envelope_from=bounce_address(
            settings.return_path, settings.secret_key, invite.public_id, invite.attempt
        ),
        envelope_id=envelope_id(invite.public_id, invite.attempt),
    )


def _greeting(invite: Invite) -> str:
    return f"Olá, {invite.name}!" if invite.name else "Olá!"


def _page(
    *paragraphs: str, link: tuple[str, str] | None = None, footer: tuple[str, str] | None = None
) -> str:
    body = "".join(
        "<p>{}</p>".format(html.escape(text).replace("\n", "<br>")) for text in paragraphs
    )
    for each in (link, footer):
        if each is not None:
            body += f'<p><a href="{html.escape(each[0])}">{html.escape(each[1])}</a></p>'
    return f'<!doctype html><html lang="pt-BR"><body>{body}</body></html>'


#: What a mail client's linkifier makes a link of: a scheme ("https://", "http://localhost"),
#: or a dotted host name ending in letters ("convites.exemplo.com", "www.x.com.br").
_SCHEME = re.compile(r"://")
_HOST = re.compile(r"\b(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}\b")


def unlinkable(text: str) -> str:
    """A sender's Mensagem written ``https[:]//exemplo[.]com``: plain text that no mail client
    turns into a link, so a look-alike call to action under our domain
    ("https://convites.exemplo.com/c/…") cannot pass for ours. Still readable, and copyable by
    whoever means to."""
    text = _SCHEME.sub("[:]//", text)
    return _HOST.sub(lambda host: host.group(0).replace(".", "[.]"), text)


#: Where the mail says which link is ours: the sender's Mensagem is theirs, not Convites'.
ONLY_LINK = "Os links abaixo são os únicos links do Convites neste e-mail."
NO_LINKS_IN_MESSAGE = "Endereços na mensagem aparecem sem link: quem os escreveu foi {who}."


def _who_invites(invite: Invite) -> str:
    what = occasion_words(invite, zone=True)
    to = f" para {what}" if what else ""
    if invite.sender_email is None:  # written before senders were accounts
        return f"Você recebeu um convite{to}."
    # Who invites, plainly: what for is the occasion or the sender's Mensagem, not the tool's name.
    if not invite.sender_name:  # an account with no name yet: its address says who, once
        return f"{invite.sender_email} convidou você{to}."
    return f"{invite.sender_name} ({invite.sender_email}) convidou você{to}."


def _author(invite: Invite) -> str:
    return invite.sender_name or invite.sender_email or "Alguém"


def _calendar(settings: Settings, invite: Invite) -> str | None:
    """A dated occasion as an iCalendar event (RFC 5545) that calendars open; ``None`` if the
    occasion has no date."""
    occasion = occasion_of(invite)
    if occasion is None or occasion.at is None:
        return None
    event = icalendar.Event()
    event.add("uid", f"{invite.public_id}@{settings.mail_domain}")
    event.add("dtstamp", utcnow())
    event.add("dtstart", occasion.at)
    event.add("summary", occasion.title)
    if occasion.place:
        event.add("location", occasion.place)
    event.add("description", f"Convite de {_author(invite)}")
    calendar = icalendar.Calendar()
    calendar.add("prodid", "-//Convites//pt-BR")
    calendar.add("version", "2.0")
    calendar.add("method", "PUBLISH")
    calendar.add_component(event)
    return bytes(calendar.to_ical()).decode()


#: The way out, in every invitation's text and HTML parts (and on its ``/c/{token}`` page).
OPT_OUT = "Não quero receber convites"


def unsubscribe_headers(settings: Settings, invite: Invite) -> dict[str, str]:
    """RFC 2369 ``List-Unsubscribe`` (the signed one-click URL, then a ``mailto:`` to the
    invite's opt-out address, which the bounce receiver takes as an opt-out) and RFC 8058
    ``List-Unsubscribe-Post``, which tells a mail provider it may POST to the URL at once."""
    url = settings.public_url + optout_path(settings.secret_key, invite.public_id, invite.email)
    mailto = opt_out_address(
        settings.return_path, settings.secret_key, invite.public_id, invite.email
    )
    return {
        "List-Unsubscribe": f"<{url}>, <mailto:{mailto}?subject={UNSUBSCRIBE_SUBJECT}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


def invitation(settings: Settings, invite: Invite, token: str) -> OutgoingMail:
    """The invitation: who invites, their message, this attempt's answer link
    (``/c/{token}``) and the way out; replies go to the sender."""
    link = f"{settings.public_url}/c/{token}"
    optout = settings.public_url + optout_path(settings.secret_key, invite.public_id, invite.email)
    who = _who_invites(invite)
    author = invite.sender_name or invite.sender_email or "quem convida"
    message: tuple[str, ...] = ()
    if invite.message:
        shown = unlinkable(invite.message)
        message = (f"Mensagem de {author}:", shown)
        if shown != invite.message:
            message += (NO_LINKS_IN_MESSAGE.format(who=author),)
    answer = "Para aceitar ou recusar, abra o link:"
    text = "\n\n".join(
        [_greeting(invite), who, *message, f"{ONLY_LINK} {answer}\n{link}", f"{OPT_OUT}:\n{optout}"]
    )
    reply_to = (invite.sender_name, invite.sender_email) if invite.sender_email else None
    occasion = occasion_of(invite)
    subject = (
        f"{_author(invite)} convidou você para {occasion.title}"
        if occasion
        else "Você recebeu um convite"
    )
    return compose(
        settings,
        invite,
        subject,
        text + "\n",
        _page(
            _greeting(invite),
            who,
            *message,
            f"{ONLY_LINK} {answer}",
            link=(link, "Responder ao convite"),
            footer=(optout, OPT_OUT),
        ),
        reply_to=reply_to,
        headers=unsubscribe_headers(settings, invite),
        calendar=_calendar(settings, invite),
    )


def reminder(settings: Settings, invite: Invite, token: str, expires_at: datetime) -> OutgoingMail:
    """The one reminder: the invitation's own link (it keeps working), when it ends, and the
    way out, as in the invitation."""
    link = f"{settings.public_url}/c/{token}"
    optout = settings.public_url + optout_path(settings.secret_key, invite.public_id, invite.email)
    author = _author(invite)
    what = occasion_words(invite, zone=True)
    to = f" para {what}" if what else ""
    who = f"{author} convidou você{to} e ainda não recebeu sua resposta."
    until = f"O convite vale até {local_moment(expires_at)}{ZONE}."
    answer = "Para aceitar ou recusar, abra o link:"
    text = "\n\n".join(
        [_greeting(invite), who, until, f"{ONLY_LINK} {answer}\n{link}", f"{OPT_OUT}:\n{optout}"]
    )
    reply_to = (invite.sender_name, invite.sender_email) if invite.sender_email else None
    return compose(
        settings,
        invite,
        f"Lembrete: {author} convidou você…"
        if invite.occasion_title is None
        else f"Lembrete: {author} convidou você para {invite.occasion_title}",
        text + "\n",
        _page(
            _greeting(invite),
            who,
            until,
            f"{ONLY_LINK} {answer}",
            link=(link, "Responder ao convite"),
            footer=(optout, OPT_OUT),
        ),
        reply_to=reply_to,
        headers=unsubscribe_headers(settings, invite),
        tag=".lembrete",
        calendar=_calendar(settings, invite),
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


def erasure_confirmation(
    settings: Settings, invite: Invite, token: str, hours: int
) -> OutgoingMail:
    """The link that confirms **Apagar meus dados** (``app.consent.confirmation``)."""
    link = f"{settings.public_url}/apagar/{token}"
    lines = (
        "Alguém pediu, na página de um convite, para apagar os dados deste endereço no Convites.",
        "Para confirmar, abra o link abaixo e aperte Apagar meus dados:",
        f"O link vale por {hours} horas. Se não foi você quem pediu, ignore este e-mail: "
        "nada será apagado.",
    )
    text = f"Olá!\n\n{lines[0]}\n\n{lines[1]}\n{link}\n\n{lines[2]}\n"
    return compose(
        settings,
        invite,
        "Confirme: apagar seus dados do Convites",
        text,
        _page("Olá!", lines[0], lines[2], lines[1], link=(link, "Confirmar e apagar meus dados")),
    )


def webhook_disabled(settings: Settings, invite: Invite) -> OutgoingMail:
    """The notice that a webhook of the account was disabled after failed deliveries in a row
    (``app.webhooks.deliver``); the URL is written so that no mail client makes a link of it."""
    link = f"{settings.public_url}/conta/webhooks"
    lines = (
        "Um webhook da sua conta no Convites foi desativado depois de "
        f"{settings.webhook_max_failures} entregas seguidas com falha:",
        unlinkable(invite.message or ""),
        "Enquanto estiver desativado, as mudanças dos seus convites não são enviadas para ele, "
        "nem depois. Confira o servidor que recebe os eventos e use Reenviar numa entrega com "
        "falha, na página dos seus webhooks, para ativá-lo de novo para as próximas mudanças:",
    )
    text = f"Olá!\n\n{lines[0]}\n{lines[1]}\n\n{lines[2]}\n{link}\n"
    return compose(
        settings,
        invite,
        "Um webhook seu foi desativado",
        text,
        _page("Olá!", lines[0], lines[1], lines[2], link=(link, "Ver meus webhooks")),
    )


def build_message(settings: Settings, invite: Invite, token: str | None = None) -> OutgoingMail:
    """The mail this row asks for, with the link ``token`` the worker issued for this attempt
    (a webhook's notice carries none: it points at the signed-in page)."""
    if invite.kind == WEBHOOK_MAIL:
        return webhook_disabled(settings, invite)
    assert token is not None, "every mail carries the link the worker issued for it"
    if invite.kind == SIGNIN_MAIL:
        return signin_link(settings, invite, token, max(1, settings.signin_ttl_seconds // 60))
    if invite.kind == ERASURE_MAIL:
        return erasure_confirmation(settings, invite, token, LINK_TTL_SECONDS // 3600)
    return invitation(settings, invite, token)
