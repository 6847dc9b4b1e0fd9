"""**Simular devolução** (dev mailbox): a real RFC 3464 report of "no such mailbox", sent over
SMTP to the bounce receiver, for a message the dev mailbox kept. A newcomer sees ``devolvido``
arrive live without any outside service."""

from __future__ import annotations

import email
import email.policy
import secrets
from email.message import EmailMessage
from email.utils import formatdate, parseaddr

import aiosmtplib


class CannotSimulate(ValueError):
    """The kept message has no VERP return path (it was not sent by Convites)."""


def report_for(original: bytes, reporting_host: str = "caixa.localhost") -> tuple[str, bytes]:
    """The VERP address to send the report to, and the report (a 5.1.1, like a real MTA's)."""
    message = email.message_from_bytes(original, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return_path = parseaddr(str(message.get("Return-Path", "")))[1]
    recipient = parseaddr(str(message.get("To", "")))[1]
    if not return_path or "+" not in return_path or not recipient:
        raise CannotSimulate("a mensagem não tem o endereço de devolução do Convites")
    boundary = "=_devolucao_" + secrets.token_hex(8)
    headers = original.partition(b"\r\n\r\n")[0].decode("ascii", "replace")
    lines = [
        f"From: Mail Delivery System <MAILER-DAEMON@{reporting_host}>",
        f"To: <{return_path}>",
        "Subject: Undelivered Mail Returned to Sender",
        f"Date: {formatdate(localtime=False)}",
        f"Message-ID: <{secrets.token_hex(12)}@{reporting_host}>",
        "Auto-Submitted: auto-replied",
        "MIME-Version: 1.0",
        f'Content-Type: multipart/report; report-type=delivery-status; boundary="{boundary}"',
        "",
        f"--{boundary}",
        "Content-Type: text/plain; charset=us-ascii",
        "",
        f"<{recipient}>: host {reporting_host} said: 550 5.1.1 User unknown (simulated by",
        "    the Convites dev mailbox)",
        "",
        f"--{boundary}",
        "Content-Type: message/delivery-status",
        "",
        f"Reporting-MTA: dns; {reporting_host}",
        "",
        f"Final-Recipient: rfc822; {recipient}",
        "Action: failed",
        "Status: 5.1.1",
        "Diagnostic-Code: smtp; 550 5.1.1 User unknown",
        "",
        f"--{boundary}",
        "Content-Type: text/rfc822-headers",
        "",
        headers,
        "",
        f"--{boundary}--",
        "",
    ]
    return return_path, "\r\n".join(lines).encode("ascii", "replace")


async def send_report(original: bytes, host: str, port: int) -> str:
    """Send the report for ``original`` to the receiver at ``host:port``; its VERP address."""
    to, report = report_for(original)
    client = aiosmtplib.SMTP(hostname=host, port=port, timeout=10)
    async with client:
        await client.mail("")  # a bounce has the null reverse-path
        await client.rcpt(to)
        await client.data(report)
    return to
