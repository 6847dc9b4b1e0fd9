"""The dev mailbox: a local SMTP server that keeps every message as an ``.eml`` file.

``python -m app dev`` runs it so one person can see what Convites sent, at ``/caixa``. It
answers by the recipient's address the way the tests' SMTP server can be told to, so QA reaches
every state with ``make run`` alone (README, "QA"): ``recusa…@`` is refused for good (550 →
``falhou``), ``instavel…@`` is refused once for now (451 → a retry, then 250), ``lento…@`` gets
no answer past the sender's timeout (→ ``incerto``); any other address is kept and answered 250.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import email.utils
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

#: The local part's beginning that picks each scripted answer (see the module's docstring).
REFUSED = "recusa"
UNSTABLE = "instavel"
STALLED = "lento"
REFUSED_REPLY = "550 5.1.1 Mailbox unavailable (dev mailbox: recusa...@)"
UNSTABLE_REPLY = "451 4.7.1 Try again later (dev mailbox: instavel...@)"
#: Longer than any sender's SMTP timeout: the sender gives up first, mid-DATA. The client's
#: hang-up cancels the wait.
STALL_SECONDS = 3600.0


def _starting_with(envelope: Any, prefix: str) -> set[str]:
    """The recipients whose local part starts with ``prefix``, lowercased."""
    addresses = {str(address).lower() for address in envelope.rcpt_tos}
    return {address for address in addresses if address.rpartition("@")[0].startswith(prefix)}


class SaveToFolder:
    """aiosmtpd handler: write each accepted message to ``folder`` and answer 250, unless the
    recipient's address asks for a refusal or a stall."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        # Addresses already refused once with a 451: the next attempt is accepted.
        self.refused_once: set[str] = set()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if _starting_with(envelope, REFUSED):
            return REFUSED_REPLY
        if _starting_with(envelope, STALLED):
            await asyncio.sleep(STALL_SECONDS)
        unstable = _starting_with(envelope, UNSTABLE)
        if unstable - self.refused_once:
            self.refused_once |= unstable
            return UNSTABLE_REPLY
        return self.keep(envelope)

    def keep(self, envelope: Any) -> str:
        name = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.eml"
        partial = self.folder / (name + ".part")
        # As a final delivery does (RFC 5321 4.4): the envelope sender, where bounces go.
        return_path = f"Return-Path: <{envelope.mail_from or ''}>\r\n".encode()
        partial.write_bytes(return_path + (envelope.original_content or envelope.content))
        partial.rename(self.folder / name)  # readers never see half a message
        return "250 Message accepted for delivery"


def serve(folder: Path, host: str, port: int) -> None:
    """Run the mailbox until interrupted."""
    controller = Controller(SaveToFolder(folder), hostname=host, port=port)
    controller.start()
    try:
        asyncio.run(_forever())
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()


async def _forever() -> None:
    await asyncio.Event().wait()


#: An invitation carries its answer link; a sign-in mail carries /entrar/… instead.
_ANSWER_LINK = re.compile(r"/c/[A-Za-z0-9_-]{16,}")


@dataclass(frozen=True)
class StoredMessage:
    name: str
    to: str
    subject: str
    date: str
    message_id: str
    correlation_id: str
    text: str
    return_path: str = ""
    sent_at: datetime | None = None  # the Date header, read; None if it cannot be

    @property
    def is_invitation(self) -> bool:
        """Only an invitation can become ``devolvido``: a sign-in mail's bounce changes no row."""
        return bool(_ANSWER_LINK.search(self.text))


def _date(value: str) -> datetime | None:
    try:
        return email.utils.parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None


def read_message(path: Path) -> StoredMessage:
    parsed = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    body = parsed.get_body(preferencelist=("plain",))
    return StoredMessage(
        name=path.stem,
        to=str(parsed.get("To", "")),
        subject=str(parsed.get("Subject", "")),
        date=str(parsed.get("Date", "")),
        message_id=str(parsed.get("Message-ID", "")),
        correlation_id=str(parsed.get("X-Correlation-ID", "")),
        text=body.get_content() if isinstance(body, EmailMessage) else "",
        return_path=str(parsed.get("Return-Path", "")),
        sent_at=_date(str(parsed.get("Date", ""))),
    )


def list_messages(folder: Path, limit: int = 100) -> list[StoredMessage]:
    """Newest first."""
    if not folder.exists():
        return []
    paths = sorted(folder.glob("*.eml"), reverse=True)[:limit]
    return [read_message(path) for path in paths]
