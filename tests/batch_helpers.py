"""What the batch tests share: the form posts a person makes (no JavaScript needed)."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from tests.helpers import page_token


async def form_token(client: httpx.AsyncClient) -> str:
    page = await client.get("/lotes/novo")
    assert page.status_code == 200, page.text
    return page_token(page.text)


async def review_text(client: httpx.AsyncClient, text: str) -> httpx.Response:
    """**Revisar** with pasted ``Endereços``."""
    token = await form_token(client)
    return await client.post("/lotes/revisar", data={"csrf_token": token, "enderecos": text})


async def review_file(
    client: httpx.AsyncClient, name: str, data: bytes, kind: str = "text/csv", text: str = ""
) -> httpx.Response:
    """**Revisar** with an uploaded ``Planilha`` (and ``text`` pasted in ``Endereços``)."""
    token = await form_token(client)
    return await client.post(
        "/lotes/revisar",
        data={"csrf_token": token, "enderecos": text},
        files={"planilha": (name, data, kind)},
    )


def kept_rows(review_page: str) -> str:
    """The hidden ``linhas`` field the review page's **Enviar N convites** form carries."""
    found = re.search(r'name="linhas" value="([^"]*)"', review_page)
    assert found, "the review page has no send form"
    return html.unescape(found.group(1))


async def send_reviewed(
    client: httpx.AsyncClient, review_page: str, **extra: Any
) -> httpx.Response:
    """Press **Enviar N convites** on a review page."""
    data = {"csrf_token": page_token(review_page), "linhas": kept_rows(review_page), **extra}
    return await client.post("/lotes", data=data)


def addresses(count: int, prefix: str = "pessoa") -> str:
    return "\n".join(f"{prefix}{n}@exemplo.com" for n in range(count))


@dataclass
class Sse:
    event: str
    data: str


async def read_events(response: httpx.Response) -> AsyncIterator[Sse]:
    """The named events of a server-sent event stream, as they arrive."""
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "event" in fields:
                yield Sse(fields["event"][0], "\n".join(fields.get("data", [])))
            fields = {}
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))
