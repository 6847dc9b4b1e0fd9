"""The invite lifecycle on real parts: SQLite, redis-server, an aiosmtpd server, arq."""

from __future__ import annotations

from datetime import timedelta

import httpx
from arq.connections import ArqRedis
from redis.asyncio import Redis
from sqlalchemy import update

from app.clock import utcnow
from app.config import Settings
from app.invites.status import Status
from app.sending.queue import SEND_FUNCTION
from app.storage.database import Database
from app.storage.tables import invites
from tests.fixtures import drain
from tests.helpers import JSON, api_headers, invite_row, page_token, post_invite, statuses
from tests.services import ScriptedSmtp


async def test_accepted_invite_is_pending_until_a_worker_sends_it(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    created = await post_invite(client, "ana@exemplo.com", "Ana")
    assert created["status"] == "pendente"
    assert "Recebemos, enviando…" in created["mensagem"]
    assert (await invite_row(db, created["id"])).status == Status.PENDENTE

    await drain(settings)

    sent = await invite_row(db, created["id"])
    assert sent.status == Status.ENVIADO and sent.sent_at is not None
    assert await statuses(db, created["id"]) == [("pendente", 1), ("enviando", 1), ("enviado", 1)]
    [message] = smtp.received
    assert message.rcpt_tos == ["ana@exemplo.com"]
    assert message.message["Message-ID"] == f"<{created['id']}.1@localhost>"
    assert message.message["X-Correlation-ID"] == sent.correlation_id
    assert message.message.get_body(("plain",)) is not None
    assert message.message.get_body(("html",)) is not None


async def test_a_451_is_retried_and_the_history_shows_both_attempts(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.reply_next("451 4.3.0 Try again later")
    created = await post_invite(client, "bia@exemplo.com")

    await drain(settings)

    sent = await invite_row(db, created["id"])
    assert (sent.status, sent.attempt) == (Status.ENVIADO, 2)
    assert await statuses(db, created["id"]) == [
        ("pendente", 1),
        ("enviando", 1),
        ("pendente", 2),
        ("enviando", 2),
        ("enviado", 2),
    ]
    page = (await client.get(f"/convites/{created['id']}", headers=JSON)).json()
    retry_event = page["historico"][2]
    assert "451" in retry_event["erro"] and retry_event["proxima_tentativa_em"]
    assert len(smtp.received) == 1


async def test_a_550_fails_at_once_with_a_reason_and_no_second_attempt(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.always("550 5.1.1 Mailbox unavailable")
    created = await post_invite(client, "ninguem@exemplo.com")

    await drain(settings)

    failed = await invite_row(db, created["id"])
    assert (failed.status, failed.attempt) == (Status.FALHOU, 1)
    assert failed.error is not None and "550" in failed.error and "recusou" in failed.error
    assert smtp.data_started == 1
    assert await statuses(db, created["id"]) == [("pendente", 1), ("enviando", 1), ("falhou", 1)]


async def test_transient_failures_end_in_falhou_when_attempts_run_out(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.always("421 4.7.0 Busy")
    created = await post_invite(client, "cheio@exemplo.com")

    await drain(settings)

    failed = await invite_row(db, created["id"])
    assert (failed.status, failed.attempt) == (Status.FALHOU, settings.max_attempts)
    assert failed.error is not None and f"{settings.max_attempts} tentativas" in failed.error
    assert smtp.data_started == settings.max_attempts


async def test_a_job_delivered_twice_sends_one_email(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp, redis: Redis
) -> None:
    created = await post_invite(client, "duas@exemplo.com")
    found = await invite_row(db, created["id"])
    # The same attempt arrives again under another job id, as a redelivery would.

    arq = ArqRedis(connection_pool=redis.connection_pool)
    assert await arq.enqueue_job(
        SEND_FUNCTION, found.public_id, 1, found.correlation_id, _job_id="again"
    )

    await drain(settings)

    assert len(smtp.received) == 1
    assert (await invite_row(db, created["id"])).status == Status.ENVIADO


async def test_retry_from_falhou_runs_while_the_old_attempts_result_is_kept(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp, redis: Redis
) -> None:
    smtp.reply_next("550 5.7.1 Rejected")
    created = await post_invite(client, "de-novo@exemplo.com")
    await drain(settings)
    assert (await invite_row(db, created["id"])).status == Status.FALHOU
    assert await redis.keys("arq:result:*"), "arq keeps the first attempt's result"

    response = await client.post(
        f"/convites/{created['id']}/reenviar", headers=await api_headers(client)
    )
    assert response.status_code == 202
    assert response.json()["status"] == "pendente"
    await drain(settings)

    sent = await invite_row(db, created["id"])
    assert (sent.status, sent.attempt) == (Status.ENVIADO, 2)
    assert len(smtp.received) == 1


async def test_resending_an_enviado_invite_is_refused_with_409(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    created = await post_invite(client, "ok@exemplo.com")
    await drain(settings)

    response = await client.post(
        f"/convites/{created['id']}/reenviar", headers=await api_headers(client)
    )

    assert response.status_code == 409
    assert response.json()["erro"] == (
        "O status deste convite é “enviado”; só dá para reenviar com o status “falhou”, "
        "“incerto”, “expirado”, “recusado” ou “cancelado”."
    )


async def test_resend_is_refused_with_409_while_another_invite_to_the_address_is_on_its_way(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    first = await post_invite(client, "ana@exemplo.com")
    headers = await api_headers(client)
    cancelled = await client.post(f"/convites/{first['id']}/cancelar", headers=headers)
    assert cancelled.status_code == 200, cancelled.text
    second = await post_invite(client, "ana@exemplo.com")  # the first no longer blocks it
    token = page_token((await client.get(f"/convites/{first['id']}")).text)

    as_json = await client.post(f"/convites/{first['id']}/reenviar", headers=headers)
    as_form = await client.post(f"/convites/{first['id']}/reenviar", data={"csrf_token": token})
    await drain(settings)

    assert as_json.status_code == 409
    assert as_json.json()["erro"] == (
        "Você já convidou ana@exemplo.com e o convite está na fila para envio. "
        "Acompanhe o convite existente em vez de enviar outro."
    )
    assert as_json.json()["convite"] == f"/convites/{second['id']}"
    assert as_form.status_code == 409
    assert f'<a href="/convites/{second["id"]}">Ver o convite existente</a>' in as_form.text
    # A new invite from the plain form: the form comes back as typed, the reason at E-mail.
    typed = {"csrf_token": token, "email": "ana@exemplo.com", "nome": "Ana", "mensagem": "Até lá!"}
    again = await client.post("/convites", data=typed)
    assert again.status_code == 409
    assert 'id="email-erro"' in again.text and "Você já convidou ana@exemplo.com" in again.text
    assert f'<a href="/convites/{second["id"]}">Ver o convite existente</a>' in again.text
    assert 'value="Ana"' in again.text and "Até lá!</textarea>" in again.text
    refused = await invite_row(db, first["id"])
    assert (refused.status, refused.attempt) == (Status.CANCELADO, 1)
    assert await statuses(db, first["id"]) == [("pendente", 1), ("cancelado", 1)]
    assert [message.rcpt_tos for message in smtp.received] == [["ana@exemplo.com"]]
    assert (await invite_row(db, second["id"])).status == Status.ENVIADO


async def test_a_double_click_on_resend_starts_one_attempt(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.reply_next("550 5.7.1 Rejected")
    created = await post_invite(client, "clique@exemplo.com")
    await drain(settings)

    import asyncio

    first, second = await asyncio.gather(
        client.post(f"/convites/{created['id']}/reenviar", headers=await api_headers(client)),
        client.post(f"/convites/{created['id']}/reenviar", headers=await api_headers(client)),
    )

    assert sorted([first.status_code, second.status_code]) == [202, 409]
    await drain(settings)
    assert (await invite_row(db, created["id"])).attempt == 2
    assert len(smtp.received) == 1


async def test_a_job_arq_dropped_without_running_our_code_is_requeued_by_the_sweep(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp, redis: Redis
) -> None:
    created = await post_invite(client, "perdido@exemplo.com")
    # What arq does to an expired job or one past max tries: it leaves the queue unrun.
    for key in await redis.keys("arq:job:*"):
        await redis.delete(key)
    await redis.delete("arq:queue")
    async with db.write() as conn:  # and time passes: the invite is overdue
        await conn.execute(
            update(invites)
            .where(invites.c.public_id == created["id"])
            .values(next_attempt_at=utcnow() - timedelta(minutes=1))
        )

    await drain(settings)

    assert (await invite_row(db, created["id"])).status == Status.ENVIADO
    assert len(smtp.received) == 1
