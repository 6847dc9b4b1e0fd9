"""The suppression list (``app.consent.suppression``) on the real database (SQLite, and
PostgreSQL with ``TEST_DATABASE=postgresql``), the operator's view and lift on ``/operacao``,
and ``python -m app suppression list | lift`` as a real child process."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest
from sqlalchemy import select

from app.config import Settings
from app.consent import suppression
from app.consent.suppression import Reason
from app.storage.database import Database
from app.storage.tables import suppressions
from tests.fixtures import running_app
from tests.helpers import JSON, app_command, page_token

TOKEN = "token-de-operacao-bem-comprido"


async def test_an_address_is_found_through_its_hash_in_any_spelling_and_keeps_its_first_reason(
    db: Database,
) -> None:
    assert await suppression.suppress(db, " Ana@Exemplo.com ", Reason.OPTED_OUT, "link")
    assert not await suppression.suppress(db, "ana@exemplo.com", Reason.COMPLAINED)

    async with db.read() as conn:
        [row] = (await conn.execute(select(suppressions))).all()
    assert row.address_hash == hashlib.sha256(b"ana@exemplo.com").hexdigest()
    assert (row.email, row.reason, row.detail) == ("ana@exemplo.com", "descadastro", "link")
    assert await suppression.reason_for(db, "ANA@exemplo.com") == Reason.OPTED_OUT
    found = await suppression.reasons_for(db, ["ana@exemplo.com", "bia@exemplo.com"])
    assert found == {"ana@exemplo.com": Reason.OPTED_OUT}


async def test_lifting_removes_the_entry_and_only_for_the_reason_asked(db: Database) -> None:
    await suppression.suppress(db, "ana@exemplo.com", Reason.BOUNCED, "5.1.1")

    only_opt_out = await suppression.lift(
        db, "ana@exemplo.com", by="a pessoa", why="voltar", only=Reason.OPTED_OUT
    )
    assert only_opt_out is None
    lifted = await suppression.lift(db, "ana@exemplo.com", by="cli: ops", why="engano")
    assert lifted is not None and lifted.reason == Reason.BOUNCED
    assert await suppression.reason_for(db, "ana@exemplo.com") is None


async def test_erasing_keeps_an_opt_out_as_its_hash_alone_and_drops_any_other_entry(
    db: Database,
) -> None:
    await suppression.suppress(db, "ana@exemplo.com", Reason.OPTED_OUT, "link do convite")
    await suppression.suppress(db, "bia@exemplo.com", Reason.COMPLAINED, "abuse")

    assert await suppression.erase(db, "ana@exemplo.com") == Reason.OPTED_OUT
    assert await suppression.erase(db, "bia@exemplo.com") == Reason.COMPLAINED

    [entry] = await suppression.listing(db)
    assert (entry.email, entry.detail) == (None, None)
    assert await suppression.reason_for(db, "ana@exemplo.com") == Reason.OPTED_OUT
    assert await suppression.reason_for(db, "bia@exemplo.com") is None


@pytest.fixture
async def ops(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with running_app(replace(settings, ops_token=TOKEN)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            login = page_token((await http.get("/operacao")).text)
            await http.post("/operacao/entrar", data={"token": TOKEN, "csrf_token": login})
            yield http


async def test_operators_see_the_list_and_lift_an_entry_after_confirming_with_who_and_why(
    ops: httpx.AsyncClient, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    await suppression.suppress(db, "ana@exemplo.com", Reason.BOUNCED, "5.1.1")

    page = await ops.get("/operacao")
    assert "Lista de supressão" in page.text
    assert "ana@exemplo.com" in page.text and "Devolução permanente (5.1.1)" in page.text
    # The lift is behind a confirmation step that asks who and why.
    assert "<summary>Retirar da lista" in page.text and 'name="quem" required' in page.text
    as_json = (await ops.get("/operacao", headers=JSON)).json()["supressao"]
    assert [(e["email"], e["motivo"]) for e in as_json] == [("ana@exemplo.com", "devolucao")]

    key = suppression.address_hash("ana@exemplo.com")
    token = page_token(page.text)
    no_reason = await ops.post(
        "/operacao/supressao/retirar", data={"csrf_token": token, "endereco": key, "quem": "Bia"}
    )
    assert no_reason.status_code == 400
    with caplog.at_level(logging.WARNING, logger="app.consent.suppression"):
        lifted = await ops.post(
            "/operacao/supressao/retirar",
            data={"csrf_token": token, "endereco": key, "quem": "Bia", "motivo": "era engano"},
        )

    assert (lifted.status_code, lifted.headers["location"]) == (303, "/operacao?retirado=1")
    assert await suppression.reason_for(db, "ana@exemplo.com") is None
    [line] = [r for r in caplog.records if r.getMessage() == "suppression lifted"]
    assert (line.lifted_by, line.why) == ("operacao: Bia", "era engano")  # type: ignore[attr-defined]
    assert "ana@exemplo.com" not in str(line.__dict__)
    after = await ops.get("/operacao?retirado=1")
    assert "Endereço retirado da lista de supressão" in after.text


async def test_lifting_from_operacao_needs_the_operator(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    await suppression.suppress(db, "ana@exemplo.com", Reason.OPTED_OUT)
    async with running_app(replace(settings, ops_token=TOKEN)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            token = page_token((await http.get("/operacao")).text)
            key = suppression.address_hash("ana@exemplo.com")
            refused = await http.post(
                "/operacao/supressao/retirar",
                data={"csrf_token": token, "endereco": key, "quem": "x", "motivo": "y"},
            )
    assert refused.status_code == 401
    assert await suppression.reason_for(db, "ana@exemplo.com") == Reason.OPTED_OUT


async def test_the_command_line_lists_the_entries_and_lifts_one(
    settings: Settings, db: Database
) -> None:
    await suppression.suppress(db, "ana@exemplo.com", Reason.OPTED_OUT, "link do convite")
    await suppression.suppress(db, "bia@exemplo.com", Reason.COMPLAINED, "Feedback-Type: abuse")

    listed = await app_command(settings, "suppression", "list")
    assert listed.returncode == 0, listed.stderr
    assert "2 endereços na lista de supressão." in listed.stdout
    assert "ana@exemplo.com  Pediu para não receber (link do convite)" in listed.stdout
    assert "bia@exemplo.com  Marcou como spam" in listed.stdout

    lifted = await app_command(
        settings, "suppression", "lift", "Bia@Exemplo.com", "--motivo", "pediu", "--quem", "ops"
    )
    assert lifted.returncode == 0, lifted.stderr
    assert "saiu da lista de supressão (Marcou como spam)" in lifted.stdout
    assert await suppression.reason_for(db, "bia@exemplo.com") is None
    again = await app_command(settings, "suppression", "lift", "bia@exemplo.com", "--motivo", "x")
    assert again.returncode == 1 and "não está na lista" in again.stdout
