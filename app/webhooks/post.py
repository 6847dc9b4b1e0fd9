"""A webhook's request: its Standard Webhooks headers and the POST to the address checked
after DNS, with a timeout, no redirects and a cap on what is read back."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import httpx
from standardwebhooks import Webhook as Signer

from app.webhooks import addresses

#: What is read of the receiver's answer at most (the rest is never read), and kept of it.
MAX_RESPONSE_BYTES = 16 * 1024
SNIPPET_CHARS = 200
TIMED_OUT = "Sem resposta dentro de {seconds:g} s."
NO_CONNECTION = "Não foi possível conectar ao endereço."
UNEXPECTED = "Não foi possível montar ou enviar a requisição para este endereço."
USER_AGENT = "Convites-Webhooks/1"


@dataclass(frozen=True)
class Outcome:
    """What the receiver answered: 2xx or not, its status code and the start of its body."""

    delivered: bool
    status_code: int | None
    snippet: str


def signed_headers(secret: str, delivery_id: str, body: str, when: datetime) -> dict[str, str]:
    """The Standard Webhooks headers, signed by the package (never by hand)."""
    signature = Signer(secret).sign(delivery_id, when, body)
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        # What is read back is capped in bytes on the wire: no compressed answer to inflate.
        "accept-encoding": "identity",
    }


async def post(
    target: addresses.Target, body: str, headers: dict[str, str], seconds: float
) -> Outcome:
    """POST ``body`` to the checked address of ``target`` (never to a second DNS answer): the
    URL names the address, ``Host`` and TLS's server name the host. Redirects are not followed
    (a 3xx is a failure); at most ``MAX_RESPONSE_BYTES`` of the answer are read."""
    parts = urlsplit(target.url)
    address = f"[{target.address}]" if ":" in target.address else target.address
    netloc = address + (f":{parts.port}" if parts.port else "")
    url = urlunsplit(parts._replace(netloc=netloc))
    extensions = {"sni_hostname": target.host} if parts.scheme == "https" else {}
    try:
        async with (
            asyncio.timeout(seconds),
            httpx.AsyncClient(timeout=seconds, follow_redirects=False, trust_env=False) as client,
        ):
            request = client.build_request(
                "POST",
                url,
                content=body.encode(),
                headers={**headers, "host": parts.netloc},
                extensions=extensions,
            )
            response = await client.send(request, stream=True)
            try:
                read = b""
                async for chunk in response.aiter_raw():
                    read += chunk
                    if len(read) >= MAX_RESPONSE_BYTES:
                        break
            finally:
                await response.aclose()
    except (TimeoutError, httpx.TimeoutException):
        return Outcome(False, None, TIMED_OUT.format(seconds=seconds))
    except httpx.HTTPError:
        return Outcome(False, None, NO_CONNECTION)
    snippet = read[:MAX_RESPONSE_BYTES].decode("utf-8", "replace")[:SNIPPET_CHARS]
    return Outcome(200 <= response.status_code < 300, response.status_code, snippet)
