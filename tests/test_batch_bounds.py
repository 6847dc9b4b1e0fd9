"""The worst lists we can build are refused at their first bound, in a child process, with a
pt-BR message naming the bound and the row; nothing is written, the Mensagem is kept, and the
web answers others meanwhile. Each file is built here, by the test."""

from __future__ import annotations

import asyncio
import io
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from openpyxl import Workbook

from app.batches.isolation import GRACE_SECONDS, Source, _read_apart
from app.batches.parse import MIB, Bounds, OverBound, parse_csv, parse_pasted, parse_upload
from app.config import Settings
from app.storage.database import Database
from tests.batch_helpers import form_token
from tests.fixtures import drain, process_env
from tests.helpers import client_for, invite_count
from tests.services import AppProcess, ScriptedSmtp, free_port, wait_for_port
from tests.signing_in import sign_in

BOUNDS = Bounds(rows=1000, file_bytes=2 * MIB)
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
SHEET = "xl/worksheets/sheet1.xml"
MAIN = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'


def workbook(*rows: tuple[object, ...]) -> bytes:
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    for row in rows:
        sheet.append(list(row))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def with_member(data: bytes, name: str, content: bytes) -> bytes:
    """The workbook with one member replaced (or added), packed as tight as zip packs."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for item in source.infolist():
            if item.filename != name:
                archive.writestr(item.filename, source.read(item.filename))
        archive.writestr(name, content)
    return out.getvalue()


def sheet_xml(rows: str, dimension: str = "A1:B2") -> bytes:
    return (
        f'<?xml version="1.0"?><worksheet {MAIN}><dimension ref="{dimension}"/>'
        f"<sheetData>{rows}</sheetData></worksheet>"
    ).encode()


def inline(ref: str, text: str) -> str:
    return f'<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'


def shared_strings_bomb(unpacked: int) -> bytes:
    """A workbook whose shared strings unpack to ``unpacked`` bytes (a few KiB on the wire)."""
    item = "<si><t>" + "a" * 1000 + "</t></si>"
    count = unpacked // len(item) + 1
    strings = f'<sst {MAIN} count="{count}" uniqueCount="{count}">' + item * count + "</sst>"
    return with_member(
        workbook(("email",), ("ana@exemplo.com",)), "xl/sharedStrings.xml", strings.encode()
    )


def one_wide_row(cells: int) -> bytes:
    """A heading row followed by ``cells`` empty cells: tiny packed, costly to read; a
    member of random bytes keeps the whole file under the packing ratio bound."""
    row = '<row r="1">' + inline("A1", "email") + "<c/>" * cells + "</row>"
    data = with_member(workbook(("email",)), SHEET, sheet_xml(row))
    return with_member(data, "xl/media/ruido.bin", os.urandom(120_000))


# Each bound, at the reader: a test that fails when its guard is removed.


def test_a_shared_strings_zip_bomb_is_refused_by_its_declared_size_before_it_is_opened() -> None:
    data = shared_strings_bomb(9 * MIB)
    assert len(data) < 200 * 1024

    with pytest.raises(OverBound, match="passa de 8 MiB depois de descompactada") as refused:
        parse_upload("bomba.xlsx", data, BOUNDS)
    assert refused.value.status == 413


def test_an_xlsx_that_unpacks_a_hundred_times_its_size_is_refused() -> None:
    data = shared_strings_bomb(3 * MIB)  # under the size bound, far over any real sheet's ratio

    with pytest.raises(OverBound, match="cresce mais de 100 vezes") as refused:
        parse_upload("bomba.xlsx", data, BOUNDS)
    assert refused.value.status == 413


def test_a_dimension_claiming_16384_columns_does_not_pad_the_rows() -> None:
    body = (
        '<row r="1">'
        + inline("A1", "email")
        + "</row>"
        + "".join(
            f'<row r="{n}">{inline(f"A{n}", f"p{n}@exemplo.com")}</row>' for n in range(2, 1002)
        )
    )
    data = with_member(workbook(("email",)), SHEET, sheet_xml(body, "A1:XFD1002"))
    assert len(data) < 16 * 1024

    rows = parse_upload("largura.xlsx", data, BOUNDS)

    assert len(rows) == 1000 and rows[-1].email == "p1001@exemplo.com"


def test_a_sheet_wider_than_the_column_bound_is_refused_naming_the_row() -> None:
    data = workbook(("email", "nome"), ("ana@exemplo.com", "Ana"), ("bia@exemplo.com", *range(100)))

    with pytest.raises(OverBound, match=r"A planilha passa de 100 colunas \(linha 3\)"):
        parse_upload("larga.xlsx", data, BOUNDS)


def test_a_csv_wider_than_the_column_bound_is_refused_naming_the_row() -> None:
    data = ("email\nana@exemplo.com\n" + "bia@exemplo.com" + ",x" * 100 + "\n").encode()

    with pytest.raises(OverBound, match=r"A planilha passa de 100 colunas \(linha 3\)"):
        parse_csv(data, BOUNDS)


def test_a_csv_of_empty_cells_is_refused_by_the_cell_count() -> None:
    data = b"email\n" + b"," * (1024 * 1024) + b"\n"

    with pytest.raises(OverBound, match=r"células, contando as vazias \(linha 2\)"):
        parse_csv(data, BOUNDS)


def test_a_cell_longer_than_the_bound_but_under_the_csv_modules_is_refused() -> None:
    data = ("email,nome\nana@exemplo.com," + "x" * 5001 + "\n").encode()

    with pytest.raises(OverBound, match=r"A linha 2 tem um valor com mais de 5\.000 caracteres"):
        parse_csv(data, BOUNDS)


def test_a_pasted_entry_longer_than_a_cell_is_refused_as_soon_as_it_is() -> None:
    with pytest.raises(OverBound, match=r"A linha 2 tem um valor com mais de 5\.000 caracteres"):
        parse_pasted("ana@exemplo.com\n" + "b" * 10_000 + "@exemplo.com", BOUNDS)


def test_more_characters_than_the_bound_are_refused_naming_the_row() -> None:
    text = "\n".join(f"Pessoa {'x' * 4000} <p{n}@exemplo.com>" for n in range(300))

    with pytest.raises(OverBound, match=r"A lista passa de 1.000.000 caracteres \(linha 249\)"):
        parse_pasted(text, BOUNDS)


def test_a_pasted_list_stops_at_the_first_row_past_the_limit() -> None:
    text = "\n".join(f"p{n}@exemplo.com" for n in range(150_000))  # about 2 MiB
    assert len(text) > 2_000_000

    with pytest.raises(OverBound, match=r"A lista passa de 1.000 endereços \(linha 1.001\)"):
        parse_pasted(text, BOUNDS)


def test_a_reading_past_its_time_stops_naming_the_row() -> None:
    late = replace(BOUNDS, seconds=-1)  # already past: the clock is read before each row

    with pytest.raises(OverBound, match=r"levou mais de -1 segundos .*linha 1\)"):
        parse_pasted("ana@exemplo.com", late)


def test_a_file_over_the_byte_bound_is_413() -> None:
    with pytest.raises(OverBound, match="O arquivo passa de 1 KiB") as refused:
        parse_upload("lista.csv", b"email\n" + b"a@b.c\n" * 200, replace(BOUNDS, file_bytes=1024))
    assert refused.value.status == 413


# The child process: killed at its deadline, bounded in memory.


def test_a_child_that_does_not_answer_in_time_is_killed_and_the_reading_refused() -> None:
    never = replace(BOUNDS, seconds=-GRACE_SECONDS)  # no time at all to wait for the child

    with pytest.raises(OverBound, match="levou mais de") as refused:
        _read_apart(Source(text="ana@exemplo.com"), never)
    assert "parou na linha" not in str(refused.value)  # the parent's word, not the child's


def test_a_child_past_its_memory_bound_is_refused_as_too_big() -> None:
    small = replace(BOUNDS, memory_bytes=160 * MIB)

    with pytest.raises(OverBound, match="grande demais para ser lida") as refused:
        _read_apart(Source(filename="larga.xlsx", data=one_wide_row(600_000)), small)
    assert refused.value.status == 413


def test_the_child_reads_a_list_and_hands_back_its_rows() -> None:
    rows = _read_apart(Source(text="Ana <ana@exemplo.com>; bia@exemplo.com"), BOUNDS)

    assert [(r.line, r.email, r.name) for r in rows] == [
        (1, "ana@exemplo.com", "Ana"),
        (1, "bia@exemplo.com", None),
    ]


# Over HTTP: the refusal names the bound, keeps what was typed, and writes nothing.


async def upload(client: httpx.AsyncClient, name: str, data: bytes, path: str) -> httpx.Response:
    token = await form_token(client)
    fields = {"csrf_token": token, "enderecos": "", "mensagem": "Venha à festa!"}
    return await client.post(path, data=fields, files={"planilha": (name, data, XLSX)})


@pytest.mark.parametrize("path", ["/lotes/revisar", "/lotes"])
async def test_a_zip_bomb_gets_413_naming_the_bound_keeps_the_message_and_writes_nothing(
    client: httpx.AsyncClient, db: Database, path: str
) -> None:
    page = await upload(client, "bomba.xlsx", shared_strings_bomb(60 * MIB), path)

    assert page.status_code == 413
    assert "passa de 8 MiB depois de descompactada" in page.text
    assert "Venha à festa!</textarea>" in page.text
    assert await invite_count(db) == 0


async def test_a_2_mib_paste_gets_422_naming_the_row_and_keeps_the_text(
    client: httpx.AsyncClient, db: Database
) -> None:
    text = "\n".join(f"p{n}@exemplo.com" for n in range(107_000))
    assert 2 * MIB - 100_000 < len(text.encode()) < 2 * MIB - 1000  # the body limit: 2 MiB
    token = await form_token(client)
    fields = {"csrf_token": token, "enderecos": text, "mensagem": "Venha!"}

    empty = {"planilha": ("", b"", "application/octet-stream")}  # multipart, as the form is

    # The token is read from the multipart body, as a browser without JavaScript sends it.
    page = await client.post("/lotes/revisar", data=fields, files=empty)

    assert page.status_code == 422
    assert "A lista passa de 1.000 endereços (linha 1.001)" in page.text
    assert "p106999@exemplo.com" in page.text and "Venha!</textarea>" in page.text
    assert await invite_count(db) == 0


async def test_a_csv_with_a_1_mb_cell_gets_422_naming_its_line(
    client: httpx.AsyncClient, db: Database
) -> None:
    data = b'email\nana@exemplo.com\n"' + b"x" * (1024 * 1024) + b'"\n'
    token = await form_token(client)

    page = await client.post(
        "/lotes/revisar",
        data={"csrf_token": token, "mensagem": "Oi"},
        files={"planilha": ("lista.csv", data, "text/csv")},
    )

    assert page.status_code == 422
    assert "A linha 3 tem um valor com mais de 5.000 caracteres" in page.text
    assert await invite_count(db) == 0


async def test_reviews_are_limited_per_account_with_a_pt_br_429_keeping_the_text(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    async with client_for(replace(settings, batch_reviews_per_minute=2), smtp=smtp) as browser:
        token = await form_token(browser)
        fields = {"csrf_token": token, "enderecos": "ana@exemplo.com", "mensagem": "Oi"}
        answers = [(await browser.post("/lotes/revisar", data=fields)) for _ in range(3)]
    async with client_for(
        replace(settings, batch_reviews_per_minute=2), smtp=smtp, email="outra@exemplo.com"
    ) as other:
        token = await form_token(other)
        theirs = await other.post(
            "/lotes/revisar", data={"csrf_token": token, "enderecos": "a@b.co"}
        )

    assert [a.status_code for a in answers] == [200, 200, 429]
    assert "Você revisou muitas listas no último minuto" in answers[2].text
    assert 1 <= int(answers[2].headers["retry-after"]) <= 60
    assert "ana@exemplo.com</textarea>" in answers[2].text and "Oi</textarea>" in answers[2].text
    assert theirs.status_code == 200  # per account


# A real uvicorn: the web answers while the worst file is being read.


@pytest.fixture
def web(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, AppProcess]]:
    port = free_port()
    with AppProcess.web(process_env(settings), tmp_path / "web.log", port) as process:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}", process


async def test_saude_answers_while_the_worst_file_is_being_read(
    web: tuple[str, AppProcess], settings: Settings, smtp: ScriptedSmtp
) -> None:
    url, process = web
    worst = one_wide_row((8 * MIB - 200_000) // 4)  # every bound but memory and time
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as person,
        httpx.AsyncClient(base_url=url, timeout=5) as monitor,
    ):
        await sign_in(person, smtp, "marta@exemplo.com", lambda: drain(settings))
        reading = asyncio.create_task(upload(person, "pior.xlsx", worst, "/lotes/revisar"))

        async def started() -> None:
            while "batch read started" not in process.log():
                assert not reading.done(), process.describe()
                await asyncio.sleep(0.02)

        await asyncio.wait_for(started(), 30)
        health = await asyncio.wait_for(monitor.get("/saude"), 3)

        assert health.status_code == 200 and health.json()["saudavel"], health.text
        assert not reading.done()  # answered while the file was still being read
        refused = await reading
    # Past its memory bound, or its time on a busy machine: either way a bound, named.
    assert refused.status_code in (413, 422), refused.text
    assert re.search(r"grande demais para ser lida|levou mais de 10 segundos", refused.text)
    assert "batch read finished" in process.log()
