"""Reading a bounce: what it says about our one recipient, as a ``Verdict``.

Also a spam complaint an invitation's return path gets: an ARF ``message/feedback-report``
(RFC 5965), read with the standard ``email`` package.

RFC 3464 reports (``multipart/report; report-type=delivery-status``) are read with the standard
``email`` package: ``Action``, ``Status``, ``Diagnostic-Code``, ``Reporting-MTA``. Anything else
goes to ``flufl.bounce``, which knows the non-standard formats (Postfix, Exim, qmail, Microsoft
and more) but only names the failed addresses: a verdict then needs the invite's own address
among them (``invite_email``, found through the VERP address the bounce came back to).

No database, no network; never raises: a message it cannot read is ``BounceKind.UNREADABLE``
with the ``problem``, and the caller keeps it.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import logging
import re
from dataclasses import dataclass, replace
from email.message import Message
from email.utils import parseaddr
from enum import StrEnum

from flufl.bounce import all_failures

log = logging.getLogger(__name__)

_STATUS = re.compile(r"^([245])\.(\d{1,3})\.(\d{1,3})$")
_STATUS_IN_TEXT = re.compile(r"\b([45])\.(\d{1,3})\.(\d{1,3})\b")
_TEXT_LIMIT = 200_000
_FIELD_LIMIT = 500


class BounceKind(StrEnum):
    """What a bounce says happened to the message (the ``class`` of the bounce metric)."""

    PERMANENT = "permanent"  # Action: failed (status 5.x.x): it will not arrive
    DELAYED = "delayed"  # Action: delayed (4.x.x): still trying
    OTHER = "other"  # delivered, relayed, expanded: a report that is no failure
    UNREADABLE = "unreadable"  # we could not tell; kept for a person to look at
    COMPLAINT = "complaint"  # an ARF report (RFC 5965) of abuse: the invitee said "spam"
    UNSUBSCRIBE = "unsubscribe"  # a message to the invite's opt-out address (List-Unsubscribe)


@dataclass(frozen=True)
class Verdict:
    kind: BounceKind
    status_code: str | None = None
    diagnostic: str | None = None
    reporting_host: str | None = None
    recipient: str | None = None
    attempt: int | None = None  # which attempt bounced, when the report names it
    problem: str | None = None  # for UNREADABLE: why
    fingerprint: str = ""  # the same bounce twice has the same fingerprint


def _clean(value: object, limit: int = _FIELD_LIMIT) -> str | None:
    if value is None:
        return None
    text = " ".join(str(value).split())
    return text[:limit] or None


def _typed_value(value: object) -> str | None:
    """``dns; mx.exemplo.com`` → ``mx.exemplo.com`` (RFC 3464 typed fields)."""
    text = _clean(value)
    if text is None:
        return None
    return text.partition(";")[2].strip() or text if ";" in text else text


def fingerprint(raw: bytes, message: Message | None) -> str:
    """The bounce's own Message-ID when it has one, else its body: relays add headers, so a
    bounce delivered twice differs at the top but not in these."""
    message_id = _clean(message.get("Message-ID")) if message is not None else None
    basis = message_id.encode() if message_id else raw.partition(b"\r\n\r\n")[2] or raw
    if not message_id and b"\r\n\r\n" not in raw:
        basis = raw.partition(b"\n\n")[2] or raw
    return hashlib.sha256(basis).hexdigest()


def _attempt(raw: bytes, envelope_id: str | None, public_id: str | None) -> int | None:
    """The attempt from ``Original-Envelope-Id`` (our ENVID) or the returned ``Message-ID``."""
    if public_id is None:
        return None
    if envelope_id:
        found = re.fullmatch(re.escape(public_id) + r"\.(\d{1,9})", envelope_id)
        if found:
            return int(found.group(1))
    quoted = re.search(rb"<" + re.escape(public_id.encode()) + rb"\.(\d{1,9})@", raw)
    return int(quoted.group(1)) if quoted else None


def _address(value: object) -> str | None:
    text = _typed_value(value)
    return parseaddr(text)[1].lower() or None if text else None


def _pick(blocks: list[Message], invite_email: str | None) -> Message:
    """The per-recipient block about our recipient (our messages have one; relays add more)."""
    if invite_email:
        for block in blocks:
            if invite_email in (
                _address(block.get("Final-Recipient")),
                _address(block.get("Original-Recipient")),
            ):
                return block
    for block in blocks:
        if str(block.get("Action", "")).strip().lower() in ("failed", "delayed"):
            return block
    return blocks[0]


_ACTIONS = {
    "failed": BounceKind.PERMANENT,
    "delayed": BounceKind.DELAYED,
    "delivered": BounceKind.OTHER,
    "relayed": BounceKind.OTHER,
    "expanded": BounceKind.OTHER,
}


def _delivery_status(message: Message) -> Message | None:
    for part in message.walk():
        if part.get_content_type() == "message/delivery-status":
            return part
    return None


def _rfc3464(message: Message, invite_email: str | None) -> tuple[Verdict | None, str | None]:
    """The verdict of a standard report (``None`` without a delivery-status part) and its
    ``Original-Envelope-Id``."""
    part = _delivery_status(message)
    if part is None:
        return None, None
    payload = part.get_payload()
    blocks = [b for b in payload if isinstance(b, Message)] if isinstance(payload, list) else []
    if len(blocks) < 2:
        return Verdict(
            BounceKind.UNREADABLE, problem="delivery-status has no recipient fields"
        ), None
    per_message, block = blocks[0], _pick(blocks[1:], invite_email)
    action = str(block.get("Action", "")).strip().lower()
    status = (_clean(block.get("Status")) or "").split(" ")[0]
    envelope_id = _clean(per_message.get("Original-Envelope-Id"))
    if action not in _ACTIONS or not _STATUS.match(status):
        problem = f"delivery-status without a valid Action/Status ({action!r}, {status!r})"
        return Verdict(BounceKind.UNREADABLE, problem=problem), envelope_id
    verdict = Verdict(
        _ACTIONS[action],
        status_code=status,
        diagnostic=_typed_value(block.get("Diagnostic-Code")),
        reporting_host=_typed_value(per_message.get("Reporting-MTA"))
        or _typed_value(block.get("Remote-MTA")),
        recipient=_address(block.get("Final-Recipient"))
        or _address(block.get("Original-Recipient")),
    )
    return verdict, envelope_id


def _text_of(message: Message) -> str:
    chunks: list[str] = []
    for part in message.walk():
        if part.get_content_maintype() == "text":
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                chunks.append(payload.decode("utf-8", "replace"))
    return "\n".join(chunks)[:_TEXT_LIMIT]


def _daemon_host(message: Message) -> str | None:
    sender = parseaddr(str(message.get("From", "")))[1].lower()
    local, _, domain = sender.rpartition("@")
    return domain if local in ("mailer-daemon", "postmaster") and domain else None


def _flufl(message: Message, invite_email: str | None) -> Verdict:
    temporary, permanent = all_failures(message)
    failed = {a.decode("utf-8", "replace").lower() for a in permanent}
    delayed = {a.decode("utf-8", "replace").lower() for a in temporary}
    if invite_email in failed or (invite_email is None and failed):
        kind = BounceKind.PERMANENT
    elif invite_email in delayed or (invite_email is None and delayed):
        kind = BounceKind.DELAYED
    elif failed or delayed:
        names = ", ".join(sorted(failed | delayed))[:_FIELD_LIMIT]
        return Verdict(BounceKind.UNREADABLE, problem=f"names other recipients: {names}")
    else:
        return Verdict(BounceKind.UNREADABLE, problem="not a delivery status notification")
    text = _text_of(message)
    code = next((m for m in _STATUS_IN_TEXT.finditer(text) if m.group(1) == kind_class(kind)), None)
    line = None
    if code is not None:
        start = text.rfind("\n", 0, code.start()) + 1
        end = text.find("\n", code.end())
        line = _clean(text[start : end if end != -1 else None])
    return Verdict(
        kind,
        status_code=code.group(0) if code else None,
        diagnostic=line,
        reporting_host=_daemon_host(message),
        recipient=invite_email or min(failed | delayed),
    )


def kind_class(kind: BounceKind) -> str:
    """The status class a code of this kind starts with."""
    return "5" if kind == BounceKind.PERMANENT else "4"


#: ARF ``Feedback-Type`` values that are a complaint about the mail (RFC 5965 section 7.3);
#: ``not-spam``, ``auth-failure``, ``virus`` and ``other`` are kept as history only.
_COMPLAINTS = ("abuse", "fraud")


def _feedback_report(message: Message) -> Verdict | None:
    """The verdict of an ARF report (``multipart/report; report-type=feedback-report``), or
    ``None`` when ``message`` is none. The standard ``email`` package parses the
    ``message/feedback-report`` part as a message whose headers are the report's fields."""
    for part in message.walk():
        if part.get_content_type() != "message/feedback-report":
            continue
        payload = part.get_payload()
        fields = payload[0] if isinstance(payload, list) and payload else None
        if not isinstance(fields, Message):
            return Verdict(BounceKind.UNREADABLE, problem="feedback-report has no fields")
        feedback_type = (_clean(fields.get("Feedback-Type")) or "").lower()
        if not feedback_type:
            return Verdict(BounceKind.UNREADABLE, problem="feedback-report without Feedback-Type")
        kind = BounceKind.COMPLAINT if feedback_type in _COMPLAINTS else BounceKind.OTHER
        return Verdict(
            kind,
            diagnostic=f"Feedback-Type: {feedback_type}",
            reporting_host=_typed_value(fields.get("Reporting-MTA"))
            or _clean(fields.get("User-Agent")),
            recipient=_address(fields.get("Original-Rcpt-To")),
        )
    return None


def read_bounce(raw: bytes, public_id: str | None, invite_email: str | None) -> Verdict:
    """Everything ``raw`` says about the invite ``public_id`` sent to ``invite_email``."""
    invite_email = invite_email.lower() if invite_email else None
    message: Message | None = None
    envelope_id: str | None = None
    try:
        message = email.message_from_bytes(raw, policy=email.policy.compat32)
        verdict, envelope_id = _rfc3464(message, invite_email)
        if verdict is None:
            verdict = _feedback_report(message)
        if verdict is None or verdict.kind == BounceKind.UNREADABLE:
            # Not a standard report (or a broken one): the formats flufl.bounce knows.
            fallback = _flufl(message, invite_email)
            verdict = verdict if fallback.kind == BounceKind.UNREADABLE and verdict else fallback
    except Exception as exc:  # a reader that crashes would lose the bounce: keep it instead
        log.warning("bounce reader failed", extra={"error": repr(exc)})
        verdict, envelope_id = Verdict(BounceKind.UNREADABLE, problem=repr(exc)[:500]), None
    return replace(
        verdict,
        attempt=_attempt(raw, envelope_id, public_id),
        fingerprint=fingerprint(raw, message),
    )
