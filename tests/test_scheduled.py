"""Scheduled invites ("Enviar em", ``enviar_em``): written ``agendado`` with no job, released to
``pendente`` by the worker's sweep at their moment, cancelled or moved before it. Time moves
through the ``clock`` fixture; a real in-process worker (burst) and real SMTP do the sending."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import text, update

from app.clock import DISPLAY_TZ, utcnow
from app.config import Settings
from app.invites import transitions
from app.invites.status import Status
from app.sending.heartbeat import WORKERS, beat
from app.sending.pause import pause_sending
from app.storage.database import Database
from app.storage.tables import invites
from tests.fixtures import BACKEND, MovableClock, drain, running_app
from tests.helpers import (
    JSON,
    api_headers,
    app_command,
    csrf_token,
    invite_row,
    schedule,
    written,
)
from tests.services import ScriptedSmtp
from tests.test_health import codes, saude
from tests.test_metrics import scrape, value
from tests.waiting import eventually

OPS_TOKEN = "token-de-operacao-bem-comprido"
OPS = {"Authorization": f"Bearer {OPS_TOKEN}"}

HOUR = 3600.0


async def test_a_scheduled_invite_waits_as_agendado_and_goes_at_its_moment(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    when = (
        (utcnow() + timedelta(days=2))
        .astimezone(DISPLAY_TZ)
        .replace(hour=9, minute=0, second=0, microsecond=0)
    )
    response = await schedule(client, "ana@exemplo.com", when)

    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "agendado"
    assert body["mensagem"] == (
        f"Agendado para {when:%d/%m} às 9h00 (convite para ana@exemplo.com)."
    )
    assert datetime.fromisoformat(body["enviar_em"]) == when
    assert await written(db) == (1, 1, 0)  # the row and its event; no outbox row, no job
    await drain(settings)
    assert (await invite_row(db, body["id"])).status == Status.AGENDADO
    assert smtp.received == []

    clock.advance((when - utcnow()).total_seconds() + 1)
    await drain(settings)  # its sweep releases the invite, its job sends it

    assert (await invite_row(db, body["id"])).status == Status.ENVIADO
    assert [message.rcpt_tos for message in smtp.received] == [["ana@exemplo.com"]]
    shown = (await client.get(f"/convites/{body['id']}", headers=JSON)).json()
    history = [line["descricao"] for line in shown["historico"]]
    assert history == [
        f"Agendado para {when:%d/%m} às 9h00",
        "Chegou a hora marcada: na fila para envio",
        "Tentativa 1: enviando",
        "Tentativa 1: enviado",
    ]


async def test_a_moment_past_too_far_or_without_offset_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, settings: Settings, db: Database, clock: MovableClock
) -> None:
    now = utcnow()
    cases = {
        (now - timedelta(minutes=1)).isoformat(): "Esse momento já passou",
        (now + timedelta(days=settings.schedule_max_days, hours=1)).isoformat(): (
            f"no máximo {settings.schedule_max_days} dias"
        ),
        (now + timedelta(days=1)).replace(tzinfo=None).isoformat(): "fuso horário",
        "amanhã às nove": "formato",
    }
    for moment, says in cases.items():
        response = await schedule(client, "ana@exemplo.com", moment)
        assert response.status_code == 422, moment
        assert says in response.json()["campos"]["enviar_em"], moment

    assert await written(db) == (0, 0, 0)


async def test_the_form_takes_sao_paulo_time(
    client: httpx.AsyncClient, db: Database, clock: MovableClock
) -> None:
    local = (utcnow() + timedelta(days=3)).astimezone(DISPLAY_TZ)
    typed = f"{local:%Y-%m-%d}T14:30"  # what a datetime-local field posts

    response = await client.post(
        "/convites",
        data={
            "email": "bia@exemplo.com",
            "enviar_em": typed,
            "csrf_token": await csrf_token(client),
        },
    )

    assert response.status_code == 303
    public_id = response.headers["location"].rsplit("/", 1)[1]
    invite = await invite_row(db, public_id)
    assert invite.status == Status.AGENDADO
    assert invite.send_at == datetime.fromisoformat(typed).replace(tzinfo=DISPLAY_TZ)
    page = await client.get(response.headers["location"])
    assert f"Agendado para {local:%d/%m} às 14h30" in page.text


async def test_a_scheduled_invite_counts_as_on_its_way_and_in_the_summary(
    client: httpx.AsyncClient, clock: MovableClock
) -> None:
    first = await schedule(client, "ana@exemplo.com", utcnow() + timedelta(hours=5))
    again = await client.post(
        "/convites", json={"email": "ana@exemplo.com"}, headers=await api_headers(client)
    )

    assert first.status_code == 202 and again.status_code == 409
    summary = (await client.get("/convites/resumo", headers=JSON)).json()
    assert summary["agendados"] == 1 and summary["aguardando_resposta"] == 0
    listed = (await client.get("/convites?estado=agendados", headers=JSON)).json()
    assert [row["id"] for row in listed["convites"]] == [first.json()["id"]]


async def test_a_cancelled_scheduled_invite_is_never_sent(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    created = (await schedule(client, "ana@exemplo.com", utcnow() + timedelta(hours=2))).json()
    cancelled = await client.post(
        f"/convites/{created['id']}/cancelar", headers=await api_headers(client)
    )
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelado"

    clock.advance(3 * HOUR)
    await drain(settings)

    assert (await invite_row(db, created["id"])).status == Status.CANCELADO
    assert smtp.received == []


async def test_rescheduling_moves_the_moment_and_only_before_it_comes(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    created = (await schedule(client, "ana@exemplo.com", utcnow() + timedelta(hours=1))).json()
    path = f"/convites/{created['id']}/reagendar"
    later = utcnow() + timedelta(hours=5)
    too_late = await client.post(
        path, json={"enviar_em": "2000-01-01T09:00:00-03:00"}, headers=await api_headers(client)
    )
    moved = await client.post(
        path, json={"enviar_em": later.isoformat()}, headers=await api_headers(client)
    )

    assert too_late.status_code == 422
    assert moved.status_code == 200 and moved.json()["status"] == "agendado"
    assert datetime.fromisoformat(moved.json()["enviar_em"]) == later
    clock.advance(2 * HOUR)  # past the first moment, not the new one
    await drain(settings)
    assert (await invite_row(db, created["id"])).status == Status.AGENDADO

    clock.advance(4 * HOUR)
    await drain(settings)
    assert (await invite_row(db, created["id"])).status == Status.ENVIADO
    assert len(smtp.received) == 1
    after = await client.post(
        path,
        json={"enviar_em": (utcnow() + timedelta(hours=1)).isoformat()},
        headers=await api_headers(client),
    )
    assert after.status_code == 409


async def test_a_past_moment_brings_the_form_back_with_the_error_with_and_without_javascript(
    client: httpx.AsyncClient, db: Database
) -> None:
    when = utcnow() + timedelta(hours=1)
    created = (await schedule(client, "ana@exemplo.com", when)).json()
    path = f"/convites/{created['id']}/reagendar"
    token = await csrf_token(client)
    past = f"{(utcnow() - timedelta(days=1)).astimezone(DISPLAY_TZ):%Y-%m-%dT09:00}"
    form = {"enviar_em": past, "csrf_token": token}

    as_form = await client.post(path, data=form)
    as_htmx = await client.post(path, data=form, headers={"HX-Request": "true"})

    said = "Esse momento já passou. Escolha uma data e hora no futuro."
    field = f'id="reagendar-{created["id"]}"'
    for answer in (as_form, as_htmx):
        assert answer.status_code == 422
        assert '<details class="convite-acao reagendar" open>' in answer.text
        assert f'value="{past}"' in answer.text and field in answer.text
        assert f'aria-describedby="reagendar-{created["id"]}-erro"' in answer.text
        assert (
            f'<p id="reagendar-{created["id"]}-erro" class="erro-campo">{said}</p>' in answer.text
        )
    assert "<h1>Convite para ana@exemplo.com</h1>" in as_form.text  # the invite's own page
    assert as_htmx.headers["HX-Retarget"] == f"#convite-{created['id']}"
    assert (await invite_row(db, created["id"])).send_at == when


async def test_two_sweeps_at_once_release_a_scheduled_invite_once(
    client: httpx.AsyncClient, db: Database, clock: MovableClock
) -> None:
    created = (await schedule(client, "ana@exemplo.com", utcnow() + timedelta(hours=1))).json()
    clock.advance(HOUR + 1)

    first, second = await asyncio.gather(transitions.release_due(db), transitions.release_due(db))

    assert len(first) + len(second) == 1
    assert await written(db) == (1, 2, 1)  # one release event, one outbox row (one job)
    assert await transitions.release_due(db) == []
    assert (await invite_row(db, created["id"])).status == Status.PENDENTE


async def test_the_pause_applies_at_the_scheduled_moment(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    created = (await schedule(client, "ana@exemplo.com", utcnow() + timedelta(hours=1))).json()
    await pause_sending(db, "teste")
    clock.advance(HOUR + 1)

    await drain(settings)

    assert (await invite_row(db, created["id"])).status == Status.PENDENTE
    assert smtp.received == []


async def test_saude_alarms_when_a_scheduled_invite_is_overdue_and_status_shows_the_next(
    client: httpx.AsyncClient, settings: Settings, redis: Redis, clock: MovableClock
) -> None:
    await schedule(client, "ana@exemplo.com", utcnow() + timedelta(hours=1))
    await beat(redis, WORKERS, "worker-a")

    on_time = (await saude(settings)).json()
    shown = (await app_command(settings, "status")).stdout
    async with running_app(replace(settings, ops_token=OPS_TOKEN)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as ops:
            page = (await ops.get("/operacao", headers=OPS)).text
    clock.advance(HOUR + settings.alarm_pending_seconds + 1)  # and no sweep released it
    await beat(redis, WORKERS, "worker-a")
    late = await saude(settings)

    assert "scheduled_overdue" not in codes(on_time)
    assert on_time["agendados"]["proximo_envio"] is not None
    assert on_time["lembretes_a_enviar"] == 0
    assert "Próximo agendado: 20" in shown and "Lembretes a enviar: 0" in shown
    assert "Próximo agendado" in page and "Lembretes a enviar" in page
    assert late.status_code == 503 and "scheduled_overdue" in codes(late.json())


async def test_a_moment_not_before_the_occasion_is_refused_and_nothing_changes(
    client: httpx.AsyncClient, settings: Settings, db: Database, clock: MovableClock
) -> None:
    occasion = utcnow() + timedelta(days=2)
    refused = await schedule(
        client,
        "ana@exemplo.com",
        occasion + timedelta(hours=1),
        ocasiao="Corrida",
        ocasiao_em=occasion.isoformat(),
    )
    assert refused.status_code == 422
    assert "antes da ocasião" in refused.json()["campos"]["enviar_em"]
    assert await written(db) == (0, 0, 0)

    before = utcnow() + timedelta(days=1)
    created = await schedule(
        client, "ana@exemplo.com", before, ocasiao="Corrida", ocasiao_em=occasion.isoformat()
    )
    assert created.status_code == 202, created.text
    moved = await client.post(
        f"/convites/{created.json()['id']}/reagendar",
        json={"enviar_em": occasion.isoformat()},
        headers=await api_headers(client),
    )

    assert moved.status_code == 422
    assert "antes da ocasião" in moved.json()["campos"]["enviar_em"]
    assert (await invite_row(db, created.json()["id"])).send_at == before


async def test_an_overdue_scheduled_row_says_it_is_leaving_and_its_latency_starts_at_its_moment(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    clock: MovableClock,
) -> None:
    created = (await schedule(client, "ana@exemplo.com", utcnow() + timedelta(days=2))).json()
    row = f"/convites/{created['id']}"
    assert "Sai nessa hora." in (await client.get(row, headers={"HX-Request": "true"})).text

    clock.advance(2 * 24 * HOUR + 1)  # its moment has passed; no sweep has run yet
    overdue = (await client.get(row, headers={"HX-Request": "true"})).text
    assert "Saindo agora." in overdue and "Sai nessa hora" not in overdue

    before = await scrape(client)
    await drain(settings)
    after = await scrape(client)

    def sent(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # From its moment, not from the 202 two days before.
    assert sent("convites_accepted_to_sent_seconds_count") == 1
    assert sent("convites_accepted_to_sent_seconds_bucket", le="60") == 1


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite's one writer runs them in turn")
async def test_a_reschedule_that_commits_while_the_release_waits_for_the_row_wins(
    client: httpx.AsyncClient, db: Database, clock: MovableClock
) -> None:
    """The release picks due rows in a subquery; a reschedule committed while it waits for the
    row's lock moves the moment, and the row is checked again as it now is."""
    created = (await schedule(client, "ana@exemplo.com", utcnow() + timedelta(hours=1))).json()
    clock.advance(2 * HOUR)  # its moment has come
    later = utcnow() + timedelta(hours=5)
    other = await db.writer.connect()
    moving = await other.begin()
    await other.execute(
        update(invites).where(invites.c.public_id == created["id"]).values(send_at=later)
    )
    release = asyncio.create_task(transitions.release_due(db))

    async def waits_for_the_row() -> bool:
        async with db.read() as conn:
            waiting = await conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted"))
            return bool(waiting.scalar_one())

    await eventually(waits_for_the_row, what="the release waiting for the row's lock")
    await moving.commit()
    await other.close()

    assert await release == []
    invite = await invite_row(db, created["id"])
    assert (invite.status, invite.send_at) == (Status.AGENDADO, later)
