"""The opt-out link of one invitation: ``/descadastro/{public_id}/{signature}``.

Every invitation carries it (``List-Unsubscribe`` and "Não quero receber convites" in the
mail, and on ``/c/{token}``). The signature is an HMAC of the invite's public id and the
address the mail went to, keyed with ``SECRET_KEY``: nobody can write the link of an invite
they did not receive, the link works for as long as the mail sits in a mailbox (no expiry,
unlike the answer link), and only for that address.

RFC 8058 one-click: a mail provider POSTs ``List-Unsubscribe=One-Click`` to the URL with no
cookie, so this one path is let through the CSRF check (``app.web.middleware.csrf``); the
signature in the path is what proves the request came from the mail.
"""

from __future__ import annotations

import re

from app.invites.validation import same_address
from app.signing import FULL, Purpose, sign, verify

PREFIX = "/descadastro"

#: The shape of an opt-out path, and only that (not its ``/voltar``): what CSRF lets through.
PATH = re.compile(r"/descadastro/[A-Za-z0-9_-]{1,32}/[A-Za-z0-9_-]{1,64}")


def optout_path(secret_key: str, public_id: str, email: str) -> str:
    """The opt-out path of the invite ``public_id`` in a mail to ``email``."""
    tag = sign(secret_key, Purpose.OPT_OUT_LINK, public_id, same_address(email), length=FULL)
    return f"{PREFIX}/{public_id}/{tag}"


def signed(secret_key: str, public_id: str, email: str, given: str) -> bool:
    """Whether ``given`` is the signature of the path for a mail to ``email`` (compared in
    constant time). The address is signed: an invite corrected to another address cannot be
    opted out through the old address's mail, whoever holds it."""
    mailbox = same_address(email)
    return verify(given, secret_key, Purpose.OPT_OUT_LINK, public_id, mailbox, length=FULL)


def signed_before_addresses(secret_key: str, public_id: str, given: str) -> bool:
    """Whether ``given`` is a path signed before paths named their address (the invite's id
    only). Such a link still sits in mailboxes; it counts while the invite was never
    corrected to another address."""
    return verify(given, secret_key, Purpose.OPT_OUT_LINK, public_id, length=FULL)


#: The way back is for the browser that opted out, for a day: a forwarded invitation's reader
#: may opt an address out (fewer mails, never more) but not undo its owner's opt-out.
UNDO_COOKIE = "convites_descadastro"
UNDO_SECONDS = 24 * 3600
UNDO_HOURS = UNDO_SECONDS // 3600  # as the pages say it


def undo_token(secret_key: str, public_id: str) -> str:
    """The value of ``UNDO_COOKIE`` for the browser that opted out through ``public_id``."""
    return f"{public_id}.{sign(secret_key, Purpose.OPT_OUT_UNDO, public_id, length=FULL)}"


def may_undo(secret_key: str, public_id: str, cookie: str | None) -> bool:
    """Whether ``cookie`` is this browser's proof that it made the opt-out of ``public_id``."""
    if cookie is None:
        return False
    given_id, _, tag = cookie.partition(".")
    return given_id == public_id and verify(
        tag, secret_key, Purpose.OPT_OUT_UNDO, public_id, length=FULL
    )


def is_one_click_path(path: str) -> bool:
    """Whether ``path`` has the shape of an opt-out link (the handler checks its signature)."""
    return PATH.fullmatch(path) is not None


#: The subject the ``mailto:`` of ``List-Unsubscribe`` suggests (any message to that address
#: is an opt-out: ``app.bounces.addresses.opt_out_address``).
UNSUBSCRIBE_SUBJECT = "descadastro"
