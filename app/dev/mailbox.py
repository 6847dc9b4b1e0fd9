"""The dev mailbox: a local SMTP server that keeps every message as an ``.eml`` file.

``python -m app dev`` runs it so one person can see what Convites sent, at ``/caixa``.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import time
import uuid
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller


class SaveToFolder:
    """aiosmtpd handler: write each accepted message to ``folder`` and answer 250."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
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
    )


def list_messages(folder: Path, limit: int = 100) -> list[StoredMessage]:
    """Newest first."""
    if not folder.exists():
        return []
    paths = sorted(folder.glob("*.eml"), reverse=True)[:limit]
    return [read_message(path) for path in paths]
