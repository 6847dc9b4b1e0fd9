"""Hand an invite to the SMTP server and say, in words a person understands, what happened.

Errors come in three kinds because each leads to a different state: transient (refused
connection, timeout before DATA, 4xx → ``pendente`` after a backoff), permanent (5xx, refused
recipient, bad address → ``falhou``) and unknown (cut while the body was handed over →
``incerto``, never re-sent on its own).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import aiosmtplib

from app import clock
from app.config import SmtpSettings

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


@dataclass(frozen=True)
class OutgoingMail:
    """One message ready for the wire: the envelope (RFC 5321) and the message bytes."""

    recipient: str
    content: bytes
    envelope_from: str  # signed VERP: a bounce names its attempt (app.bounces.addresses)
    envelope_id: str = ""  # DSN ENVID (RFC 3461), where the server offers DSN


def xtext(value: str) -> str:
    """RFC 3461 xtext: ``+`` and ``=`` and anything outside ``!``..``~`` as ``+XX``."""
    return "".join(
        f"+{ord(ch):02X}" if ch in "+=" or not 33 <= ord(ch) <= 126 else ch for ch in value
    )


def dsn_options(client: aiosmtplib.SMTP, message: OutgoingMail) -> tuple[list[str], list[str]]:
    """MAIL and RCPT parameters asking for failure and delay reports, where DSN is offered."""
    if not client.supports_extension("dsn") or not message.envelope_id:
        return [], []
    return (
        ["RET=HDRS", f"ENVID={xtext(message.envelope_id)}"],
        ["NOTIFY=FAILURE,DELAY", f"ORCPT=rfc822;{xtext(message.recipient)}"],
    )


def _reply_error(exc: aiosmtplib.SMTPResponseException, what: str) -> SendError:
    detail = f"{exc.code} {exc.message}".strip()
    if 400 <= exc.code < 500:
        return TransientSendError(
            f"O servidor de e-mail pediu para tentar mais tarde ({detail}).", exc.code
        )
    return PermanentSendError(f"{what} ({detail}).", exc.code)


async def _greet(client: aiosmtplib.SMTP) -> None:
    """EHLO, or HELO where a server does not know EHLO (RFC 5321 4.1.1.1)."""
    try:
        await client.ehlo()
    except aiosmtplib.SMTPHeloError:
        if not client.is_connected:
            raise
        await client.helo()


@dataclass
class _Idle:
    client: aiosmtplib.SMTP
    since: float


class _StaleConnection(Exception):
    """A kept connection the server has closed meanwhile: nothing was sent on it."""


class Mailer:
    """Sends over SMTP with a timeout on every step, reusing at most ``smtp.pool_size``
    connections. A kept connection found dead before the envelope is accepted is replaced:
    nothing had been handed over, so that is no retry of a send."""

    IDLE_SECONDS = 30.0  # servers drop idle sessions; do not keep ours much longer

    def __init__(self, smtp: SmtpSettings) -> None:
        self.smtp = smtp
        self._idle: list[_Idle] = []
        self._slots = asyncio.Semaphore(smtp.pool_size)

    async def send(self, message: OutgoingMail, progress: SendProgress, *, deadline: float) -> None:
        """Deliver ``message`` or raise a ``SendError`` subclass; ``deadline`` bounds the whole
        conversation (waiting for a connection included), so it ends inside the row's lease."""
        client: aiosmtplib.SMTP | None = None
        try:
            async with asyncio.timeout(deadline), self._slots:
                client = await self._envelope_on_kept(message)
                if client is None:
                    client = self._new_client()
                    await self._connect(client)
                    await self._envelope(client, message)
                progress.data_started = True
                await self._data(client, message)
                self._idle.append(_Idle(client, clock.monotonic()))
        except TimeoutError:
            if client is not None:
                client.close()
            if progress.data_started:
                raise UnknownOutcomeError(_UNKNOWN) from None
            raise TransientSendError(_NO_ANSWER) from None
        except BaseException:
            # Failed or cancelled: drop the connection; a polite QUIT could hang as long again.
            if client is not None:
                client.close()
            raise

    async def close(self) -> None:
        """Say goodbye on every kept connection (the worker is stopping)."""
        idle, self._idle = self._idle, []
        for kept in idle:
            if kept.client.is_connected:
                try:
                    await asyncio.wait_for(kept.client.quit(), self.smtp.timeout)
                except (aiosmtplib.SMTPException, OSError, TimeoutError):
                    kept.client.close()

    def _new_client(self) -> aiosmtplib.SMTP:
        return aiosmtplib.SMTP(
            hostname=self.smtp.host,
            port=self.smtp.port,
            timeout=self.smtp.timeout,
            use_tls=self.smtp.use_tls,
            start_tls=self.smtp.start_tls,
        )

    async def _envelope_on_kept(self, message: OutgoingMail) -> aiosmtplib.SMTP | None:
        """MAIL/RCPT on a kept connection; ``None`` when there is none alive to use."""
        while self._idle:
            kept = self._idle.pop()
            if not kept.client.is_connected or clock.monotonic() - kept.since > self.IDLE_SECONDS:
                kept.client.close()
                continue
            try:
                await self._envelope(kept.client, message, kept=True)
            except _StaleConnection:
                kept.client.close()
                continue
            except BaseException:
                kept.client.close()
                raise
            return kept.client
        return None

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

    async def _envelope(
        self, client: aiosmtplib.SMTP, message: OutgoingMail, *, kept: bool = False
    ) -> None:
        try:
            if client.is_ehlo_or_helo_needed:
                # Whether to ask for DSN depends on the server's EHLO answer (aiosmtplib would
                # otherwise greet lazily inside MAIL).
                await _greet(client)
            mail_options, rcpt_options = dsn_options(client, message)
            await self._mail_from(client, message.envelope_from, mail_options, kept=kept)
            await client.rcpt(message.recipient, options=rcpt_options)
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

    async def _mail_from(
        self, client: aiosmtplib.SMTP, sender: str, options: list[str], *, kept: bool
    ) -> None:
        try:
            await client.mail(sender, options=options)
        except (aiosmtplib.SMTPServerDisconnected, ConnectionError) as exc:
            if kept:
                raise _StaleConnection from exc
            raise
        except aiosmtplib.SMTPResponseException as exc:
            if kept and exc.code == 421:  # the server is closing this (old) session
                raise _StaleConnection from exc
            raise

    async def _data(self, client: aiosmtplib.SMTP, message: OutgoingMail) -> None:
        try:
            await client.data(message.content)
        except aiosmtplib.SMTPResponseException as exc:
            raise _reply_error(exc, "O servidor de e-mail recusou a mensagem") from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise UnknownOutcomeError(_UNKNOWN) from exc
