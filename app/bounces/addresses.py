"""VERP: the envelope sender names its invite, so a bounce needs no guessing.

``RETURN_PATH=devolucoes@convites.example`` →
``MAIL FROM:<devolucoes+{public_id}@convites.example>``.
"""

from __future__ import annotations

import re

#: Public ids are ``secrets.token_urlsafe(12)``: 16 URL-safe characters.
_PUBLIC_ID = re.compile(r"[A-Za-z0-9_-]{16}")


def bounce_address(return_path: str, public_id: str) -> str:
    """The envelope sender of one invite's messages."""
    local, _, domain = return_path.rpartition("@")
    return f"{local}+{public_id}@{domain}"


def public_id_of(return_path: str, recipient: str) -> str | None:
    """The invite a bounce was sent back for, or ``None`` when ``recipient`` is not one of
    our VERP addresses (the receiver answers 550 to those)."""
    local, _, domain = return_path.rpartition("@")
    got_local, at, got_domain = recipient.strip().strip("<>").rpartition("@")
    if not at or got_domain.lower() != domain.lower():
        return None
    base, plus, public_id = got_local.partition("+")
    if not plus or base.lower() != local.lower() or not _PUBLIC_ID.fullmatch(public_id):
        return None
    return public_id


def envelope_id(public_id: str, attempt: int) -> str:
    """The DSN ``ENVID`` (RFC 3461) of one attempt: it comes back in ``Original-Envelope-Id``."""
    return f"{public_id}.{attempt}"
