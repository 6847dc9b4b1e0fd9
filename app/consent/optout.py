"""The opt-out link of one invitation: ``/descadastro/{public_id}/{signature}``.

Every invitation carries it (``List-Unsubscribe`` and "Não quero receber convites" in the
mail, and on ``/c/{token}``). The signature is an HMAC of the invite's public id keyed with
``SECRET_KEY``: nobody can write the link of an invite they did not receive, and the link
works for as long as the mail sits in a mailbox (no expiry, unlike the answer link).

RFC 8058 one-click: a mail provider POSTs ``List-Unsubscribe=One-Click`` to the URL with no
cookie, so this one path is let through the CSRF check (``app.web.middleware.csrf``); the
signature in the path is what proves the request came from the mail.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

PREFIX = "/descadastro"

#: The shape of an opt-out path, and only that (not its ``/voltar``): what CSRF lets through.
PATH = re.compile(r"/descadastro/[A-Za-z0-9_-]{1,32}/[A-Za-z0-9_-]{1,64}")


def signature(secret_key: str, public_id: str) -> str:
    digest = hmac.new(
        secret_key.encode(), b"descadastro:" + public_id.encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def optout_path(secret_key: str, public_id: str) -> str:
    """The opt-out path of the invite ``public_id``."""
    return f"{PREFIX}/{public_id}/{signature(secret_key, public_id)}"


def signed(secret_key: str, public_id: str, given: str) -> bool:
    """Whether ``given`` is the signature of ``public_id`` (compared in constant time)."""
    return hmac.compare_digest(given.encode(), signature(secret_key, public_id).encode())


def is_one_click_path(path: str) -> bool:
    """Whether ``path`` has the shape of an opt-out link (the handler checks its signature)."""
    return PATH.fullmatch(path) is not None


#: The subject the ``mailto:`` of ``List-Unsubscribe`` suggests (any message to that address
#: is an opt-out: ``app.bounces.addresses.opt_out_address``).
UNSUBSCRIBE_SUBJECT = "descadastro"
