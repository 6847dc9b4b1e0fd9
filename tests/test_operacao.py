"""/operacao: off without OPS_TOKEN, closed without the token, and its bulk Tentar de novo."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.dev.run import dev_ops_token
from app.invites.status import Status
from app.sending.heartbeat import WORKERS, beat
from app.storage.database import Database
from tests.fixtures import drain, running_app
from tests.helpers import JSON, client_for, invite_row, page_token, post_invite, statuses
from tests.services import ScriptedSmtp

TOKEN = "token-de-operacao-bem-comprido"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def ops(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with running_app(replace(settings, ops_token=TOKEN)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield http


async def test_the_page_does_not_exist_without_an_ops_token(client: httpx.AsyncClient) -> None:
    assert (await client.get("/operacao", headers=BEARER)).status_code == 404
    # Without OPS_TOKEN there is no endpoint there to take a POST either.
    assert (await client.post("/operacao/tentar-de-novo", headers=BEARER)).status_code == 404


async def test_without_credentials_the_page_asks_for_the_token_with_401(
    ops: httpx.AsyncClient,
) -> None:
    page = await ops.get("/operacao")
    assert page.status_code == 401
    assert 'name="token"' in page.text and "Workers" not in page.text
    assert (await ops.get("/operacao/eventos")).status_code == 401
    refused = await ops.post(
        "/operacao/tentar-de-novo", data={"motivo": "x", "csrf_token": page_token(page.text)}
    )
    assert refused.status_code == 401


async def test_a_wrong_token_is_refused_with_403(ops: httpx.AsyncClient) -> None:
    wrong = await ops.get("/operacao", headers={"Authorization": "Bearer errado"})
    assert wrong.status_code == 403
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    login_form = page_token((await ops.get("/operacao")).text)
    form = await ops.post("/operacao/entrar", data={"token": "errado", "csrf_token": login_form})
    assert form.status_code == 403 and "incorreto" in form.text
    assert "convites_operacao" not in ops.cookies
    ops.cookies.set("convites_operacao", "forjado.abc.def", path="/operacao")
    assert (await ops.get("/operacao")).status_code == 401


async def test_the_bearer_token_opens_the_page(ops: httpx.AsyncClient, redis: Redis) -> None:
    await beat(redis, WORKERS, "worker-a")

    page = await ops.get("/operacao", headers=BEARER)

    assert page.status_code == 200
    assert "worker-a" in page.text and "Nenhum convite em falhou." in page.text
    assert 'sse-connect="/operacao/eventos"' in page.text
    assert "<style" not in page.text and "<script>" not in page.text


async def test_the_login_form_sets_a_cookie_that_opens_the_page(ops: httpx.AsyncClient) -> None:
    login_form = page_token((await ops.get("/operacao")).text)
    login = await ops.post("/operacao/entrar", data={"token": TOKEN, "csrf_token": login_form})
    assert login.status_code == 303
    cookie = login.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/operacao" in cookie

    panel = await ops.get("/operacao")
    assert panel.status_code == 200

    await ops.post("/operacao/sair", data={"csrf_token": page_token(panel.text)})
    assert (await ops.get("/operacao")).status_code == 401


async def test_tentar_de_novo_sends_again_only_the_falhou_invites_with_that_reason(
    client: httpx.AsyncClient,
    ops: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    ids = []
    for reply, emails in (("550 5.7.1 Blocked", ["a", "b"]), ("554 5.7.1 Spam", ["c"])):
        smtp.always(reply)
        ids += [(await post_invite(client, f"{name}@exemplo.com"))["id"] for name in emails]
        await drain(settings)
    smtp.always("250 OK")
    blocked = (await invite_row(db, ids[0])).error
    assert blocked is not None and (await invite_row(db, ids[1])).error == blocked
    page = await ops.get("/operacao", headers=BEARER)
    assert page.text.count("Tentar de novo</button>") == 2

    response = await ops.post("/operacao/tentar-de-novo", data={"motivo": blocked}, headers=BEARER)
    assert response.status_code == 303
    assert response.headers["location"] == "/operacao?reenviados=2"
    await drain(settings)

    for public_id in ids[:2]:
        assert await statuses(db, public_id) == [
            ("pendente", 1),
            ("enviando", 1),
            ("falhou", 1),
            ("pendente", 2),
            ("enviando", 2),
            ("enviado", 2),
        ]
    assert (await invite_row(db, ids[2])).status == Status.FALHOU
    assert len(smtp.received) == 2
    again = await ops.post(
        "/operacao/tentar-de-novo", data={"motivo": blocked}, headers={**BEARER, **JSON}
    )
    assert again.json() == {"reenviados": 0, "deixados": 0}


async def test_tentar_de_novo_leaves_out_an_address_its_sender_invited_again_and_says_so(
    client: httpx.AsyncClient,
    ops: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    smtp.always("550 5.7.1 Blocked")
    stopped = [(await post_invite(client, f"{name}@exemplo.com"))["id"] for name in ("a", "b")]
    await drain(settings)
    smtp.always("250 OK")
    again = await post_invite(client, "a@exemplo.com")  # a's first invite failed: a new one
    await drain(settings)
    blocked = (await invite_row(db, stopped[0])).error
    assert blocked is not None

    response = await ops.post("/operacao/tentar-de-novo", data={"motivo": blocked}, headers=BEARER)
    await drain(settings)

    assert response.status_code == 303
    assert response.headers["location"] == "/operacao?reenviados=1&deixados=1"
    page = await ops.get(response.headers["location"], headers=BEARER)
    assert (
        "1 convite voltou para a fila. 1 convite ficou de fora: o remetente já tem outro convite "
        "a caminho do mesmo endereço."
    ) in page.text
    left = await invite_row(db, stopped[0])
    assert (left.status, left.attempt) == (Status.FALHOU, 1)
    assert (await invite_row(db, stopped[1])).status == Status.ENVIADO
    assert (await invite_row(db, again["id"])).status == Status.ENVIADO
    assert sorted(m.rcpt_tos[0] for m in smtp.received) == ["a@exemplo.com", "b@exemplo.com"]
    as_json = await ops.post(
        "/operacao/tentar-de-novo", data={"motivo": blocked}, headers={**BEARER, **JSON}
    )
    assert as_json.json() == {"reenviados": 0, "deixados": 1}


async def test_production_keeps_the_page_off_without_ops_token_and_closed_without_the_token(
    settings: Settings,
) -> None:
    # `python -m app dev` hands the local person a token; production never gets one that way.
    production = replace(
        settings, app_env="production", public_url="https://convites.example.com", allowed_hosts=()
    )
    assert dev_ops_token({"APP_ENV": "production"}) is None
    async with client_for(production, base_url="https://convites.example.com") as browser:
        assert (await browser.get("/operacao", headers=BEARER)).status_code == 404
    with_token = replace(production, ops_token=TOKEN)
    async with client_for(with_token, base_url="https://convites.example.com") as browser:
        assert (await browser.get("/operacao")).status_code == 401
        assert (await browser.get("/operacao", headers=BEARER)).status_code == 200


def test_dev_opens_the_page_with_a_fresh_token_unless_one_is_given() -> None:
    fresh = dev_ops_token({"APP_ENV": "development"})
    assert fresh is not None and len(fresh) >= 16
    assert fresh != dev_ops_token({"APP_ENV": "development"})
    assert dev_ops_token({"APP_ENV": "development", "OPS_TOKEN": TOKEN}) == TOKEN
