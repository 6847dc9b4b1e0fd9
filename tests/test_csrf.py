"""CSRF: a state-changing request without this session's token is refused and changes nothing."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from jinja2 import Environment

from app.config import Settings
from app.invites.status import Status
from app.storage.database import Database
from app.web.middleware.csrf import csrf_field
from tests.fixtures import drain
from tests.helpers import JSON, api_headers, csrf_token, invite_count, invite_row, page_token
from tests.services import ScriptedSmtp


async def test_a_json_post_without_the_token_is_refused_with_403_and_writes_nothing(
    client: httpx.AsyncClient, db: Database
) -> None:
    await csrf_token(client)  # the session exists; only the token is missing

    response = await client.post("/convites", json={"email": "ana@exemplo.com"}, headers=JSON)

    assert response.status_code == 403
    assert "Recarregue" in response.json()["erro"]
    assert await invite_count(db) == 0


async def test_another_sessions_token_is_refused(
    client: httpx.AsyncClient, other_client: Any, db: Database
) -> None:
    async with other_client() as other:
        stolen = await csrf_token(other)
    await csrf_token(client)

    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com"},
        headers={**JSON, "X-CSRF-Token": stolen},
    )

    assert response.status_code == 403
    assert await invite_count(db) == 0


async def test_a_post_from_a_browser_with_no_session_is_refused(
    anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    response = await anonymous_client.post(
        "/convites", data={"email": "ana@exemplo.com", "csrf_token": "x"}
    )

    assert response.status_code == 403
    assert "text/html" in response.headers["content-type"]
    assert "Recarregue e tente de novo" in response.text
    assert await invite_count(db) == 0


async def test_the_form_on_the_page_carries_a_token_that_is_accepted(
    client: httpx.AsyncClient, db: Database
) -> None:
    page = await client.get("/")
    token = page_token(page.text)

    response = await client.post(
        "/convites", data={"email": "ana@exemplo.com", "csrf_token": token}
    )

    assert response.status_code == 303
    assert await invite_count(db) == 1


async def test_a_form_post_without_the_hidden_field_is_refused(
    client: httpx.AsyncClient, db: Database
) -> None:
    await client.get("/")

    response = await client.post("/convites", data={"email": "ana@exemplo.com"})

    assert response.status_code == 403
    assert await invite_count(db) == 0


async def test_a_multipart_form_with_the_token_is_accepted(
    client: httpx.AsyncClient, db: Database
) -> None:
    token = page_token((await client.get("/")).text)

    response = await client.post(
        "/convites",
        data={"email": "ana@exemplo.com", "csrf_token": token},
        files={"anexo": ("a.txt", b"ignored")},
    )

    assert response.status_code == 303
    assert await invite_count(db) == 1


async def test_htmx_sends_the_token_from_the_body_hx_headers(
    client: httpx.AsyncClient, db: Database
) -> None:
    page = (await client.get("/")).text
    hx_headers = re.search(r"<body[^>]* hx-headers='([^']+)'", page)
    meta = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert hx_headers and meta
    token = json.loads(hx_headers.group(1))["X-CSRF-Token"]
    assert token == meta.group(1) == page_token(page)

    response = await client.post(
        "/convites",
        data={"email": "ana@exemplo.com"},
        headers={"HX-Request": "true", "X-CSRF-Token": token},
    )

    assert response.status_code == 202
    assert await invite_count(db) == 1


async def test_resend_without_the_token_is_refused_and_the_invite_stays_falhou(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.reply_next("550 5.1.1 No such user")
    created = await client.post(
        "/convites", json={"email": "x@exemplo.com"}, headers=await api_headers(client)
    )
    await drain(settings)

    response = await client.post(f"/convites/{created.json()['id']}/reenviar", headers=JSON)

    assert response.status_code == 403
    assert (await invite_row(db, created.json()["id"])).status == Status.FALHOU


def test_a_fragment_rendered_without_a_request_has_no_empty_token_field() -> None:
    env = Environment(autoescape=True)
    env.globals["csrf_field"] = csrf_field

    assert env.from_string("<form>{{ csrf_field() }}</form>").render() == "<form></form>"


async def test_an_arbitrary_bearer_header_does_not_skip_the_check(
    client: httpx.AsyncClient, db: Database
) -> None:
    await csrf_token(client)

    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com"},
        headers={**JSON, "Authorization": "Bearer qualquer-coisa"},
    )

    assert response.status_code == 403  # only OPS_TOKEN, only under /operacao, skips it
    assert await invite_count(db) == 0


async def test_basic_credentials_do_not_skip_the_check(
    client: httpx.AsyncClient, db: Database
) -> None:
    await csrf_token(client)

    response = await client.post(
        "/convites", json={"email": "ana@exemplo.com"}, headers={**JSON}, auth=("ana", "senha")
    )

    assert response.status_code == 403
    assert await invite_count(db) == 0


async def test_a_method_no_endpoint_takes_gets_405_or_404_not_the_token_refusal(
    anonymous_client: httpx.AsyncClient,
) -> None:
    for method, path, status in (
        ("PUT", "/", 405),
        ("PATCH", "/entrar", 405),
        ("DELETE", "/convites", 405),
        ("POST", "/nada-aqui", 404),
    ):
        response = await anonymous_client.request(method, path)
        assert response.status_code == status, (method, path, response.text)
        assert "Recarregue" not in response.text
    # Where an endpoint does take the method, the token is still required.
    assert (await anonymous_client.post("/convites", json={"email": "a@b.com"})).status_code == 403
