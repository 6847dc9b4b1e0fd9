"""The hourly send budget is shared fairly: one sender cannot use it up, sign-in mails never
wait for it (in-process worker, real Redis, real SMTP sink)."""

from __future__ import annotations

from dataclasses import replace

from app.config import Settings
from app.invites.status import Status
from app.sending.attempt import HOURLY_BUDGET_SPENT, SENDER_SHARE_SPENT
from app.storage.database import Database
from tests.fixtures import drain
from tests.helpers import JSON, client_for, invite_row, post_invite
from tests.services import ScriptedSmtp


async def test_one_sender_gets_only_its_share_of_the_hour_and_the_others_still_send(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    fair = replace(settings, sends_per_hour=100, sender_share_of_hour_percent=3)
    async with (
        client_for(fair, smtp=smtp, email="muito@exemplo.com") as busy,
        client_for(fair, smtp=smtp, email="pouco@exemplo.com") as other,
    ):
        many = [(await post_invite(busy, f"lote{i}@exemplo.com"))["id"] for i in range(5)]
        one = (await post_invite(other, "amiga@exemplo.com"))["id"]
        # Deferred jobs stay queued for the next hour: stop once the six have run (no sweep).
        await drain(fair, max_burst_jobs=6, cron_jobs=[])
        pages = [(await busy.get(f"/convites/{i}", headers=JSON)).json() for i in many]
        row_html = (await busy.get("/")).text

    rows = [await invite_row(db, public_id) for public_id in many]
    assert sorted(row.status for row in rows).count(Status.ENVIADO) == 3  # 3% of 100
    waiting = [row for row in rows if row.status == Status.PENDENTE]
    assert len(waiting) == 2 and all(row.error == SENDER_SHARE_SPENT for row in waiting)
    assert (await invite_row(db, one)).status == Status.ENVIADO
    # The row says it waits, and why; its history says the send was put off, not that an
    # attempt failed (no attempt was made).
    [shown] = [body for body in pages if body["status"] == "pendente"][:1]
    assert shown["mensagem"] == f"Recebemos o convite para {shown['email']}; o envio foi adiado."
    assert [e["descricao"] for e in shown["historico"]][-1].startswith("Envio adiado; nova")
    assert not any("falhou" in e["descricao"] for e in shown["historico"])
    assert f"{SENDER_SHARE_SPENT} Próxima tentativa às" in row_html


async def test_a_sign_in_mail_goes_even_when_the_hour_is_spent(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    spent = replace(settings, sends_per_hour=1)
    async with client_for(spent, smtp=smtp, email="dona@exemplo.com") as http:  # its link: 1
        waits = (await post_invite(http, "amiga@exemplo.com"))["id"]
        await drain(spent, max_burst_jobs=1, cron_jobs=[])  # it stays queued for the next hour
        token = (await http.get("/entrar", headers=JSON)).json()["csrf_token"]
        asked = await http.post(
            "/entrar", json={"email": "nova@exemplo.com"}, headers={**JSON, "X-CSRF-Token": token}
        )
        assert asked.status_code == 202
        await drain(spent, max_burst_jobs=1, cron_jobs=[])

    row = await invite_row(db, waits)
    assert (row.status, row.error) == (Status.PENDENTE, HOURLY_BUDGET_SPENT)
    assert [mail.rcpt_tos for mail in smtp.received][-1] == ["nova@exemplo.com"]
