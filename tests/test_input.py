"""Input: oversized bodies, malformed JSON, header injection, names, and escaping everywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.config import Settings
from app.invites.validation import shown_email
from app.storage.database import Database
from tests.fixtures import drain
from tests.helpers import JSON, api_headers, invite_count, page_token, post_invite
from tests.services import ScriptedSmtp

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


async def test_a_body_over_the_limit_gets_413_and_nothing_is_written(
    client: httpx.AsyncClient, db: Database
) -> None:
    body = b'{"email": "ana@exemplo.com", "nome": "' + b"a" * 17_000 + b'"}'
    headers = {**await api_headers(client), "Content-Type": "application/json"}
    response = await client.post("/convites", content=body, headers=headers)

    assert response.status_code == 413
    assert response.json()["erro"] == "O pedido é grande demais: o limite é de 16 KB."
    assert await invite_count(db) == 0


async def test_a_declared_length_over_the_limit_is_refused_before_reading(
    client: httpx.AsyncClient, db: Database
) -> None:
    headers = {
        **await api_headers(client),
        "Content-Type": "application/json",
        "Content-Length": "1000000",  # what arrives is small: it must not matter
    }
    response = await client.post(
        "/convites", content=b'{"email": "a@exemplo.com"}', headers=headers
    )

    assert response.status_code == 413
    assert await invite_count(db) == 0


async def _chunks(total: int) -> AsyncIterator[bytes]:
    yield b'{"email": "ana@exemplo.com", "nome": "'
    for _ in range(total // 1024):
        yield b"a" * 1024
    yield b'"}'


@pytest.mark.parametrize("content_type", ["application/json", "application/x-www-form-urlencoded"])
async def test_a_streamed_body_without_a_length_is_cut_off_at_the_limit(
    client: httpx.AsyncClient, db: Database, content_type: str
) -> None:
    headers = await api_headers(client)
    if content_type != "application/json":
        del headers["X-CSRF-Token"]  # the CSRF check reads the form body itself
    response = await client.post(
        "/convites", content=_chunks(64 * 1024), headers={**headers, "Content-Type": content_type}
    )

    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert await invite_count(db) == 0


async def test_a_body_under_the_limit_in_chunks_is_accepted(
    client: httpx.AsyncClient, db: Database
) -> None:
    headers = {**await api_headers(client), "Content-Type": "application/json"}
    response = await client.post("/convites", content=_chunks(2048), headers=headers)

    assert response.status_code == 422  # read in full: only the name is too long
    assert await invite_count(db) == 0


@pytest.mark.parametrize(
    "body",
    [b"{", b'{"email": }', b"\xff\xfe", b'["ana@exemplo.com"]', b"[" * 5000 + b"]" * 5000],
    ids=["truncated", "bad-value", "not-utf8", "not-an-object", "too-deep"],
)
async def test_a_malformed_json_body_gets_400_in_pt_br(
    client: httpx.AsyncClient, db: Database, body: bytes
) -> None:
    headers = {**await api_headers(client), "Content-Type": "application/json"}
    response = await client.post("/convites", content=body, headers=headers)

    assert response.status_code == 400
    assert "JSON" in response.json()["erro"]
    assert await invite_count(db) == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"email": "ana@exemplo.com\r\nBcc: todos@exemplo.com"},
        {"email": "ana@exemplo.com", "nome": "Ana\r\nBcc: todos@exemplo.com"},
        {"email": "ana@exemplo.com", "nome": "Ana\nSubject: ganhe"},
        {"email": "ana@exemplo.com", "nome": "Ana\x00"},
        {"email": "ana@exemplo.com", "nome": "Ana\u2028Bcc: x@y.com"},
        {"email": "ana@exemplo.com", "nome": "Ana\x85Bcc: x@y.com"},
        {"email": "ana@exemplo.com", "nome": "Ana\u202egnp.exe"},
        {"email": "ana@exemplo.com", "nome": "\ud800"},
    ],
    ids=["crlf-email", "crlf-name", "lf-name", "nul", "line-separator", "nel", "bidi", "surrogate"],
)
async def test_header_injection_and_control_characters_are_refused_in_every_field(
    client: httpx.AsyncClient, db: Database, fields: dict[str, str]
) -> None:
    import json

    body = json.dumps(fields).encode()  # ensure_ascii keeps a lone surrogate as \ud800
    headers = {**await api_headers(client), "Content-Type": "application/json"}
    response = await client.post("/convites", content=body, headers=headers)

    assert response.status_code == 422
    assert "caracteres de controle" in " ".join(response.json()["campos"].values())
    assert await invite_count(db) == 0


async def test_a_name_longer_than_100_characters_is_refused(
    client: httpx.AsyncClient, db: Database
) -> None:
    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com", "nome": "a" * 101},
        headers=await api_headers(client),
    )
    assert response.status_code == 422
    assert "no máximo 100" in response.json()["campos"]["nome"]
    assert await invite_count(db) == 0


async def test_an_address_that_is_not_text_is_told_so_not_asked_for(
    client: httpx.AsyncClient, db: Database
) -> None:
    for value, said in ((123, "O e-mail precisa ser um texto."), (None, "Informe o e-mail")):
        response = await client.post(
            "/convites", json={"email": value}, headers=await api_headers(client)
        )
        assert response.status_code == 422
        assert response.json()["campos"]["email"].startswith(said)
    assert await invite_count(db) == 0


async def test_the_address_is_normalised_idna_and_lower_case_domain(
    client: httpx.AsyncClient,
) -> None:
    created = await post_invite(client, "Ana@Exemplo.COM.br")
    assert created["email"] == "Ana@exemplo.com.br"
    created = await post_invite(client, "ana@açaí.com.br")
    assert created["email"] == "ana@xn--aa-4iaz.com.br"


async def test_an_idna_domain_reads_in_its_own_letters_and_stays_idna_for_programs(
    client: httpx.AsyncClient,
) -> None:
    """People read the address as they typed it; the API's ``email`` is what SMTP takes."""
    created = await post_invite(client, "ana@açaí.com.br")
    assert created["mensagem"] == "Recebemos, enviando… (convite para ana@açaí.com.br)"
    assert created["email"] == "ana@xn--aa-4iaz.com.br"
    for url in ("/", f"/convites/{created['id']}"):
        page = (await client.get(url)).text
        assert "ana@açaí.com.br" in page, url
        assert "xn--" not in page, url
    repeated = await client.post(
        "/convites", json={"email": "ana@açaí.com.br"}, headers=await api_headers(client)
    )
    assert repeated.status_code == 409
    assert repeated.json()["erro"].startswith("Você já convidou ana@açaí.com.br e")


