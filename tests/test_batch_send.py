"""Sending a reviewed batch: one transaction, 202/303 to its page, the limits as a whole,
scoped to its sender, guarded by CSRF; all of it through plain forms (no JavaScript)."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import httpx
from sqlalchemy import func, select

from app.config import Settings
from app.storage.database import Database
from app.storage.tables import batches, invites
from tests.batch_helpers import addresses, form_token, kept_rows, review_text, send_reviewed
from tests.fixtures import drain
from tests.helpers import JSON, api_headers, client_for, post_invite, written
from tests.services import ScriptedSmtp


async def send_text(client: httpx.AsyncClient, text: str) -> httpx.Response:
    return await send_reviewed(client, (await review_text(client, text)).text)


async def batched(db: Database) -> int:
    async with db.read() as conn:
        query = select(func.count()).select_from(invites).where(invites.c.batch_id.is_not(None))
        return int((await conn.execute(query)).scalar_one())


async def test_the_no_js_path_review_send_and_follow_the_batch_to_the_end(
    client: httpx.AsyncClient, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    home = await client.get("/")
    assert '<a href="/lotes/novo">Convidar várias pessoas</a>' in home.text
    review = await review_text(client, addresses(3) + "\nnao-e-email")
    assert "Enviar 3 convites" in review.text
    assert "<script" not in review.text.split("</head>")[1]  # a plain form: no JS needed

    sent = await send_reviewed(client, review.text)

    assert sent.status_code == 303
    location = sent.headers["location"]
    assert re.fullmatch(r"/lotes/[\w-]+\?novo=1", location)
    assert await written(db) == (3, 3, 3)  # the ok rows only: invites, events, outbox rows
    assert await batched(db) == 3
    page = await client.get(location)
    assert page.status_code == 200
    assert "Lote de 3 convites" in page.text and "0 de 3 enviados" in page.text
    assert 'data-falar="Recebemos 3 convites, enviando…"' in page.text
    # Only the states that occur, in the rows' words: three on their way.
    assert re.findall(r'<div class="contador[^"]*"><dt>([^<]+)</dt><dd>(\d+)</dd>', page.text) == [
        ("Enviando", "3"),
        ("Pausado", "3"),
    ]  # the second shows only while sending is paused (body[data-envio], app.css)

    await drain(settings)
    done = await client.get(location.split("?")[0])
    assert "Lote terminado" in done.text and "3 enviados." in done.text
    counters = r'<div class="contador[^"]*"><dt>([^<]+)</dt><dd>(\d+)</dd>'
    assert re.findall(counters, done.text) == [("Enviado", "3")]
    # Found again from the home page: "Meus lotes", newest first, with the same counters.
    assert '<a href="/lotes">Meus lotes</a>' in home.text
    listing = await client.get("/lotes")
    assert "Lote de 3 convites" in listing.text and 'href="/lotes/' in listing.text
    assert re.findall(counters, listing.text) == [("Enviado", "3")]
    assert 'data-falar="' not in done.text  # only the first visit says "Recebemos"
    assert len(smtp.received) == 3


async def test_a_json_client_gets_202_with_the_batch_location(
    client: httpx.AsyncClient, db: Database
) -> None:
    response = await client.post(
        "/lotes", json={"enderecos": addresses(2)}, headers=await api_headers(client)
    )

    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/lotes/{response.json()['id']}"
    assert response.json()["mensagem"] == "Recebemos 2 convites, enviando…"
    batch = await client.get(response.headers["location"], headers=JSON)
    assert batch.json()["contagem"]["pendente"] == 2
    assert await written(db) == (2, 2, 2)


async def test_the_status_filter_shows_only_rows_in_that_state(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.reply_next("250 OK", "550 5.1.1 no such user")
    location = (await send_text(client, "a@exemplo.com\nb@exemplo.com")).headers["location"]
    await drain(settings)
    base = location.split("?")[0]

    failed = await client.get(f"{base}?estado=falhou")
    sent = await client.get(f"{base}?estado=enviado")

    assert failed.text.count('class="convite estado-falhou"') == 1
    assert 'class="convite estado-enviado"' not in failed.text
    assert sent.text.count('class="convite estado-enviado"') == 1
    assert "1 enviado, 1 falhou." in sent.text


async def test_a_batch_over_the_daily_limit_is_refused_whole_saying_how_many_fit(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    async with client_for(replace(settings, sends_per_sender_per_day=5), smtp=smtp) as browser:
        await post_invite(browser, "antes1@exemplo.com")
        await post_invite(browser, "antes2@exemplo.com")
        review = await review_text(browser, addresses(4))
        assert "Hoje ainda cabem 3 convites" in review.text

        refused = await send_reviewed(browser, review.text)
        fits = await send_text(browser, addresses(3, "cabe"))

    assert refused.status_code == 429 and refused.headers["retry-after"]
    assert "Este lote tem 4 convites, mas hoje ainda cabem 3" in refused.text
    assert "Nada foi enviado" in refused.text
    assert fits.status_code == 303
    assert await written(db) == (5, 5, 5)  # the two singles and the batch that fit: no part of 4


async def test_a_batch_counts_against_each_recipients_daily_limit_as_a_whole(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    strict = replace(settings, invites_per_recipient_per_day=1)
    async with client_for(strict, smtp=smtp) as browser:
        review = await review_text(browser, "cheia@exemplo.com\nlivre@exemplo.com")
        async with client_for(strict, smtp=smtp, email="outra@exemplo.com") as other:
            await post_invite(other, "cheia@exemplo.com")  # between the review and the send
        refused = await send_reviewed(browser, review.text)

    assert refused.status_code in (409, 429)
    assert "Nada foi enviado" in refused.text
    assert await written(db) == (1, 1, 1)  # only the other sender's invite


async def test_the_per_minute_limit_is_for_single_invites_not_for_a_reviewed_batch(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    fast = replace(settings, sends_per_sender_per_minute=2, sends_per_address_per_minute=2)
    async with client_for(fast, smtp=smtp) as browser:
        sent = await send_text(browser, addresses(10))

    assert sent.status_code == 303
    assert await written(db) == (10, 10, 10)


async def test_with_the_default_limits_a_sender_can_send_one_full_batch_in_a_day(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    assert settings.sends_per_sender_per_day >= settings.batch_max_rows == 1000
    headers = await api_headers(client)
    text = addresses(settings.batch_max_rows)

    response = await client.post("/lotes", json={"enderecos": text}, headers=headers)

    assert response.status_code == 202, response.text[:500]
    assert await written(db) == (1000, 1000, 1000)


async def test_an_address_invited_between_review_and_send_writes_nothing(
    client: httpx.AsyncClient, db: Database
) -> None:
    review = await review_text(client, "ana@exemplo.com\nbia@exemplo.com")
    await post_invite(client, "ana@exemplo.com")

    again = await send_reviewed(client, review.text)

    assert again.status_code == 409
    assert "A lista mudou desde a revisão" in again.text and "Já convidados por você" in again.text
    assert await written(db) == (1, 1, 1)
    async with db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(batches))).scalar_one() == 0


async def test_another_sender_cannot_see_a_batch_or_its_stream(
    client: httpx.AsyncClient, other_client: object
) -> None:
    location = (await send_text(client, addresses(2))).headers["location"].split("?")[0]

    async with other_client() as stranger:  # type: ignore[operator]
        page = await stranger.get(location)
        stream = await stranger.get(f"{location}/eventos")
        json_page = await stranger.get(location, headers=JSON)

    assert page.status_code == stream.status_code == json_page.status_code == 404
    assert "Lote não encontrado" in page.text
    assert (await client.get(location)).status_code == 200


async def test_the_batch_forms_refuse_a_post_without_the_csrf_token(
    client: httpx.AsyncClient, db: Database
) -> None:
    review = await review_text(client, addresses(2))

    forged_review = await client.post("/lotes/revisar", data={"enderecos": addresses(2)})
    forged_send = await client.post("/lotes", data={"linhas": kept_rows(review.text)})

    assert forged_review.status_code == forged_send.status_code == 403
    assert await written(db) == (0, 0, 0)


async def test_a_damaged_kept_list_is_a_400_with_a_message_not_a_trace(
    client: httpx.AsyncClient, db: Database
) -> None:
    review = await review_text(client, addresses(1))

    broken = await send_reviewed(client, review.text, linhas="[[1, 2")

    assert broken.status_code == 400 and "chegou danificada" in broken.text
    assert await written(db) == (0, 0, 0)


async def test_the_mensagem_goes_with_every_invite_of_the_batch(
    client: httpx.AsyncClient, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    message = "Reunião da turma!\n<b>Sexta</b>, 19h."
    token = await form_token(client)
    review = await client.post(
        "/lotes/revisar",
        data={"csrf_token": token, "enderecos": addresses(2), "mensagem": message},
    )
    assert "Mensagem para todos:" in review.text
    assert "&lt;b&gt;Sexta&lt;/b&gt;" in review.text and "<b>Sexta" not in review.text
    kept = re.search(r'name="mensagem" value="([^"]*)"', review.text)
    assert kept is not None

    sent = await send_reviewed(client, review.text, mensagem=html.unescape(kept.group(1)))
    await drain(settings)

    assert sent.status_code == 303
    async with db.read() as conn:
        query = select(invites.c.message).where(invites.c.batch_id.is_not(None))
        stored = (await conn.execute(query)).scalars().all()
    assert stored == [message, message]
    for mail in smtp.received:
        assert message in mail.text


async def test_a_batch_mensagem_over_500_characters_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, db: Database
) -> None:
    response = await client.post(
        "/lotes/revisar",
        data={
            "csrf_token": await form_token(client),
            "enderecos": addresses(2),
            "mensagem": "a" * 501,
        },
    )

    assert response.status_code == 422
    assert "no máximo 500 caracteres" in response.text
    assert await written(db) == (0, 0, 0)


async def test_meus_lotes_lists_only_the_senders_batches_newest_first(
    client: httpx.AsyncClient, other_client: object
) -> None:
    first = (await send_text(client, addresses(2, "um"))).headers["location"].split("?")[0]
    second = (await send_text(client, addresses(1, "dois"))).headers["location"].split("?")[0]
    async with other_client() as other:  # type: ignore[operator]
        theirs = (await send_text(other, addresses(1, "deles"))).headers["location"]

        listed = (await client.get("/lotes", headers=JSON)).json()["lotes"]
        their_page = (await other.get("/lotes")).text

    assert [batch["url"] for batch in listed] == [second, first]
    assert sum(listed[1]["contagem"].values()) == listed[1]["tamanho"] == 2
    assert theirs.split("?")[0] not in [batch["url"] for batch in listed]
    assert first not in their_page and second not in their_page
