"""What the invitation is for: a title, and optionally a date and a place, in the subject, the
mail (with an .ics when dated), the invitee's page, the sender's list; the reminder goes the day
before a date that comes first; a past occasion is not reminded and its invites expire."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import icalendar

from app.clock import DISPLAY_TZ, local_moment, utcnow
from app.config import Settings
from app.invites.status import Status
from app.invites.validation import MAX_OCCASION_DAYS
from app.storage.database import Database
from tests.answering import answer_link
from tests.api_keys import bearer, new_key
from tests.fixtures import MovableClock, drain
from tests.helpers import JSON, api_headers, csrf_token, invite_row, written
from tests.services import ScriptedSmtp

HOUR = 3600.0


def next_saturday_at_seven() -> datetime:
    local = utcnow().astimezone(DISPLAY_TZ) + timedelta(days=1)
    while local.weekday() != 5:
        local += timedelta(days=1)
    return local.replace(hour=7, minute=0, second=0, microsecond=0)


async def invite_for(client: httpx.AsyncClient, email: str, **occasion: Any) -> httpx.Response:
    return await client.post(
        "/convites", json={"email": email, **occasion}, headers=await api_headers(client)
    )


async def test_a_dated_occasion_is_said_everywhere_and_its_mail_carries_an_ics(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    clock: MovableClock,
) -> None:
    when = next_saturday_at_seven()
    created = await invite_for(
        client,
        "ana@exemplo.com",
        ocasiao="Corrida de sábado",
        ocasiao_em=when.isoformat(),
        ocasiao_local="Parque da Cidade",
    )
    assert created.status_code == 202, created.text
    await drain(settings)

    words = f"Corrida de sábado, sábado {when:%d/%m} às 7h00, Parque da Cidade"
    # The invitee may live elsewhere: what they read says the time zone.
    told = f"Corrida de sábado, sábado {when:%d/%m} às 7h00 (horário de Brasília), Parque da Cidade"
    mail = smtp.received[-1].message
    assert mail["Subject"] == "Marta Souza convidou você para Corrida de sábado"
    text = mail.get_body(("plain",))
    assert text is not None and f"convidou você para {told}." in text.get_content()
    (ics,) = [
        part for part in mail.iter_attachments() if part.get_content_type() == "text/calendar"
    ]
    event = icalendar.Calendar.from_ical(ics.get_content()).walk("VEVENT")[0]
    assert str(event["SUMMARY"]) == "Corrida de sábado"
    assert str(event["LOCATION"]) == "Parque da Cidade"
    assert event.decoded("DTSTART") == when
    page = await anonymous_client.get(answer_link(smtp, "ana@exemplo.com"))
    assert "convidou você para <strong>Corrida de sábado</strong>, sábado" in page.text
    assert "7h00 (horário de Brasília), Parque da Cidade" in page.text
    listed = await client.get("/convites")
    assert words in listed.text
    shown = (await client.get(f"/convites/{created.json()['id']}", headers=JSON)).json()
    assert shown["ocasiao"] == "Corrida de sábado"


async def test_an_undated_occasion_sends_no_ics(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    assert (await invite_for(client, "bia@exemplo.com", ocasiao="Aniversário")).status_code == 202
    await drain(settings)

    mail = smtp.received[-1].message
    assert mail["Subject"] == "Marta Souza convidou você para Aniversário"
    assert list(mail.iter_attachments()) == []


async def test_an_occasion_without_a_title_or_already_past_is_refused(
    client: httpx.AsyncClient, db: Database, clock: MovableClock
) -> None:
    untitled = await invite_for(client, "ana@exemplo.com", ocasiao_local="Parque")
    past = await invite_for(
        client,
        "ana@exemplo.com",
        ocasiao="Corrida",
        ocasiao_em=(utcnow() - timedelta(hours=1)).isoformat(),
    )
    broken = await invite_for(client, "ana@exemplo.com", ocasiao="Corrida\r\nBcc: x@y.z")

    assert untitled.status_code == 422 and "Dê um nome" in untitled.json()["campos"]["ocasiao"]
    assert past.status_code == 422 and "já passou" in past.json()["campos"]["ocasiao_em"]
    assert broken.status_code == 422 and "quebras de linha" in broken.json()["campos"]["ocasiao"]
    assert await written(db) == (0, 0, 0)


async def test_an_occasion_more_than_five_years_ahead_is_refused_at_its_field(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    db: Database,
    clock: MovableClock,
) -> None:
    says = "A data da ocasião pode ser no máximo 5 anos à frente."
    beyond = utcnow() + timedelta(days=MAX_OCCASION_DAYS, hours=1)
    # 9999-12-31 23:59 in São Paulo is year 10000 in UTC: refused, not overflowed.
    far = ("9999-12-31T23:59:00-03:00", "9000-01-01T00:00:00-03:00", beyond.isoformat())
    key = bearer(await new_key(client))
    for moment in far:
        by_api = await anonymous_client.post(
            "/api/v1/convites",
            json={"email": "ana@exemplo.com", "ocasiao": "Festa", "ocasiao_em": moment},
            headers=key,
        )
        assert by_api.status_code == 422, moment
        assert by_api.json()["campos"] == {"ocasiao_em": says}, moment
    typed = {"email": "ana@exemplo.com", "ocasiao": "Festa", "ocasiao_em": "9999-12-31T23:59"}

    by_form = await client.post("/convites", data={**typed, "csrf_token": await csrf_token(client)})

    assert by_form.status_code == 422
    assert f'<p id="ocasiao_em-erro" class="erro-campo">{says}</p>' in by_form.text
    assert 'value="9999-12-31T23:59"' in by_form.text  # kept as typed
    assert await written(db) == (0, 0, 0)
    within = (utcnow() + timedelta(days=MAX_OCCASION_DAYS - 1)).isoformat()
    accepted = await invite_for(client, "ana@exemplo.com", ocasiao="Festa", ocasiao_em=within)
    assert accepted.status_code == 202


async def test_the_reminder_goes_the_day_before_an_occasion_that_comes_first(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    clock: MovableClock,
) -> None:
    assert settings.reminder_after_seconds > 2 * 24 * HOUR
    when = utcnow() + timedelta(days=2)
    await invite_for(client, "ana@exemplo.com", ocasiao="Corrida", ocasiao_em=when.isoformat())
    await drain(settings)

    clock.advance(12 * HOUR)
    await drain(settings)
    assert len(smtp.received) == 1  # a day and a half before: not yet

    clock.advance(12 * HOUR + 60)
    await drain(settings)
    assert [m.message["Subject"] for m in smtp.received][-1] == (
        "Lembrete: Marta Souza convidou você para Corrida"
    )
    # Unanswered, it expires at the occasion, before its link would: the reminder says so.
    assert settings.invite_ttl_seconds > 2 * 24 * HOUR
    body = smtp.received[-1].message.get_body(("plain",))
    assert body is not None and f"O convite vale até {local_moment(when)} " in body.get_content()


async def test_a_past_occasion_is_not_reminded_and_its_invite_expires(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    when = utcnow() + timedelta(hours=2)
    created = await invite_for(
        client, "ana@exemplo.com", ocasiao="Reunião", ocasiao_em=when.isoformat()
    )
    await drain(settings)

    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)

    assert len(smtp.received) == 1
    assert (await invite_row(db, created.json()["id"])).status == Status.EXPIRADO
