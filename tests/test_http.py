"""The HTTP contract: content negotiation, validation, scoping to the sender."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.storage.database import Database
from tests.fixtures import drain
from tests.helpers import JSON, api_headers, csrf_token, page_token, post_invite, written


async def test_a_plain_form_post_is_redirected_to_the_status_page(
    client: httpx.AsyncClient,
) -> None:
    token = page_token((await client.get("/")).text)
    response = await client.post(
        "/convites", data={"email": "form@exemplo.com", "nome": "Fê", "csrf_token": token}
    )

    assert response.status_code == 303
    page = await client.get(response.headers["location"])
    assert page.status_code == 200
    assert "Recebemos, enviando…" in page.text and "form@exemplo.com" in page.text
    assert "Atualizar" in page.text
    assert "enviado" not in page.text.lower().replace("enviando", "")


async def test_an_htmx_post_gets_202_with_the_row_fragment(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/convites",
        data={"email": "htmx@exemplo.com"},
        headers={"HX-Request": "true", "X-CSRF-Token": await csrf_token(client)},
    )

    assert response.status_code == 202
    assert response.headers["location"].startswith("/convites/")
    assert "htmx@exemplo.com" in response.text and "<html" not in response.text


async def test_the_accepted_row_event_and_outbox_entry_are_written_together(
    client: httpx.AsyncClient, db: Database
) -> None:
    await post_invite(client, "junto@exemplo.com")

    assert await written(db) == (1, 1, 1)


BAD_REQUESTS: list[tuple[str, dict[str, Any], int, str]] = [
    ("invalid email", {"json": {"email": "nao-e-email"}}, 422, "não parece válido"),
    ("oversized email", {"json": {"email": "a" * 250 + "@exemplo.com"}}, 422, "254"),
    ("header injection", {"json": {"email": "a@b.com\r\nBcc: c@d.com"}}, 422, "quebras de linha"),
    ("missing email", {"json": {"nome": "Sem E-mail"}}, 422, "Informe o e-mail"),
    ("name too long", {"json": {"email": "a@b.com", "nome": "x" * 101}}, 422, "100"),
    ("email not a string", {"json": {"email": ["a@b.com"]}}, 422, "precisa ser um texto"),
    (
        "malformed json",
        {"content": b"{nope", "headers": {"content-type": "application/json"}},
        400,
        "JSON",
    ),
    ("json array", {"json": ["a@b.com"]}, 400, "objeto JSON"),
]


@pytest.mark.parametrize(("case", "request_kwargs", "status", "message"), BAD_REQUESTS)
async def test_bad_json_input_gets_a_clear_error_and_writes_nothing(
    client: httpx.AsyncClient,
    db: Database,
    case: str,
    request_kwargs: dict[str, Any],
    status: int,
    message: str,
) -> None:
    headers = {**await api_headers(client), **request_kwargs.pop("headers", {})}
    response = await client.post("/convites", headers=headers, **request_kwargs)

    assert response.status_code == status, case
    assert message in response.text
    assert await written(db) == (0, 0, 0)


async def test_an_empty_form_shows_the_field_message_on_the_page(
    client: httpx.AsyncClient, db: Database
) -> None:
    token = page_token((await client.get("/")).text)
    response = await client.post("/convites", data={"csrf_token": token})

    assert response.status_code == 422
    assert 'lang="pt-BR"' in response.text
    assert "Informe o e-mail" in response.text and 'aria-invalid="true"' in response.text
    assert await written(db) == (0, 0, 0)


async def test_another_senders_invite_does_not_exist_for_you(
    client: httpx.AsyncClient, other_client: Callable[[], Any], settings: Settings
) -> None:
    mine = await post_invite(client, "meu@exemplo.com")
    async with other_client() as stranger:
        seen = await stranger.get(f"/convites/{mine['id']}", headers=JSON)
        resend = await stranger.post(
            f"/convites/{mine['id']}/reenviar", headers=await api_headers(stranger)
        )
        listed = (await stranger.get("/convites", headers=JSON)).json()

    assert seen.status_code == 404 and resend.status_code == 404
    assert listed["convites"] == []
    assert (await client.get(f"/convites/{mine['id']}", headers=JSON)).status_code == 200


async def test_my_invites_are_listed_newest_first_in_pages(client: httpx.AsyncClient) -> None:
    for i in range(23):
        await post_invite(client, f"p{i}@exemplo.com")

    first = (await client.get("/convites", headers=JSON)).json()
    second = (await client.get(first["proxima_pagina"], headers=JSON)).json()

    assert [c["email"] for c in first["convites"]][:2] == ["p22@exemplo.com", "p21@exemplo.com"]
    assert len(first["convites"]) == 20 and len(second["convites"]) == 3
    assert second["proxima_pagina"] is None


async def test_the_status_page_shows_the_history_and_never_says_sent_early(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    created = await post_invite(client, "hist@exemplo.com")
    before = await client.get(f"/convites/{created['id']}")
    await drain(settings)
    after = await client.get(f"/convites/{created['id']}")

    assert "Convite para hist@exemplo.com enviado." not in before.text
    assert "Convite para hist@exemplo.com enviado." in after.text
    assert after.text.count("<time") == 3


async def test_unknown_pages_get_a_portuguese_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/nao-existe")

    assert response.status_code == 404
    assert "não encontrada" in response.text and "Traceback" not in response.text
