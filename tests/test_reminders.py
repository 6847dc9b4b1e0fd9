"""The one reminder: REMINDER_AFTER_SECONDS after the mail left, or when the sender presses
Lembrar; the same link; claimed once however many workers look; a refusal recorded, never
retried, the invite unchanged. Time moves through the ``clock`` fixture; a real in-process worker
(burst: its reminder cron runs at start) and real SMTP."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import httpx

from app.config import Settings
from app.consent import suppression
from app.invites.status import Status
from app.invites.transitions import reminders
from app.sending.pause import pause_sending
from app.storage.database import Database
from tests.answering import answer_link, invited, press
from tests.fixtures import MovableClock, drain, process_env
from tests.helpers import JSON, api_headers, invite_row, post_invite
from tests.services import AppProcess, ScriptedSmtp
from tests.test_metrics import scrape, value
from tests.waiting import eventually


def mails_to(smtp: ScriptedSmtp, email: str) -> list[str]:
    """The subjects of every mail ``email`` received, oldest first."""
    return [m.message["Subject"] for m in smtp.received if email in m.rcpt_tos]


async def history(client: httpx.AsyncClient, public_id: str) -> list[str]:
    shown = (await client.get(f"/convites/{public_id}", headers=JSON)).json()
    return [line["descricao"] for line in shown["historico"]]


async def test_an_unanswered_invite_gets_one_reminder_with_the_same_link(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, link = await invited(client, settings, smtp)
    clock.advance(settings.reminder_after_seconds - 60)
    await drain(settings)
    assert mails_to(smtp, "ana@exemplo.com.br") == ["Você recebeu um convite"]

    clock.advance(61)
    await drain(settings)
    clock.advance(settings.reminder_after_seconds)
    await drain(settings)  # a second pass, days later: still one reminder

    assert mails_to(smtp, "ana@exemplo.com.br") == [
        "Você recebeu um convite",
        "Lembrete: Marta Souza convidou você…",
    ]
    assert answer_link(smtp, "ana@exemplo.com.br") == link  # the same link, still working
    body = smtp.received[-1].message.get_body(("plain",))
    assert body is not None and "O convite vale até" in body.get_content()
    assert (await anonymous_client.get(link)).status_code == 200
    invite = await invite_row(db, public_id)
    assert invite.status == Status.ENVIADO and invite.reminder_status == "enviado"
    assert (await history(client, public_id))[-1].startswith("Lembrete enviado às ")


async def test_no_reminder_after_an_answer_or_a_cancel(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    clock: MovableClock,
) -> None:
    _, link = await invited(client, settings, smtp, "ana@exemplo.com.br")
    cancelled, _ = await invited(client, settings, smtp, "bia@exemplo.com.br")
    await press(anonymous_client, link, "aceitar")
    await client.post(f"/convites/{cancelled}/cancelar", headers=await api_headers(client))

    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)

    assert len(mails_to(smtp, "ana@exemplo.com.br")) == 1
    assert len(mails_to(smtp, "bia@exemplo.com.br")) == 1


async def test_a_refused_reminder_is_in_the_history_and_counted_and_never_retried(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    smtp.always("550 5.1.1 Mailbox unavailable")
    clock.advance(settings.reminder_after_seconds + 1)

    await drain(settings)
    await drain(settings)

    invite = await invite_row(db, public_id)
    assert invite.status == Status.ENVIADO and invite.reminder_status == "falhou"
    assert (await history(client, public_id))[-1].startswith("Lembrete não enviado: ")
    assert "550" in (await history(client, public_id))[-1]
    assert len(smtp.received) == 1  # the invitation; the refused reminder was not taken
    samples = await scrape(client)
    assert value(samples, "convites_reminders_total", result="falhou") == 1
    assert value(samples, "convites_invites_sent_total") == 1  # a reminder is no send


async def test_an_address_suppressed_since_the_invitation_is_never_reminded(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    await suppression.suppress(db, "ana@exemplo.com.br", suppression.Reason.OPTED_OUT)
    clock.advance(settings.reminder_after_seconds + 1)

    await drain(settings)

    invite = await invite_row(db, public_id)
    assert invite.status == Status.ENVIADO and invite.reminder_status == "falhou"
    assert (await history(client, public_id))[-1] == (
        "Lembrete não enviado: Este endereço pediu para não receber convites."
    )
    assert len(smtp.received) == 1  # the invitation only


async def test_lembrar_to_an_address_suppressed_since_is_refused_and_asks_nothing(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    await suppression.suppress(db, "ana@exemplo.com.br", suppression.Reason.OPTED_OUT)

    asked = await client.post(f"/convites/{public_id}/lembrar", headers=await api_headers(client))

    assert asked.status_code == 422
    assert asked.json()["erro"] == suppression.REFUSALS[suppression.Reason.OPTED_OUT]
    assert (await invite_row(db, public_id)).reminder_requested_at is None


async def test_two_workers_claiming_at_once_claim_one_reminder(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    await invited(client, settings, smtp)
    clock.advance(settings.reminder_after_seconds + 1)
    other = Database(settings.database_url)  # a second worker: its own connections
    try:
        claims = await asyncio.gather(
            *(
                reminders.claim_due(
                    either,
                    after_seconds=settings.reminder_after_seconds,
                    ttl_seconds=settings.invite_ttl_seconds,
                    key=settings.secret_key,
                )
                for either in (db, other, db, other)
            )
        )
    finally:
        await other.dispose()

    assert sum(len(claimed) for claimed in claims) == 1
    await drain(settings)  # the cron of a worker started afterwards finds nothing to claim
    assert len(smtp.received) == 1


async def test_lembrar_asks_once_and_then_waits_the_gap(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, link = await invited(client, settings, smtp)
    path = f"/convites/{public_id}/lembrar"

    asked = await client.post(path, headers=await api_headers(client))
    twice = await client.post(path, headers=await api_headers(client))
    assert asked.status_code == 202 and twice.status_code == 409
    assert asked.json()["lembrete_pedido_em"] is not None  # an API client sees it was asked
    assert "já foi pedido" in twice.json()["erro"]
    await drain(settings)
    shown = (await client.get(f"/convites/{public_id}", headers=JSON)).json()
    assert shown["lembrete_pedido_em"] is None and shown["lembrete"] == "enviado"
    assert mails_to(smtp, "ana@exemplo.com.br")[-1] == "Lembrete: Marta Souza convidou você…"
    assert answer_link(smtp, "ana@exemplo.com.br") == link

    too_soon = await client.post(path, headers=await api_headers(client))
    assert too_soon.status_code == 409 and "lembrar de novo a partir de" in too_soon.json()["erro"]
    clock.advance(settings.reminder_min_gap_seconds + 1)
    assert (await client.post(path, headers=await api_headers(client))).status_code == 202
    await drain(settings)
    assert len(mails_to(smtp, "ana@exemplo.com.br")) == 3
    # The automatic one never comes on top of the sender's: the invite was reminded already.
    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)
    assert len(mails_to(smtp, "ana@exemplo.com.br")) == 3


async def test_lembrar_late_says_the_invite_ends_before_another_could_go(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, clock: MovableClock
) -> None:
    """Not a moment after the invitation expires: a promise the button could not keep."""
    public_id, _ = await invited(client, settings, smtp)
    path = f"/convites/{public_id}/lembrar"
    clock.advance(settings.invite_ttl_seconds - settings.reminder_min_gap_seconds / 2)
    assert (await client.post(path, headers=await api_headers(client))).status_code == 202
    await drain(settings)

    late = await client.post(path, headers=await api_headers(client))

    assert late.status_code == 409
    assert late.json()["erro"] == (
        "Você já lembrou esta pessoa. O convite termina antes de dar para lembrar de novo."
    )


async def test_an_invite_whose_reminder_is_being_handed_over_cannot_be_cancelled_until_it_left(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """Cancelling then would say the link is dead while a mail carrying it is going out."""
    public_id, _ = await invited(client, settings, smtp)
    invite = await invite_row(db, public_id)
    assert await reminders.request(db, invite.sender_id, public_id, min_gap_seconds=0)
    [claimed] = await reminders.claim_due(
        db, after_seconds=0, ttl_seconds=settings.invite_ttl_seconds, key=settings.secret_key
    )
    path = f"/convites/{public_id}/cancelar"

    refused = await client.post(path, headers=await api_headers(client))
    assert refused.status_code == 409 and refused.json()["status"] == "enviado"
    assert refused.json()["erro"].startswith("O lembrete deste convite está sendo enviado agora.")
    assert (await invite_row(db, public_id)).status == Status.ENVIADO

    await reminders.finish(db, claimed.invite, reminders.ReminderStatus.SENT)
    cancelled = await client.post(path, headers=await api_headers(client))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelado"


async def test_lembrar_is_only_for_a_sent_invite(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    created = await post_invite(client, "ana@exemplo.com")  # no worker: pendente

    refused = await client.post(
        f"/convites/{created['id']}/lembrar", headers=await api_headers(client)
    )

    assert refused.status_code == 409 and refused.json()["status"] == "pendente"
    assert (await invite_row(db, created["id"])).reminder_requested_at is None


async def test_no_reminder_goes_while_sending_is_paused(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    await pause_sending(db, "teste")
    clock.advance(settings.reminder_after_seconds + 1)

    await drain(settings)

    assert len(smtp.received) == 1
    assert (await invite_row(db, public_id)).reminder_status is None


async def test_a_link_the_key_no_longer_rebuilds_is_never_mailed(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    clock.advance(settings.reminder_after_seconds + 1)

    await drain(replace(settings, secret_key="another-key-" + "x" * 40))  # SECRET_KEY rotated

    assert len(smtp.received) == 1  # no reminder with a link that leads nowhere
    assert (await invite_row(db, public_id)).reminder_status == "falhou"
    assert "a chave do servidor mudou" in (await history(client, public_id))[-1]


async def test_a_reminder_waits_for_the_hourly_budget_and_then_goes_once(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    automatic, _ = await invited(client, settings, smtp, "ana@exemplo.com.br")
    asked, _ = await invited(client, settings, smtp, "bia@exemplo.com.br")
    assert (
        await client.post(f"/convites/{asked}/lembrar", headers=await api_headers(client))
    ).status_code == 202
    clock.advance(settings.reminder_after_seconds + 1)

    await drain(replace(settings, sends_per_hour=2))  # the two invitations spent this hour

    assert len(smtp.received) == 2  # no reminder left
    for public_id in (automatic, asked):
        assert (await invite_row(db, public_id)).reminder_status is None
        assert not (await history(client, public_id))[-1].startswith("Lembrete")
    # The claims were given back as they were found: the sender's Lembrar still stands.
    assert (await invite_row(db, asked)).reminder_requested_at is not None

    await drain(settings)  # room in the hour again
    await drain(settings)

    for email in ("ana@exemplo.com.br", "bia@exemplo.com.br"):
        assert mails_to(smtp, email)[1:] == ["Lembrete: Marta Souza convidou você…"]


async def test_a_reminder_claim_its_worker_left_becomes_incerto_and_is_never_resent(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    clock.advance(settings.reminder_after_seconds + 1)
    # A worker claims the reminder and dies before it says what became of it.
    claimed = await reminders.claim_due(
        db,
        after_seconds=settings.reminder_after_seconds,
        ttl_seconds=settings.invite_ttl_seconds,
        key=settings.secret_key,
    )
    assert len(claimed) == 1
    await drain(settings)  # within its lease: left alone
    assert (await invite_row(db, public_id)).reminder_status == "enviando"

    clock.advance(settings.sending_lease_seconds + 1)
    await drain(settings)
    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)

    assert (await invite_row(db, public_id)).reminder_status == "incerto"
    assert (await history(client, public_id))[-1] == (
        "Lembrete incerto: O envio foi interrompido no meio e não conseguimos confirmar "
        "se o lembrete saiu."
    )
    assert len(smtp.received) == 1  # the invitation; the ambiguous reminder was not re-sent


async def test_a_resent_invite_forgets_the_old_rounds_reminder_and_gets_its_own(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)
    assert (await invite_row(db, public_id)).reminder_status == "enviado"
    headers = await api_headers(client)
    await client.post(f"/convites/{public_id}/cancelar", headers=headers)
    resent = await client.post(f"/convites/{public_id}/reenviar", headers=headers)
    assert resent.status_code == 202, resent.text

    await drain(settings)

    invite = await invite_row(db, public_id)
    assert invite.status == Status.ENVIADO and invite.attempt == 2
    assert invite.reminder_status is None and invite.reminded_at is None
    row = (await client.get(f"/convites/{public_id}", headers={"HX-Request": "true"})).text
    assert "Lembrete enviado" not in row
    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)
    assert mails_to(smtp, "ana@exemplo.com.br") == [
        "Você recebeu um convite",
        "Lembrete: Marta Souza convidou você…",
        "Você recebeu um convite",
        "Lembrete: Marta Souza convidou você…",
    ]


async def test_the_reminder_is_announced_with_the_invitees_name(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    public_id, _ = await invited(client, settings, smtp, nome="Ana Lima")
    await client.post(f"/convites/{public_id}/lembrar", headers=await api_headers(client))
    row = f"/convites/{public_id}"

    asked = (await client.get(row, headers={"HX-Request": "true"})).text
    await drain(settings)
    sent = (await client.get(row, headers={"HX-Request": "true"})).text

    assert 'data-anuncio="Lembrete pedido para Ana Lima."' in asked
    assert 'data-anuncio="Lembrete enviado para Ana Lima às ' in sent


async def test_two_real_workers_starting_together_send_one_reminder(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    tmp_path: Path,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    # Worker processes keep the real clock: for them the reminder is due a second after the
    # invitation left, about when they have started.
    env = process_env(settings, REMINDER_AFTER_SECONDS="1")

    async def reminded() -> bool:
        return (await invite_row(db, public_id)).reminder_status == "enviado"

    # Each worker runs the reminder pass as it starts and every ten seconds after: their passes
    # race for the one claim.
    with AppProcess.worker(env, tmp_path / "one.log"), AppProcess.worker(env, tmp_path / "two.log"):
        await eventually(reminded, 30, "the reminder is sent")
    # Both stopped (SIGTERM: a running pass finishes first).

    assert mails_to(smtp, "ana@exemplo.com.br") == [
        "Você recebeu um convite",
        "Lembrete: Marta Souza convidou você…",
    ]
