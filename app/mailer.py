"""Hand an invite to the SMTP server and say, in words a person understands, what happened.

Errors are sorted into three kinds, because each leads to a different state:
- ``TransientSendError``: nothing was accepted and trying later may work (refused connection,
  timeout before DATA, 4xx). The row goes back to ``pendente`` with a backoff.
- ``PermanentSendError``: the server said no for good (5xx, refused recipient, bad address).
  Retrying only delays the queue: ``falhou`` at once.
- ``UnknownOutcomeError``: the connection broke while the message body was being handed over.
  It may have left. The row becomes ``incerto``; it is never re-sent on its own.
"""

from __future__ import annotations

import asyncio
import html
import logging
from dataclasses import dataclass
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formatdate, parseaddr

import aiosmtplib

from app.config import Settings, SmtpSettings
from app.invites import Invite

log = logging.getLogger(__name__)

_NO_ANSWER = "Não conseguimos falar com o servidor de e-mail (conexão recusada ou sem resposta)."
_UNKNOWN = "A conexão caiu enquanto a mensagem era entregue; não sabemos se ela saiu."


class SendError(Exception):
    """A send that did not end in a 250; ``reason`` is pt-BR text for the person."""

    def __init__(self, reason: str, code: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class TransientSendError(SendError):
    """Nothing was accepted; a later attempt may succeed."""


class PermanentSendError(SendError):
    """The server refused for good; do not try again on our own."""


class UnknownOutcomeError(SendError):
    """The message may or may not have been accepted."""


@dataclass
class SendProgress:
    """How far one send got: after ``data_started`` a failure may mean the mail left."""

    data_started: bool = False


def _domain(mail_from: str) -> str:
    address = parseaddr(mail_from)[1]
    return address.rpartition("@")[2] or "localhost"


def build_message(settings: Settings, invite: Invite) -> EmailMessage:
    """The invite e-mail: text and HTML parts, a Message-ID per invite and attempt."""
    message = EmailMessage()
    message["From"] = settings.mail_from
    try:
        message["To"] = Address(display_name=invite.name or "", addr_spec=invite.email)
    except (ValueError, IndexError) as exc:
        raise PermanentSendError("O endereço de e-mail não é válido.") from exc
    message["Subject"] = "Você recebeu um convite"
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = f"<{invite.public_id}.{invite.attempt}@{_domain(settings.mail_from)}>"
    message["X-Correlation-ID"] = invite.correlation_id
    message["X-Convite-ID"] = invite.public_id
    greeting = f"Olá, {invite.name}!" if invite.name else "Olá!"
    link = settings.public_url + "/"
    message.set_content(
        f"{greeting}\n\nVocê foi convidado para o Convites.\nAceite em: {link}\n",
        charset="utf-8",
    )
    message.add_alternative(
        '<!doctype html><html lang="pt-BR"><body>'
        f"<p>{html.escape(greeting)}</p>"
        "<p>Você foi convidado para o Convites.</p>"
        f'<p><a href="{html.escape(link)}">Aceitar o convite</a></p>'
        "</body></html>",
        subtype="html",
        charset="utf-8",
    )
    return message


def _reply_error(exc: aiosmtplib.SMTPResponseException, what: str) -> SendError:
    detail = f"{exc.code} {exc.message}".strip()
    if 400 <= exc.code < 500:
        return TransientSendError(
            f"O servidor de e-mail pediu para tentar mais tarde ({detail}).", exc.code
        )
    return PermanentSendError(f"{what} ({detail}).", exc.code)


class Mailer:
    """Sends one message per call over SMTP, with a timeout on every step."""

    def __init__(self, smtp: SmtpSettings, mail_from: str) -> None:
        self.smtp = smtp
        self.sender_address = parseaddr(mail_from)[1]

    async def send(self, message: EmailMessage, progress: SendProgress, *, deadline: float) -> None:
        """Deliver ``message`` to its ``To`` address or raise a ``SendError`` subclass.

        ``deadline`` bounds the whole SMTP conversation (each step also has the SMTP timeout),
        so a send always ends well inside the row's lease.
        """
        recipient = parseaddr(str(message["To"]))[1]
        client = aiosmtplib.SMTP(
            hostname=self.smtp.host,
            port=self.smtp.port,
            timeout=self.smtp.timeout,
            use_tls=self.smtp.use_tls,
            start_tls=self.smtp.start_tls,
        )
        try:
            async with asyncio.timeout(deadline):
                await self._connect(client)
                await self._envelope(client, recipient)
                progress.data_started = True
                await self._data(client, message)
        except TimeoutError:
            client.close()
            if progress.data_started:
                raise UnknownOutcomeError(_UNKNOWN) from None
            raise TransientSendError(_NO_ANSWER) from None
        except BaseException:
            # Failed or cancelled: drop the connection; a polite QUIT could hang as long again.
            client.close()
            raise
        try:
            await asyncio.wait_for(client.quit(), self.smtp.timeout)
        except (aiosmtplib.SMTPException, OSError, TimeoutError):
            client.close()  # the message was accepted; a failed goodbye changes nothing

    async def _connect(self, client: aiosmtplib.SMTP) -> None:
        try:
            await client.connect()
            if self.smtp.username:
                await client.login(self.smtp.username, self.smtp.password or "")
        except aiosmtplib.SMTPAuthenticationError as exc:
            raise PermanentSendError(
                "O servidor de e-mail recusou as credenciais do Convites.", exc.code
            ) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise _reply_error(exc, "O servidor de e-mail recusou a conexão") from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise TransientSendError(_NO_ANSWER) from exc

    async def _envelope(self, client: aiosmtplib.SMTP, recipient: str) -> None:
        try:
            await client.mail(self.sender_address)
            await client.rcpt(recipient)
        except aiosmtplib.SMTPRecipientRefused as exc:
            raise _reply_error(
                exc, "O servidor de e-mail recusou o endereço do destinatário"
            ) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise _reply_error(exc, "O servidor de e-mail recusou a mensagem") from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise TransientSendError(
                "A conexão com o servidor de e-mail caiu antes do envio."
            ) from exc

    async def _data(self, client: aiosmtplib.SMTP, message: EmailMessage) -> None:
        try:
            await client.data(message.as_bytes())
        except aiosmtplib.SMTPResponseException as exc:
            raise _reply_error(exc, "O servidor de e-mail recusou a mensagem") from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise UnknownOutcomeError(_UNKNOWN) from exc
