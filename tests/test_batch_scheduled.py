"""A batch's "Enviar em" and occasion (the single form's fields and checks, for every row), its
scheduled rows released by the sweep, and its reminders summed up on its page. Time moves
through the ``clock`` fixture; a real in-process worker (burst) and real SMTP do the sending."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta

import httpx
from sqlalchemy import select

from app.batches.progress import summarize
from app.clock import DISPLAY_TZ, utcnow
from app.config import Settings
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import invites
from tests.api_keys import bearer, new_key
from tests.batch_helpers import addresses, form_token
from tests.fixtures import MovableClock, drain
from tests.helpers import JSON, api_headers, written
from tests.services import ScriptedSmtp

COUNTERS = r'<div class="contador[^"]*"><dt>([^<]+)</dt><dd>(\d+)</dd>'


def local_nine(days: int) -> datetime:
    """9h00 in São Paulo, ``days`` from now: what a person types in "Enviar em"."""
    moment = (utcnow() + timedelta(days=days)).astimezone(DISPLAY_TZ)
    return moment.replace(hour=9, minute=0, second=0, microsecond=0)


def form_fields(page: str, action: str) -> dict[str, str]:
    """The hidden fields a form of ``page`` posting to ``action`` sends (as a browser would)."""
    found = re.search(rf'<form[^>]*action="{re.escape(action)}"[^>]*>(.*?)</form>', page, re.S)
    assert found, f"no form posting to {action}"
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'name="([^"]+)" value="([^"]*)"', found.group(1))
    }


async def review(client: httpx.AsyncClient, **fields: str) -> httpx.Response:
    data = {"csrf_token": await form_token(client), **fields}
    return await client.post("/lotes/revisar", data=data)


async def batch_rows(db: Database) -> list[tuple[str, datetime | None, str | None]]:
    async with db.read() as conn:
        query = (
            select(invites.c.status, invites.c.send_at, invites.c.occasion_title)
            .where(invites.c.batch_id.is_not(None))
            .order_by(invites.c.id)
        )
        return [tuple(row) for row in (await conn.execute(query)).all()]  # type: ignore[misc]


async def test_a_scheduled_batch_is_written_agendado_said_once_and_goes_at_its_moment(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    when = local_nine(2)
    party = local_nine(5).replace(hour=19)
    typed = {
        "enviar_em": f"{when:%Y-%m-%dT%H:%M}",  # what a datetime-local field posts
        "ocasiao": "Corrida de sábado",
        "ocasiao_em": f"{party:%Y-%m-%dT%H:%M}",
        "ocasiao_local": "Parque da Cidade",
    }
    reviewed = await review(client, enderecos=addresses(3), **typed)

    assert reviewed.status_code == 200, reviewed.text
    assert f"Envio agendado para {when:%d/%m} às 9h00" in reviewed.text
    assert "Ocasião: Corrida de sábado" in reviewed.text and "Parque da Cidade" in reviewed.text
    assert "Agendar 3 convites" in reviewed.text
    # "Corrigir a lista" gives back every field as typed, like the list.
    again = await client.post("/lotes/novo", data=form_fields(reviewed.text, "/lotes/novo"))
    for field, value in typed.items():
        assert f'name="{field}" type=' in again.text
        assert f'value="{value}"' in again.text, field

    sent = await client.post("/lotes", data=form_fields(reviewed.text, "/lotes"))

    assert sent.status_code == 303
    assert await written(db) == (3, 3, 0)  # rows and events; no outbox row until its moment
    assert await batch_rows(db) == [("agendado", when, "Corrida de sábado")] * 3
    page = await client.get(sent.headers["location"])
    said = f"Agendado para {when:%d/%m} às 9h00"
    # Said once for the batch: the first visit's sentence; the summary is not news on load.
    assert f'data-falar="Recebemos 3 convites. {said}."' in page.text
    assert f'data-progresso="{said}"' in page.text and "Lote agendado" in page.text
    assert re.findall(COUNTERS, page.text) == [("Agendado", "3")]
    assert all('data-anuncio=""' in row for row in page.text.split('<li id="convite-')[1:])
    shown = (await client.get(sent.headers["location"].split("?")[0], headers=JSON)).json()
    assert shown["contagem"]["agendado"] == 3 and not shown["terminado"]
    assert datetime.fromisoformat(shown["enviar_em"]) == when
    await drain(settings)
    assert smtp.received == []

    clock.advance((when - utcnow()).total_seconds() + 1)
    await drain(settings)  # the sweep releases the rows, the jobs send them

    assert [status for status, _, _ in await batch_rows(db)] == ["enviado"] * 3
    assert all("Corrida de sábado" in mail.message["Subject"] for mail in smtp.received)
    done = await client.get(sent.headers["location"].split("?")[0])
    assert "Lote terminado" in done.text and "3 enviados." in done.text


async def test_a_moment_past_or_too_far_or_a_nameless_occasion_is_refused_keeping_the_form(
    client: httpx.AsyncClient, settings: Settings, db: Database, clock: MovableClock
) -> None:
    past = (utcnow() - timedelta(minutes=5)).astimezone(DISPLAY_TZ)
    far = (utcnow() + timedelta(days=settings.schedule_max_days + 1)).astimezone(DISPLAY_TZ)
    cases = {
        ("enviar_em", f"{past:%Y-%m-%dT%H:%M}"): ("enviar_em", "Esse momento já passou"),
        ("enviar_em", f"{far:%Y-%m-%dT%H:%M}"): (
            "enviar_em",
            f"no máximo {settings.schedule_max_days} dias",
        ),
        ("ocasiao_local", "Parque da Cidade"): ("ocasiao", "Dê um nome à ocasião"),
        ("ocasiao_em", "9999-12-31T23:59"): ("ocasiao_em", "no máximo 5 anos"),
    }
    for (field, value), (wrong, says) in cases.items():
        response = await review(client, enderecos=addresses(2), **{field: value})

        assert response.status_code == 422, field
        assert re.search(rf'<a href="#{wrong}">[^<]*{says}', response.text), field
        assert f'id="{wrong}-erro"' in response.text and f'value="{value}"' in response.text
        assert "pessoa0@exemplo.com" in response.text  # the list is kept too

    assert await written(db) == (0, 0, 0)


async def test_a_moment_that_passed_between_review_and_send_writes_nothing(
    client: httpx.AsyncClient, db: Database, clock: MovableClock
) -> None:
    when = local_nine(1)
    reviewed = await review(client, enderecos=addresses(2), enviar_em=f"{when:%Y-%m-%dT%H:%M}")
    assert reviewed.status_code == 200
    clock.advance((when - utcnow()).total_seconds() + 60)

    sent = await client.post("/lotes", data=form_fields(reviewed.text, "/lotes"))

    assert sent.status_code == 422 and "Esse momento já passou" in sent.text
    assert await written(db) == (0, 0, 0)


async def test_the_api_schedules_a_batch_with_an_offset_and_refuses_one_without(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    db: Database,
    clock: MovableClock,
) -> None:
    when = local_nine(3)
    headers = bearer(await new_key(client))
    body = {"enderecos": addresses(2), "enviar_em": when.isoformat(), "ocasiao": "Festa"}

    response = await anonymous_client.post("/api/v1/lotes", json=body, headers=headers)

    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["mensagem"] == f"Recebemos 2 convites. Agendado para {when:%d/%m} às 9h00."
    assert datetime.fromisoformat(answer["enviar_em"]) == when
    assert await batch_rows(db) == [("agendado", when, "Festa")] * 2

    naive = {**body, "enderecos": addresses(2, "outra"), "enviar_em": f"{when:%Y-%m-%dT%H:%M}"}
    refused = await anonymous_client.post("/api/v1/lotes", json=naive, headers=headers)
    assert refused.status_code == 422
    assert "fuso horário" in refused.json()["campos"]["enviar_em"]
    far = {**body, "enderecos": addresses(2, "outra"), "ocasiao_em": "9999-12-31T23:59:00-03:00"}
    refused = await anonymous_client.post("/api/v1/lotes", json=far, headers=headers)
    assert refused.status_code == 422
    assert "no máximo 5 anos" in refused.json()["campos"]["ocasiao_em"]
    assert len(await batch_rows(db)) == 2


def test_a_batchs_reminders_are_summed_up_in_its_end_summary() -> None:
    sent = {Status.ENVIADO: 4, Status.ACEITO: 1}
    summary = summarize(5, sent, {"enviado": 3, "falhou": 1})
    quiet = summarize(5, sent)

    assert summary.spoken == "5 enviados. 3 lembretes enviados, 1 lembrete não enviado."
    assert quiet.spoken == "5 enviados."
    assert summary.key != quiet.key  # news: the page says it (once)
    assert summarize(5, sent, {"pedido": 2}).spoken == "5 enviados."


def test_scheduled_invites_keep_a_batch_unfinished_and_are_counted() -> None:
    when = local_nine(2)
    waiting = summarize(4, {Status.AGENDADO: 4}, send_at=when)
    partly = summarize(4, {Status.AGENDADO: 3, Status.ENVIADO: 1}, send_at=when)

    assert not waiting.finished and waiting.waiting
    assert waiting.spoken == f"Agendado para {when:%d/%m} às 9h00"
    assert [(c.label, c.count) for c in waiting.counters] == [("Agendado", 4)]
    assert partly.spoken == f"1 de 4 enviados; 3 agendados para {when:%d/%m} às 9h00"


async def test_the_batch_page_sums_up_its_reminders(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    response = await client.post(
        "/lotes", json={"enderecos": addresses(3)}, headers=await api_headers(client)
    )
    location = response.headers["location"]
    await drain(settings)
    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)

    shown = (await client.get(location, headers=JSON)).json()
    assert shown["lembretes"] == {"enviado": 3}
    assert shown["resumo"] == "3 enviados. 3 lembretes enviados."
    page = await client.get(location)
    assert 'data-progresso="3 enviados. 3 lembretes enviados."' in page.text
