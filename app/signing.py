"""Every HMAC keyed with ``SECRET_KEY``: one function signs, one checks, one list of purposes.

Links, addresses and cookies we hand out carry a MAC so that nobody without the key can write
one for another invite, request or browser: the opt-out link and address, the erasure link, the
invitee's link, the VERP return path, the CSRF token and the operator cookie's fingerprint.
Each is HMAC-SHA256 over its purpose followed by its parts, cut to a length and written as text.

Domain separation: the purposes are listed once, here, and none is a prefix of another; a part
may not hold the separator. So every (purpose, parts) is exactly one message, and a MAC made for
one purpose never passes for another.

The purposes' bytes, and each caller's length and encoding, are those of tokens already mailed
or set: change one and the links and addresses sitting in mailboxes stop working.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from enum import StrEnum
from typing import Literal

#: The whole HMAC-SHA256, in bytes: the length a caller asks for to keep all of it.
FULL = hashlib.sha256().digest_size

#: Between parts. A part may not hold it, so the parts are read back from a message one way only.
SEPARATOR = "\0"

#: ``base64url`` (no padding) for URLs and cookies; ``base32`` (lower case, no padding) where
#: a mail system may fold the case of an address; ``hex`` for the operator cookie.
Encoding = Literal["base64url", "base32", "hex"]


class Purpose(StrEnum):
    """What a MAC is for, as the exact prefix of its message."""

    # Written apart before this module existed, hence ":" after some and NUL after others; the
    # bytes are what tokens already out there were signed with, so they stay as they are.
    OPT_OUT_LINK = "descadastro:"
    ERASURE_LINK = "apagar:"
    INVITE_LINK = "convite-link:"
    CSRF = "csrf:"
    OPERATOR_COOKIE = "operacao:"
    RETURN_PATH = "convites-devolucao\0"
    OPT_OUT_ADDRESS = "convites-descadastro-email\0"
    OPT_OUT_UNDO = "convites-descadastro-desfazer\0"


def _text(data: bytes, encoding: Encoding) -> str:
    if encoding == "base32":
        return base64.b32encode(data).decode("ascii").rstrip("=").lower()
    if encoding == "hex":
        return data.hex()
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def sign(
    key: str, purpose: Purpose, *parts: str, length: int, encoding: Encoding = "base64url"
) -> str:
    """The MAC of ``parts`` for ``purpose`` under ``key``: its first ``length`` bytes, as text.

    Raises ``ValueError`` without parts, with a part holding ``SEPARATOR``, or with a length
    outside 1..``FULL``."""
    if not parts or any(SEPARATOR in part for part in parts):
        raise ValueError(f"nothing to sign for {purpose.name}, or a part holds the separator")
    if not 0 < length <= FULL:
        raise ValueError(f"a MAC of {length} bytes")
    message = (purpose + SEPARATOR.join(parts)).encode()
    digest = hmac.new(key.encode(), message, hashlib.sha256).digest()
    return _text(digest[:length], encoding)


def verify(
    tag: str,
    key: str,
    purpose: Purpose,
    *parts: str,
    length: int,
    encoding: Encoding = "base64url",
) -> bool:
    """Whether ``tag`` is what ``sign`` gives for the same arguments, compared in constant time
    (a guesser learns nothing from how long a wrong tag took to refuse). Parts that ``sign``
    refuses were never signed: ``False``, not an error, since they come from a request."""
    if not parts or any(SEPARATOR in part for part in parts):
        return False
    # Bytes, not str: compare_digest refuses a str with non-ASCII characters (a TypeError).
    expected = sign(key, purpose, *parts, length=length, encoding=encoding)
    return hmac.compare_digest(tag.encode(), expected.encode())
