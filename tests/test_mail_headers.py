"""Nothing a person types can become a mail header: encoded words in names, request ids."""

from __future__ import annotations

import httpx
import pytest

from app.db import Database
from app.web.middleware.correlation import CorrelationIdMiddleware
from tests.helpers import api_headers, invite_count

ENCODED_WORDS = [
    "=?utf-8?b?Qm9iIDxib2JAZXZpbC5leGFtcGxlPg==?=",
    "Ana =?ISO-8859-1?Q?Mall=E9?= Silva",
    "=?UTF-8?B??=",
]


@pytest.mark.parametrize("name", ENCODED_WORDS)
async def test_a_name_with_an_rfc2047_encoded_word_is_refused(
    client: httpx.AsyncClient, db: Database, name: str
) -> None:
    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com", "nome": name},
        headers=await api_headers(client),
    )

    assert response.status_code == 422
    assert "=?" in response.json()["campos"]["nome"]
    assert await invite_count(db) == 0


async def test_a_name_that_merely_has_an_equals_sign_or_question_mark_is_fine(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com", "nome": "Ana = Bia? Sim"},
        headers=await api_headers(client),
    )
    assert response.status_code == 202


async def _correlation_id_for(raw: bytes) -> str:
    seen: dict[str, str] = {}

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        seen["id"] = scope["correlation_id"]

    middleware = CorrelationIdMiddleware(app)  # type: ignore[arg-type]
    scope = {"type": "http", "headers": [(b"x-request-id", raw)]}
    await middleware(scope, None, None)  # type: ignore[arg-type]
    return seen["id"]


async def test_a_request_id_with_a_trailing_newline_is_replaced() -> None:
    assert await _correlation_id_for(b"pedido-1") == "pedido-1"
    replaced = await _correlation_id_for(b"pedido-1\n")
    assert replaced != "pedido-1\n" and "\n" not in replaced
