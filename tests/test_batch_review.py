"""Every verdict of the review, and that reviewing writes nothing."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from io import BytesIO

import httpx
from openpyxl import Workbook

from app.config import Settings
from app.invites.status import Status
from app.invites.transitions import mark_bounced
from app.storage.database import Database
from tests.batch_helpers import addresses, review_file, review_text
from tests.fixtures import drain
from tests.helpers import (
    api_headers,
    client_for,
    invite_count,
    invite_row,
    post_invite,
    wait_for_status,
)
from tests.services import ScriptedSmtp


def counts(page: str) -> dict[str, int]:
    return {
        label: int(number)
        for number, label in re.findall(
            r"<li class=\"veredito-\w+\"><strong>(\d+)</strong> ([^<]+)</li>", page
        )
    }


async def test_a_clean_list_is_all_ready_and_the_button_says_how_many(
    client: httpx.AsyncClient, db: Database
) -> None:
    page = await review_text(client, addresses(3) + "\nAna Souza <ana@exemplo.com>")

    assert page.status_code == 200
    assert counts(page.text) == {"Prontos para enviar": 4}
    assert "Enviar 4 convites" in page.text
    assert await invite_count(db) == 0  # reviewing writes nothing


async def test_invalid_rows_get_the_single_forms_messages_and_an_error_summary_linking_them(
    client: httpx.AsyncClient,
) -> None:
    page = await review_text(client, "ana@exemplo.com\nnao-e-email\nBia\u202e <bia@exemplo.com>")

    assert counts(page.text) == {"Prontos para enviar": 1, "Endereço ou nome inválido": 2}
    assert "Este e-mail não parece válido" in page.text
    assert "O nome não pode ter quebras de linha nem caracteres de controle." in page.text
    summary = page.text.split('class="resumo-erros"')[1].split("</div>")[0]
    assert 'href="#linha-2"' in summary and 'href="#linha-3"' in summary
    assert 'id="linha-2"' in page.text
    assert "Enviar 1 convite<" in page.text


async def test_a_row_repeated_in_the_list_is_flagged_with_the_line_it_repeats(
    client: httpx.AsyncClient,
) -> None:
    page = await review_text(client, "ana@exemplo.com\nbia@exemplo.com\nANA@exemplo.com")

    assert counts(page.text) == {"Prontos para enviar": 2, "Repetidos nesta lista": 1}
    assert "Repetido nesta lista (já está na linha 1)." in page.text


async def test_an_address_already_invited_shows_its_state_and_a_link(
    client: httpx.AsyncClient,
) -> None:
    existing = await post_invite(client, "ana@exemplo.com")
    other = await post_invite(client, "Caio@exemplo.com")

    # One mailbox however its local part is typed: the send would refuse it too.
    page = await review_text(client, "ana@exemplo.com\nbia@exemplo.com\ncaio@exemplo.com")

    assert counts(page.text) == {"Prontos para enviar": 1, "Já convidados por você": 2}
    assert "o convite está na fila para envio" in page.text
    assert f'href="/convites/{existing["id"]}"' in page.text
    assert f'href="/convites/{other["id"]}"' in page.text


async def test_an_address_that_bounced_before_is_flagged(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    sent = await post_invite(client, "volta@exemplo.com")
    await drain(settings)
    invite = await wait_for_status(db, sent["id"], Status.ENVIADO)
    async with db.write() as conn:
        await mark_bounced(conn, invite.id, None, "Caixa postal inexistente.")
    assert (await invite_row(db, sent["id"])).status == Status.DEVOLVIDO

    page = await review_text(client, "volta@exemplo.com")

    assert counts(page.text) == {"Devolvidos antes": 1}
    assert "voltou (devolvido)" in page.text
    assert "Nenhuma linha pode ser enviada" in page.text


async def test_the_review_says_nothing_about_another_senders_invites(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    strict = replace(settings, invites_per_recipient_per_day=1)
    async with client_for(strict, smtp=smtp, email="outra@exemplo.com") as other:
        await post_invite(other, "cheia@exemplo.com")
    async with client_for(strict, smtp=smtp) as mine:
        page = await review_text(mine, "cheia@exemplo.com\nlivre@exemplo.com")
        as_json = await mine.post(
            "/lotes/revisar",
            json={"enderecos": "cheia@exemplo.com"},
            headers=await api_headers(mine),
        )

    # Both rows read alike: whether someone else invited an address today is theirs to know.
    assert counts(page.text) == {"Prontos para enviar": 2}
    assert "cheia@exemplo.com" in page.text and "remetentes" not in page.text
    assert as_json.json()["contagem"] == {"ok": 1}


async def test_a_cell_too_long_refuses_the_file_naming_its_line(client: httpx.AsyncClient) -> None:
    big = "x" * (200 * 1024)
    data = f'email\nana@exemplo.com\n"{big}"\n'.encode()

    page = await review_file(client, "lista.csv", data)

    assert page.status_code == 422
    assert "A linha 3 tem um valor com mais de 5.000 caracteres" in page.text


async def test_an_xlsx_upload_is_reviewed_like_a_pasted_list(client: httpx.AsyncClient) -> None:
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    for row in (("email", "nome"), ("ana@exemplo.com", "Souza, Ana"), ("ruim", "Bia")):
        sheet.append(row)
    out = BytesIO()
    book.save(out)
    kind = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

    page = await review_file(client, "lista.xlsx", out.getvalue(), kind)

    assert counts(page.text) == {"Prontos para enviar": 1, "Endereço ou nome inválido": 1}
    assert "Souza, Ana" in page.text


def field_error(page: str, field: str) -> str | None:
    """The message shown under ``field`` (``<p id="{field}-erro">``), if any."""
    found = re.search(rf'<p id="{field}-erro" class="erro-campo">([^<]*)</p>', page)
    return html.unescape(found.group(1)) if found else None


async def test_a_broken_file_gets_a_clear_pt_br_422_at_the_planilha_field_and_no_trace(
    settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    async with client_for(replace(settings, batch_max_rows=5), smtp=smtp) as browser:
        pages = {
            "no email column": await review_file(browser, "lista.csv", b"nome;telefone\nAna;1\n"),
            "empty": await review_file(browser, "lista.csv", b""),
            "corrupt": await review_file(browser, "lista.xlsx", b"PK\x03\x04quebrado"),
            "too many": await review_file(browser, "lista.csv", b"email\n" + b"a@b.com\n" * 6),
        }

    said = {name: field_error(page.text, "planilha") for name, page in pages.items()}
    assert said["no email column"] and "coluna chamada “email”" in said["no email column"]
    assert said["empty"] == "A planilha está vazia: a primeira linha deve ter a coluna “email”."
    assert said["corrupt"] == (
        "Não conseguimos abrir esta planilha .xlsx (o arquivo parece corrompido ou não é do "
        "Excel). Salve de novo ou envie como CSV."
    )  # no Python exception's name
    assert said["too many"] and said["too many"].startswith("A planilha passa de 5 linhas")
    for page in pages.values():
        assert page.status_code == 422
        assert '<li><a href="#planilha">' in page.text  # the error summary links to the file
        assert 'aria-describedby="planilha-dica planilha-erro" aria-invalid="true"' in page.text
        assert field_error(page.text, "enderecos") is None and "#enderecos" not in page.text
        assert "Traceback" not in page.text and 'role="alert"' in page.text
    assert await invite_count(db) == 0


async def test_a_pasted_list_and_a_file_together_are_refused_keeping_the_pasted_list(
    client: httpx.AsyncClient, db: Database
) -> None:
    page = await review_file(
        client, "lista.csv", b"email\nana@exemplo.com\n", text="bia@exemplo.com"
    )

    assert page.status_code == 422
    assert field_error(page.text, "enderecos") == (
        "Use uma coisa só: os endereços colados ou a planilha. Os endereços colados continuam "
        "aqui; para enviar a planilha, apague-os e escolha o arquivo de novo."
    )
    assert "bia@exemplo.com</textarea>" in page.text
    assert await invite_count(db) == 0


async def test_an_empty_form_and_too_many_rows_are_refused_with_the_reason(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    async with client_for(replace(settings, batch_max_rows=5), smtp=smtp) as browser:
        empty = await review_text(browser, "  \n ")
        many = await review_text(browser, addresses(6))

    assert empty.status_code == 422 and "Cole os endereços" in empty.text
    assert many.status_code == 422 and "A lista passa de 5 endereços (linha 6)" in many.text


async def test_corrigir_a_lista_after_a_file_brings_its_rows_back_as_lines(
    client: httpx.AsyncClient,
) -> None:
    csv = b"email,nome\nana@exemplo.com,Ana Souza\nbia@exemplo.com,\n"
    page = await review_file(client, "lista.csv", csv)
    assert page.status_code == 200
    [kept] = re.findall(r'name="enderecos" value="([^"]*)"', page.text)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None

    again = await client.post(
        "/lotes/novo",
        data={"csrf_token": token.group(1), "enderecos": html.unescape(kept), "mensagem": ""},
    )

    assert again.status_code == 200
    assert "Ana Souza &lt;ana@exemplo.com&gt;\nbia@exemplo.com</textarea>" in again.text
