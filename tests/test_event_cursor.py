"""Cursors in the event streams: ASCII digits or a 400 in pt-BR, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from app.config import Settings
from tests.helpers import JSON, client_for

TOKEN = "token-de-operacao-bem-comprido"


@pytest.mark.parametrize("depois", ["²", "١٢", "1e3", "-1", "12abc", "9" * 19])
async def test_a_non_ascii_or_malformed_depois_is_a_400(
    client: httpx.AsyncClient, depois: str
) -> None:
    response = await client.get("/convites/eventos", params={"depois": depois}, headers=JSON)

    assert response.status_code == 400
    assert "algarismos" in response.json()["erro"]


@pytest.mark.parametrize("raw", [b"\xb2", b"\xb9\xb2", b"1\xb3"])
async def test_a_non_ascii_digit_in_last_event_id_is_a_400(
    client: httpx.AsyncClient, raw: bytes
) -> None:
    response = await client.get(
        "/convites/eventos", headers=[(b"accept", b"application/json"), (b"last-event-id", raw)]
    )

    assert response.status_code == 400
    assert "Last-Event-ID" in response.json()["erro"]


@pytest.fixture
async def ops(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(replace(settings, ops_token=TOKEN)) as http:
        yield http


async def test_the_operator_page_answers_a_bad_count_with_400(ops: httpx.AsyncClient) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    bad = await ops.get("/operacao", params={"reenviados": "²"}, headers=bearer)
    good = await ops.get("/operacao", params={"reenviados": "3"}, headers=bearer)

    assert bad.status_code == 400 and "algarismos" in bad.text
    assert good.status_code == 200