async def test_an_accent_before_the_at_sign_is_told_apart_from_a_malformed_address(
    client: httpx.AsyncClient, db: Database
) -> None:
    response = await client.post(
        "/convites", json={"email": "Lúcia@Açaí.com.br"}, headers=await api_headers(client)
    )
    assert response.status_code == 422
    assert response.json()["campos"]["email"].startswith(
        "O Convites não envia para endereços com acento ou outras letras especiais antes do @"
    )
    assert await invite_count(db) == 0


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("ana@exemplo.com", "ana@exemplo.com"),
        ("ana@xn--aa-4iaz.com.br", "ana@açaí.com.br"),
        ("ana@xn--zz.com", "ana@xn--zz.com"),  # not a valid IDNA label: shown as stored
    ],
)
def test_shown_email_reads_idna_back_or_keeps_what_it_cannot(stored: str, shown: str) -> None:
    assert shown_email(stored) == shown


async def test_a_huge_page_cursor_is_ignored_not_a_500(client: httpx.AsyncClient) -> None:
    for cursor in ("9" * 40, "²", "-1"):
        response = await client.get(f"/convites?antes={cursor}", headers=JSON)
        assert response.status_code == 200


async def test_a_script_in_the_name_is_shown_as_text_on_every_page(
    client: httpx.AsyncClient,
) -> None:
    created = await post_invite(client, "ana@exemplo.com", SCRIPT)

    for url in ("/", "/convites"):
        page = (await client.get(url)).text
        assert ESCAPED in page, url
        assert SCRIPT not in page, url
    assert SCRIPT not in (await client.get(f"/convites/{created['id']}")).text
    fragment = (await client.get(f"/convites/{created['id']}", headers={"HX-Request": "true"})).text
    assert ESCAPED in fragment and SCRIPT not in fragment


async def test_refused_form_values_are_escaped_when_the_form_comes_back(
    client: httpx.AsyncClient,
) -> None:
    token = page_token((await client.get("/")).text)
    evil = '"><script>alert(1)</script>'

    response = await client.post(
        "/convites", data={"email": evil, "nome": evil, "csrf_token": token}
    )

    assert response.status_code == 422
    assert "<script>alert(1)" not in response.text
    assert "&#34;&gt;&lt;script&gt;" in response.text


async def test_a_script_in_the_name_is_text_in_the_sent_email(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    await post_invite(client, "ana@exemplo.com", SCRIPT)

    await drain(settings)

    [received] = smtp.received
    html_part = received.message.get_body(("html",))
    assert html_part is not None
    html = html_part.get_content()
    assert ESCAPED in html and SCRIPT not in html
    assert received.message["To"].addresses[0].display_name == SCRIPT  # a quoted header value
    assert received.message["Bcc"] is None
