"""Getting an API key the way a person does: signed in, on /conta/chaves (with the CSRF token)."""

from __future__ import annotations

import httpx

from tests.helpers import api_headers


async def new_key(browser: httpx.AsyncClient, name: str = "Sistema de RH") -> str:
    """A new API key of ``browser``'s account (a signed-in client), as ``POST /conta/chaves``
    gives it once."""
    made = await browser.post(
        "/conta/chaves", json={"nome": name}, headers=await api_headers(browser)
    )
    assert made.status_code == 201, made.text
    key: str = made.json()["chave"]
    return key


def bearer(key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}
