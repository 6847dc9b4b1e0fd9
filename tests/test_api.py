"""The HTTP API (``/api/v1``): API keys from /conta/chaves, the same invites, limits, scoping
and messages as the pages, JSON errors, and Idempotency-Key. Real app, Redis, SQLite or
PostgreSQL, worker (burst) and SMTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.api import idempotency
from app.clock import utcnow
from app.config import Settings
from app.storage.database import Database
from app.storage.tables import api_keys, idempotency_keys
from app.web import api
from app.web import api_keys as keys_page
from app.web import invites as invites_web
from app.web.common import API_PREFIX
from app.web.routes import routes
from app.web.static import StaticAssets
from tests.api_keys import bearer, new_key
from tests.fixtures import ROOT, MovableClock, drain
from tests.helpers import JSON, api_headers, invite_count, page_token, post_invite
from tests.services import ScriptedSmtp


async def test_a_key_is_shown_once_stored_as_a_hash_and_revoked_at_once(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    made = await client.post(
        "/conta/chaves", json={"nome": "Sistema de RH"}, headers=await api_headers(client)
    )
    assert made.status_code == 201
    body = made.json()
    assert set(body) == {"id", "nome", "chave"} and body["nome"] == "Sistema de RH"
    key = body["chave"]
    assert key.startswith("cvk_") and len(key) > 40
    async with db.read() as conn:
        rows = (await conn.execute(select(api_keys))).mappings().all()
    assert len(rows) == 1 and key not in {str(value) for value in rows[0].values()}

    listed = (await client.get("/conta/chaves", headers=JSON)).json()["chaves"]
    assert [(k["id"], k["nome"], k["ultimo_uso_em"]) for k in listed] == [
        (body["id"], "Sistema de RH", None)
    ]
    page = await client.get("/conta/chaves")
    assert "Sistema de RH" in page.text and key not in page.text and "Nunca usada." in page.text

    used = await anonymous_client.get("/api/v1/convites", headers=bearer(key))
    assert used.status_code == 200, used.text
    listed = (await client.get("/conta/chaves", headers=JSON)).json()["chaves"]
    assert listed[0]["ultimo_uso_em"] is not None

    confirm = await client.get(f"/conta/chaves/{body['id']}/revogar")
    assert confirm.status_code == 200 and "Revogar a chave" in confirm.text
    revoked = await client.post(
        f"/conta/chaves/{body['id']}/revogar", data={"csrf_token": page_token(confirm.text)}
    )
    assert revoked.status_code == 303 and revoked.headers["location"] == "/conta/chaves?revogada=1"

    refused = await anonymous_client.get("/api/v1/convites", headers=bearer(key))
    assert refused.status_code == 401
    assert refused.json() == {"erro": "Chave de API inválida ou revogada."}
    assert (await client.get("/conta/chaves", headers=JSON)).json()["chaves"] == []


async def test_the_key_form_shows_the_new_key_once_and_checks_its_name(
    client: httpx.AsyncClient,
) -> None:
    form = await client.get("/conta/chaves")
    token = page_token(form.text)
    empty = await client.post("/conta/chaves", data={"csrf_token": token, "nome": " "})
    assert empty.status_code == 422 and "Dê um nome à chave" in empty.text
    made = await client.post("/conta/chaves", data={"csrf_token": token, "nome": "Eventos"})
    assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
    assert "Copie agora: ela não será mostrada de novo." in made.text
    assert 'id="chave">cvk_' in made.text
    again = await client.get("/conta/chaves")
    assert "Eventos" in again.text and "cvk_" not in again.text
    # The same form sent again (a reload): refused at the name, no second key made.
    twice = await client.post("/conta/chaves", data={"csrf_token": token, "nome": "Eventos"})
    assert twice.status_code == 422 and keys_page.SAME_NAME in twice.text
    assert "cvk_" not in twice.text
    listed = (await client.get("/conta/chaves", headers=JSON)).json()["chaves"]
    assert [key["nome"] for key in listed] == ["Eventos"]


async def test_keys_are_made_and_revoked_only_with_the_csrf_token_and_only_ones_own(
    client: httpx.AsyncClient, other_client: Callable[[], Any]
) -> None:
    forged = await client.post("/conta/chaves", json={"nome": "x"}, headers=JSON)
    assert forged.status_code == 403
    assert (await client.get("/conta/chaves", headers=JSON)).json()["chaves"] == []
    async with other_client() as other:
        theirs = await other.post(
            "/conta/chaves", json={"nome": "Deles"}, headers=await api_headers(other)
        )
    their_id = theirs.json()["id"]
    headers = await api_headers(client)
    assert (await client.get(f"/conta/chaves/{their_id}/revogar")).status_code == 404
    stolen = await client.post(f"/conta/chaves/{their_id}/revogar", headers=headers)
    assert stolen.status_code == 404


async def test_cookies_never_authenticate_the_api(client: httpx.AsyncClient, db: Database) -> None:
    """Signed in, with a valid CSRF token, but no API key: 401 and nothing written."""
    headers = await api_headers(client)
    assert (await client.get("/api/v1/convites", headers=headers)).status_code == 401
    sent = await client.post("/api/v1/convites", json={"email": "ana@exemplo.com"}, headers=headers)
    assert sent.status_code == 401
    assert sent.headers["www-authenticate"].startswith("Bearer")
    assert "erro" in sent.json()
    assert await invite_count(db) == 0


async def test_a_key_opens_the_api_only_and_needs_no_csrf_token(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    key = await new_key(client)
    sent = await anonymous_client.post(
        "/api/v1/convites", json={"email": "ana@exemplo.com", "nome": "Ana"}, headers=bearer(key)
    )
    assert sent.status_code == 202, sent.text
    invite = sent.json()
    assert sent.headers["location"] == f"/api/v1/convites/{invite['id']}"
    # A bearer header is no way into the pages: not for reading, not for writing.
    page = await anonymous_client.get("/convites", headers=bearer(key, **JSON))
    assert page.status_code == 401
    form = await anonymous_client.post(
        "/convites", json={"email": "bia@exemplo.com"}, headers=bearer(key, **JSON)
    )
    assert form.status_code == 403
    assert await invite_count(db) == 1


def test_every_route_under_the_api_prefix_takes_an_api_key_only(settings: Settings) -> None:
    """CSRF lets every unsafe request under ``API_PREFIX`` through: a route there that a cookie
    could reach (one not wrapped by ``api_endpoint``) would be open to cross-site forgery."""
    table = routes(settings, StaticAssets(ROOT / "static"))
    under_prefix = [route for route in table if getattr(route, "path", "").startswith(API_PREFIX)]
    assert all(isinstance(route, Route) for route in under_prefix)  # no Mount to look into
    unwrapped = {
        route.path
        for route in under_prefix
        if isinstance(route, Route) and not api.is_api_endpoint(route.endpoint)
    }
    assert unwrapped == {f"{api.PREFIX}/openapi.json"}  # public: it holds no secret
    assert len(under_prefix) > len(unwrapped)


async def test_the_api_answers_as_the_pages_do(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    key = await new_key(client)
    api = anonymous_client
    sent = await api.post(
        "/api/v1/convites",
        json={"email": "ana@exemplo.com", "nome": "Ana", "mensagem": "Venha!"},
        headers=bearer(key),
    )
    invite_id = sent.json()["id"]
    by_page = (await client.get(f"/convites/{invite_id}", headers=JSON)).json()
    by_api = (await api.get(f"/api/v1/convites/{invite_id}", headers=bearer(key))).json()
    assert by_api == by_page
    assert {k: v for k, v in sent.json().items()} == {
        k: v for k, v in by_page.items() if k not in ("historico", "devolucoes")
    }

    duplicate = await api.post(
        "/api/v1/convites", json={"email": "ana@exemplo.com"}, headers=bearer(key)
    )
    assert duplicate.status_code == 409 and duplicate.json()["erro"].startswith("Você já convidou")
    invalid = await api.post("/api/v1/convites", json={"email": "não"}, headers=bearer(key))
    assert invalid.status_code == 422 and set(invalid.json()) == {"erro", "campos"}
    broken = await api.post(
        "/api/v1/convites",
        content=b"{",
        headers=bearer(key, **{"Content-Type": "application/json"}),
    )
    assert broken.status_code == 400 and "erro" in broken.json()
    typo = await api.post(
        "/api/v1/convites",
        json={"email": "bia@exemplo.com", "mensgem": "Vem!"},
        headers=bearer(key),
    )
    assert typo.status_code == 422  # not an invite sent without its message
    assert typo.json()["campos"] == {"mensgem": invites_web.UNKNOWN_FIELD}
    # JSON under another type (text/plain, curl -d's form type, none) is not an empty form.
    for kind in ("text/plain", "application/x-www-form-urlencoded", None):
        plain = await api.post(
            "/api/v1/convites",
            content=b'{"email": "bia@exemplo.com"}',
            headers=bearer(key, **({"Content-Type": kind} if kind else {})),
        )
        assert plain.status_code == 400, kind
        assert "Content-Type: application/json" in plain.json()["erro"]
    missing = await api.get("/api/v1/convites/nao-existe", headers=bearer(key))
    assert missing.status_code == 404 and missing.json() == {
        "erro": "Este convite não foi encontrado: talvez tenha sido apagado."
    }
    nowhere = await api.get("/api/v1/nada", headers=bearer(key))
    assert nowhere.status_code == 404 and "erro" in nowhere.json()

    await drain(settings)
    cancelled = await api.post(f"/api/v1/convites/{invite_id}/cancelar", headers=bearer(key))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelado"
    twice = await api.post(f"/api/v1/convites/{invite_id}/cancelar", headers=bearer(key))
    assert twice.status_code == 409 and twice.json()["status"] == "cancelado"
    again = await api.post(f"/api/v1/convites/{invite_id}/reenviar", headers=bearer(key))
    assert again.status_code == 202 and again.json()["status"] == "pendente"
    assert again.headers["location"] == f"/api/v1/convites/{invite_id}"


async def test_the_api_reschedules_and_reminds_as_the_pages_do(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    clock: MovableClock,
) -> None:
    key = await new_key(client)
    api = anonymous_client
    soon, later = utcnow() + timedelta(hours=1), utcnow() + timedelta(hours=5)
    scheduled = await api.post(
        "/api/v1/convites",
        json={"email": "ana@exemplo.com", "enviar_em": soon.isoformat()},
        headers=bearer(key),
    )
    path = f"/api/v1/convites/{scheduled.json()['id']}"
    past = await api.post(
        f"{path}/reagendar", json={"enviar_em": "2000-01-01T09:00:00-03:00"}, headers=bearer(key)
    )
    assert past.status_code == 422 and set(past.json()["campos"]) == {"enviar_em"}
    moved = await api.post(
        f"{path}/reagendar", json={"enviar_em": later.isoformat()}, headers=bearer(key)
    )
    assert moved.status_code == 200 and moved.json()["status"] == "agendado"
    assert datetime.fromisoformat(moved.json()["enviar_em"]) == later
    early = await api.post(f"{path}/lembrar", headers=bearer(key))
    assert early.status_code == 409 and early.json()["status"] == "agendado"

    clock.advance(6 * 3600)
    await drain(settings)
    asked = await api.post(f"{path}/lembrar", headers=bearer(key))
    twice = await api.post(f"{path}/lembrar", headers=bearer(key))
    assert asked.status_code == 202 and asked.headers["location"] == path
    assert twice.status_code == 409 and "já foi pedido" in twice.json()["erro"]
    await drain(settings)
    assert [m.message["Subject"].startswith("Lembrete") for m in smtp.received] == [False, True]
    tomorrow = (utcnow() + timedelta(days=1)).isoformat()
    gone = await api.post(f"{path}/reagendar", json={"enviar_em": tomorrow}, headers=bearer(key))
    assert gone.status_code == 409 and gone.json()["status"] == "enviado"
    not_bounced = await api.post(
        f"{path}/corrigir", json={"email": "ana@exemplo.org"}, headers=bearer(key)
    )
    assert not_bounced.status_code == 409 and not_bounced.json()["status"] == "enviado"


async def test_another_accounts_invite_is_not_found(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    other_client: Callable[[], Any],
) -> None:
    async with other_client() as other:
        theirs = await post_invite(other, "segredo@exemplo.com")
    key = await new_key(client)
    for method, path in (
        ("GET", f"/api/v1/convites/{theirs['id']}"),
        ("POST", f"/api/v1/convites/{theirs['id']}/cancelar"),
        ("POST", f"/api/v1/convites/{theirs['id']}/reenviar"),
        ("POST", f"/api/v1/convites/{theirs['id']}/reagendar"),
        ("POST", f"/api/v1/convites/{theirs['id']}/lembrar"),
        ("POST", f"/api/v1/convites/{theirs['id']}/corrigir"),
    ):
        answer = await anonymous_client.request(method, path, headers=bearer(key))
        assert answer.status_code == 404, (path, answer.text)
        assert answer.json() == {
            "erro": "Este convite não foi encontrado: talvez tenha sido apagado."
        }
    listed = await anonymous_client.get("/api/v1/convites", headers=bearer(key))
    assert listed.json()["convites"] == []


async def test_batches_and_cursor_pages(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient
) -> None:
    key = await new_key(client)
    api = anonymous_client
    refused = await api.post(
        "/api/v1/lotes",
        json={"enderecos": "ok@exemplo.com\nnao-e-email", "mensagem": "Oi"},
        headers=bearer(key),
    )
    # No review came before, and nothing changed: a row that cannot be sent, said as such.
    assert refused.status_code == 422, refused.text
    assert refused.json()["erro"] == (
        "Algumas linhas não podem ser enviadas. Nada foi enviado; o resultado de cada linha está "
        'em "linhas".'
    )
    verdicts = [(row["linha"], row["resultado"]) for row in refused.json()["linhas"]]
    assert verdicts == [(1, "ok"), (2, "invalido")]
    typo = await api.post(
        "/api/v1/lotes", json={"enderecos": "ok@exemplo.com", "mensgem": "Oi"}, headers=bearer(key)
    )
    assert typo.status_code == 400  # not every row sent without its message
    assert typo.json()["erro"].startswith("Campo desconhecido: mensgem.")

    addresses = "\n".join(f"pessoa{n}@exemplo.com" for n in range(21))
    sent = await api.post("/api/v1/lotes", json={"enderecos": addresses}, headers=bearer(key))
    assert sent.status_code == 202, sent.text
    assert sent.headers["location"] == f"/api/v1/lotes/{sent.json()['id']}"
    batch = await api.get(sent.headers["location"], headers=bearer(key))
    assert batch.status_code == 200 and batch.json()["tamanho"] == 21

    first = (await api.get("/api/v1/convites?status=pendente", headers=bearer(key))).json()
    assert len(first["convites"]) == 20
    assert first["proxima_pagina"].startswith("/api/v1/convites?depois=")
    assert first["proxima_pagina"].endswith("&status=pendente")
    second = (await api.get(first["proxima_pagina"], headers=bearer(key))).json()
    assert len(second["convites"]) == 1 and second["proxima_pagina"] is None
    seen = {row["email"] for row in first["convites"] + second["convites"]}
    assert seen == {f"pessoa{n}@exemplo.com" for n in range(21)}
    none = (await api.get("/api/v1/convites?status=aceito", headers=bearer(key))).json()
    assert none == {"convites": [], "proxima_pagina": None}
    bad = await api.get("/api/v1/convites?status=feliz", headers=bearer(key))
    assert bad.status_code == 422 and bad.json()["erro"].startswith("Status desconhecido: feliz")
    bad_cursor = await api.get("/api/v1/convites?depois=abc", headers=bearer(key))
    assert bad_cursor.status_code == 422


# --- Idempotency-Key ----------------------------------------------------------------------------


async def test_the_same_key_and_body_give_the_first_answer_and_create_nothing(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    key = await new_key(client)
    headers = bearer(key, **{"Idempotency-Key": "pedido-1"})
    first = await anonymous_client.post(
        "/api/v1/convites", json={"email": "ana@exemplo.com", "nome": "Ana"}, headers=headers
    )
    # The same body, its keys in another order: the same request.
    again = await anonymous_client.post(
        "/api/v1/convites", json={"nome": "Ana", "email": "ana@exemplo.com"}, headers=headers
    )
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert await invite_count(db) == 1

    other = await anonymous_client.post(
        "/api/v1/convites", json={"email": "bia@exemplo.com"}, headers=headers
    )
    assert other.status_code == 422
    assert other.json()["erro"].startswith("Esta Idempotency-Key já foi usada com outro pedido")
    elsewhere = await anonymous_client.post(
        f"/api/v1/convites/{first.json()['id']}/cancelar", headers=headers
    )
    assert elsewhere.status_code == 422
    assert await invite_count(db) == 1

    bad = await anonymous_client.post(
        "/api/v1/convites",
        json={"email": "bia@exemplo.com"},
        headers=bearer(key, **{"Idempotency-Key": "com espaco"}),
    )
    assert bad.status_code == 400 and await invite_count(db) == 1


async def test_an_idempotency_key_belongs_to_its_api_key(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    other_client: Callable[[], Any],
    db: Database,
) -> None:
    mine = await new_key(client)
    async with other_client() as other:
        theirs = await new_key(other)
    body = {"email": "ana@exemplo.com"}
    made = [
        await anonymous_client.post(
            "/api/v1/convites", json=body, headers=bearer(key, **{"Idempotency-Key": "k"})
        )
        for key in (mine, theirs)
    ]
    assert [answer.status_code for answer in made] == [202, 202]
    assert made[0].json()["id"] != made[1].json()["id"]
    assert await invite_count(db) == 2


async def test_concurrent_requests_with_one_key_create_one_invite(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    """Real concurrency: two app instances (as two web processes would be) on one database,
    eight requests at once with the same key; the unique claim lets one of them do the work."""
    from tests.helpers import client_for

    key = await new_key(client)
    headers = bearer(key, **{"Idempotency-Key": "corrida"})
    body = {"email": "ana@exemplo.com", "nome": "Ana"}
    async with client_for(settings) as one, client_for(settings) as two:
        answers = await asyncio.gather(
            *(http.post("/api/v1/convites", json=body, headers=headers) for http in (one, two) * 4)
        )
        assert {answer.status_code for answer in answers} <= {202, 409}
        created = {answer.json()["id"] for answer in answers if answer.status_code == 202}
        assert len(created) == 1
        for answer in answers:
            if answer.status_code == 409:
                assert answer.json()["erro"].startswith("Um pedido com esta Idempotency-Key")
        later = await one.post("/api/v1/convites", json=body, headers=headers)
    assert later.status_code == 202 and later.json()["id"] in created
    assert await invite_count(db) == 1
    async with db.read() as conn:
        claims = (await conn.execute(select(func.count()).select_from(idempotency_keys))).scalar()
    assert claims == 1


async def test_a_refused_request_gives_its_key_back_only_when_worth_retrying(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    """A 4xx answer is kept like any other; nothing was created either time."""
    key = await new_key(client)
    headers = bearer(key, **{"Idempotency-Key": "invalido"})
    first = await anonymous_client.post("/api/v1/convites", json={"email": "x"}, headers=headers)
    again = await anonymous_client.post("/api/v1/convites", json={"email": "x"}, headers=headers)
    assert first.status_code == again.status_code == 422
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert await invite_count(db) == 0


async def key_id(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(select(api_keys.c.id))).scalar_one())


async def claims(db: Database) -> int:
    async with db.read() as conn:
        count = select(func.count()).select_from(idempotency_keys)
        return int((await conn.execute(count)).scalar_one())


async def test_a_claim_left_without_an_answer_is_taken_again_after_its_lease(
    client: httpx.AsyncClient, db: Database, clock: MovableClock
) -> None:
    """A process that died between claim and answer could not give its key back."""
    await new_key(client)
    owner, request_hash = await key_id(db), idempotency.fingerprint("POST", "/x", b"{}")
    first = await idempotency.claim(db, owner, "orfa", request_hash)
    assert isinstance(first, idempotency.Claimed)
    blocked = await idempotency.claim(db, owner, "orfa", request_hash)
    assert isinstance(blocked, idempotency.InProgress)

    clock.advance(idempotency.LEASE.total_seconds() + 1)

    assert await idempotency.claim(db, owner, "orfa", request_hash) == first
    taken = await idempotency.claim(db, owner, "orfa", request_hash)
    assert isinstance(taken, idempotency.InProgress)  # the lease starts again


async def test_a_cancelled_request_gives_its_key_back(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    """A hang-up or a shutdown cancels the handler mid-way (a ``CancelledError``, which is no
    ``Exception``): its claim must not block the key."""
    key = await new_key(client)
    started = asyncio.Event()

    async def cut_off(request: Request) -> Response:
        started.set()
        await asyncio.Event().wait()  # until cancelled
        raise AssertionError("not reached")

    headers = {"authorization": f"Bearer {key}", "idempotency-key": "cortado"}
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/convites",
        "query_string": b"",
        "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
        "state": {"db": db, "settings": settings},
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    request = Request(scope, receive)
    running = asyncio.create_task(api.api_endpoint(cut_off)(request))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert await claims(db) == 0


async def test_a_webhooks_secret_is_shown_once_and_never_kept(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    headers = bearer(await new_key(client), **{"Idempotency-Key": "webhook-1"})
    hook = {"url": "http://127.0.0.1:9/convites"}
    first = await anonymous_client.post("/api/v1/webhooks", json=hook, headers=headers)
    again = await anonymous_client.post("/api/v1/webhooks", json=hook, headers=headers)

    assert first.status_code == again.status_code == 201
    assert first.json()["secret"].startswith("whsec_")
    assert again.json() == {"id": first.json()["id"], "url": hook["url"]}
    async with db.read() as conn:
        kept = (await conn.execute(select(idempotency_keys.c.body))).scalar_one()
    assert "whsec_" not in kept and first.json()["secret"] not in kept
