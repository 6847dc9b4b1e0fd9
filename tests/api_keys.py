"""Getting an API key the way a person does: signed in, on /conta/chaves (with the CSRF token)."""

from __future__ import annotations

import itertools

import httpx

from tests.helpers import api_headers

_numbers = itertools.count(1)


async def new_key(browser: httpx.AsyncClient, name: str | None = None) -> str:
    """A new API key of ``browser``'s account (a signed-in client), as ``POST /conta/chaves``
    gives it once; named anew each time (an account's live keys have distinct names)."""
    name = name or f"Sistema {next(_numbers)}"
    made = await browser.post(
        "/conta/chaves", json={"nome": name}, headers=await api_headers(browser)
    )
    assert made.status_code == 201, made.text
    key: str = made.json()["chave"]
    return key


def bearer(key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}
