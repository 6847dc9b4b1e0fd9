"""Signed VERP: the envelope sender names one attempt of one invite, and only we can write it.

``RETURN_PATH=devolucoes@convites.example`` →
``MAIL FROM:<devolucoes+{invite}-{attempt}-{tag}@convites.example>``, where ``invite`` is the
public id in base32 and ``tag`` is an HMAC-SHA256 keyed with ``SECRET_KEY`` over the
public id and the attempt, cut to 80 bits, in base32. The public id and the attempt are in the
mail's own headers (``X-Convite-ID``, ``Message-ID``); the tag is not derivable from them, so
whoever reads (or is forwarded) a mail cannot write the return path of another invite or attempt.

Everything after the ``+`` is lower-case letters and digits: a mail system that folds the case
of the local part, as some do, still returns an address we can read.

Each invite also has an opt-out address, ``devolucoes+sair-{invite}-{tag}@…`` (its own HMAC
purpose, over the public id and the address the mail went to, no attempt), which the
invitation shows in ``List-Unsubscribe``'s ``mailto:``: a message to it is an opt-out (RFC
2369). Showing it gives away nothing about the return paths. Its tag is checked against the
invite's address when a message comes (``opt_out_is_ours``): an invite corrected to another
address cannot be opted out through the old address's mail.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from app.invites.validation import same_address
from app.signing import Purpose, sign, verify

# Public ids are ``secrets.token_urlsafe(12)``: 16 URL-safe characters, 26 in base32.
_PUBLIC_ID = re.compile(r"[A-Za-z0-9_-]{1,24}")
_EXTENSION = re.compile(
    r"(?P<id>[a-z2-7]{2,39})-(?P<attempt>[1-9][0-9]{0,8})-(?P<tag>[a-z2-7]{16})"
)
_OPT_OUT_EXTENSION = re.compile(r"sair-(?P<id>[a-z2-7]{2,39})-(?P<tag>[a-z2-7]{16})")
_TAG_BYTES = 10


class Forged(ValueError):
    """A recipient in the shape of our return paths whose tag we did not write."""


@dataclass(frozen=True)
class ReturnPath:
    """What a signed return path names: the invite and the attempt whose mail bounced; or,
    with ``opt_out`` (and attempt 0), the invite whose opt-out address a message came to."""

    public_id: str
    attempt: int
    opt_out: bool = False
    tag: str = ""  # an opt-out address's: checked with the invite (``opt_out_is_ours``)


def _base32(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii").rstrip("=").lower()


def _tag(secret_key: str, purpose: Purpose, *parts: str) -> str:
    # 80 bits in lower-case base32: short in a local part, and it survives case folding.
    return sign(secret_key, purpose, *parts, length=_TAG_BYTES, encoding="base32")


def _is_ours(tag: str, secret_key: str, purpose: Purpose, *parts: str) -> bool:
    return verify(tag, secret_key, purpose, *parts, length=_TAG_BYTES, encoding="base32")


def _encoded_id(public_id: str) -> str:
    return _base32(public_id.encode("ascii"))


def _decoded_id(encoded: str) -> str | None:
    try:
        text = base64.b32decode(encoded.upper() + "=" * (-len(encoded) % 8)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None
    # One invite, one spelling of its address: base32 leaves spare bits in the last letter.
    return text if _PUBLIC_ID.fullmatch(text) and _encoded_id(text) == encoded else None


def bounce_address(return_path: str, secret_key: str, public_id: str, attempt: int) -> str:
    """The envelope sender of one attempt's mail."""
    if not _PUBLIC_ID.fullmatch(public_id) or attempt < 1:
        raise ValueError(f"no return path for {public_id!r}, attempt {attempt}")
    local, _, domain = return_path.rpartition("@")
    tag = _tag(secret_key, Purpose.RETURN_PATH, public_id, str(attempt))
    return f"{local}+{_encoded_id(public_id)}-{attempt}-{tag}@{domain}"


def opt_out_address(return_path: str, secret_key: str, public_id: str, email: str) -> str:
    """The invite's opt-out address (the ``mailto:`` of ``List-Unsubscribe``) in a mail to
    ``email``."""
    if not _PUBLIC_ID.fullmatch(public_id):
        raise ValueError(f"no opt-out address for {public_id!r}")
    local, _, domain = return_path.rpartition("@")
    tag = _tag(secret_key, Purpose.OPT_OUT_ADDRESS, public_id, same_address(email))
    return f"{local}+sair-{_encoded_id(public_id)}-{tag}@{domain}"


def opt_out_is_ours(secret_key: str, target: ReturnPath, email: str, *, corrected: bool) -> bool:
    """Whether ``target`` is the opt-out address of a mail to ``email``; or one written before
    these addresses named theirs (the public id only), while the invite was never
    ``corrected`` to another address."""
    purpose, public_id = Purpose.OPT_OUT_ADDRESS, target.public_id
    if _is_ours(target.tag, secret_key, purpose, public_id, same_address(email)):
        return True
    return not corrected and _is_ours(target.tag, secret_key, purpose, public_id)


def _read_opt_out(extension: str) -> ReturnPath | None:
    found = _OPT_OUT_EXTENSION.fullmatch(extension.lower())
    public_id = _decoded_id(found["id"]) if found else None
    if found is None or public_id is None:
        return None
    return ReturnPath(public_id, 0, opt_out=True, tag=found["tag"])


def read_address(return_path: str, secret_key: str, recipient: str) -> ReturnPath | None:
    """The invite and attempt ``recipient`` was issued for (or the invite whose opt-out address
    it is, its tag unchecked); ``None`` when it is not in the shape of our addresses. Raises
    ``Forged`` when it is a return path, but its tag is not ours."""
    local, _, domain = return_path.rpartition("@")
    got_local, at, got_domain = recipient.strip().strip("<>").rpartition("@")
    if not at or got_domain.lower() != domain.lower():
        return None
    base, plus, extension = got_local.partition("+")
    if plus and base.lower() == local.lower() and extension.lower().startswith("sair-"):
        return _read_opt_out(extension)
    found = _EXTENSION.fullmatch(extension.lower()) if plus else None
    public_id = _decoded_id(found["id"]) if found else None
    if base.lower() != local.lower() or found is None or public_id is None:
        return None
    attempt = int(found["attempt"])
    if not _is_ours(found["tag"], secret_key, Purpose.RETURN_PATH, public_id, str(attempt)):
        raise Forged(recipient)
    return ReturnPath(public_id, attempt)


def envelope_id(public_id: str, attempt: int) -> str:
    """The DSN ``ENVID`` (RFC 3461) of one attempt: it comes back in ``Original-Envelope-Id``."""
    return f"{public_id}.{attempt}"
