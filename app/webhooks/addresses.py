"""Where a webhook may point: no server-side request forgery.

A webhook makes the server send requests to a URL someone typed. Unless
``WEBHOOK_ALLOW_PRIVATE_NETWORKS`` (development and tests only), the URL must be https and every
address its host resolves to must be a public one: not loopback, private, link-local (the cloud
metadata service lives there), multicast, reserved or unspecified. The check runs at registration
and again at every delivery, after DNS (a name can be pointed elsewhere later), and the delivery
then connects to the very address that was checked (``Target``), so a second lookup cannot swap
it. The URL kept is the one ``httpx`` would send: a non-ASCII host is written in IDNA
(``xn--…``), so a delivery never meets a URL it cannot encode; what no request carries (a
fragment, an empty query) is left out and an empty path is written ``/``, so one receiver has
one spelling (an account may have one webhook per URL).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx

MAX_URL_CHARS = 2000

NOT_A_URL = "Informe um endereço completo, começando com https://."
TOO_LONG = f"O endereço pode ter no máximo {MAX_URL_CHARS:_} caracteres.".replace("_", ".")
NOT_HTTPS = "O endereço do webhook precisa começar com https://."
BAD_CHARACTER = (
    "O endereço tem espaços ou caracteres invisíveis. Copie-o de novo, sem eles, e tente outra vez."
)
BAD_PORT = "A porta do endereço precisa ser um número de 1 a 65535."
CREDENTIALS = (
    "O endereço não pode levar usuário e senha; o Convites assina cada entrega (veja a "
    "descrição da API)."
)
PRIVATE = (
    "Este endereço aponta para uma rede interna ou reservada; use um endereço público na internet."
)
UNRESOLVED = "Não conseguimos encontrar este endereço (DNS). Confira o nome do servidor."
UNANSWERED = "O servidor de nomes (DNS) não respondeu a tempo. Tente de novo em alguns minutos."


class Refused(ValueError):
    """The URL may not be called; the message says why, in Portuguese."""


@dataclass(frozen=True)
class Target:
    """A checked URL and the address to connect to for it."""

    url: str
    host: str
    address: str


def check_form(url: str, *, allow_private: bool) -> str:
    """``url`` as ``httpx`` writes it (IDNA host, percent-encoded path) if its form is
    acceptable (characters, scheme, host, port, length); raises ``Refused``."""
    url = url.strip()
    if not url:
        raise Refused(NOT_A_URL)
    if len(url) > MAX_URL_CHARS:
        raise Refused(TOO_LONG)
    # A control character or an inner space would make every delivery fail to build its
    # request; pasted text carries them unseen, so say so rather than "not a URL".
    if any(not char.isprintable() or char.isspace() for char in url):
        raise Refused(BAD_CHARACTER)
    parts = _parts(url)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))
    if len(url) > MAX_URL_CHARS:  # IDNA and percent-encoding make it longer
        raise Refused(TOO_LONG)
    if parts.scheme != "https" and not allow_private:
        raise Refused(NOT_HTTPS)
    return url


def _parts(url: str) -> SplitResult:
    """``url`` as ``httpx`` writes it, split; what no delivery could send raises ``Refused``."""
    try:
        # What httpx cannot parse it cannot send: refused here, not at every delivery.
        parts = urlsplit(str(httpx.URL(url)))
    except (httpx.InvalidURL, ValueError):
        raise Refused(NOT_A_URL) from None
    try:
        port = parts.port  # above 65535 raises here (httpx refused one that is not a number)
    except ValueError:
        raise Refused(BAD_PORT) from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise Refused(NOT_A_URL)
    if parts.username is not None or parts.password is not None:
        raise Refused(CREDENTIALS)
    if port == 0:  # no server listens there; the POST would go to the scheme's port instead
        raise Refused(BAD_PORT)
    return parts


def is_public(address: str) -> bool:
    """Whether connecting to ``address`` reaches the public internet only."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:  # fec0::/10: deprecated, but still routed inside some networks
            return False
        # An IPv6 address that carries an IPv4 one reaches that IPv4 one: judge it instead.
        # (Teredo, 2001::/32, needs no unwrapping: ``is_private`` refuses all of 2001::/23.)
        wrapped = ip.ipv4_mapped or ip.sixtofour
        if wrapped is not None:
            return is_public(str(wrapped))
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


async def resolve(url: str, *, allow_private: bool) -> Target:
    """Check ``url`` and resolve its host; the first address, when every one is allowed."""
    url = check_form(url, allow_private=allow_private)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise Refused(UNRESOLVED) from None
    addresses = [str(info[4][0]) for info in found]
    if not addresses:
        raise Refused(UNRESOLVED)
    # Every address, not only the one used: a name that also resolves inside is refused whole.
    if not allow_private and not all(is_public(address) for address in addresses):
        raise Refused(PRIVATE)
    return Target(url, host, addresses[0])
