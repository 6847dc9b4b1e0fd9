"""An address on the suppression list cannot be invited, by anyone, on any path: the single
form, JSON, the batch review, a correction, a resend (each refused before anything is written,
with words that name nobody), and at send time in the worker for an invite queued before.
Runs on SQLite, and on PostgreSQL with ``TEST_DATABASE=postgresql``."""

from __future__ import annotations

import re

import httpx

from app.config import Settings
from app.consent import suppression
from app.consent.suppression import REFUSALS, Reason
from app.invites import transitions
from app.invites.queries import invite_history
from app.invites.status import Status
from app.storage.database import Database
from app.web.present import event_text
from tests.api_keys import bearer, new_key
from tests.batch_helpers import review_text
from tests.fixtures import drain
from tests.helpers import api_headers, invite_row, page_token, post_invite, wait_for_status, written
from tests.services import ScriptedSmtp

ANA = "ana@exemplo.com"


async def test_the_single_form_refuses_a_suppressed_address_with_422_no_row_and_no_mail(
    client: httpx.AsyncClient, db: Database, smtp: ScriptedSmtp
) -> None:
    await suppression.suppress(db, ANA, Reason.OPTED_OUT, "link do convite")
    mails_before = len(smtp.received)
    token = page_token((await client.get("/")).text)

    as_form = await client.post("/convites", data={"email": "Ana@Exemplo.com", "csrf_token": token})
    as_json = await client.post("/convites", json={"email": ANA}, headers=await api_headers(client))

    assert as_form.status_code == 422
    assert REFUSALS[Reason.OPTED_OUT] in as_form.text
    assert as_json.status_code == 422
    assert as_json.json()["campos"] == {"email": "Este endereço pediu para não receber convites."}
    assert await written(db) == (0, 0, 0)
    assert len(smtp.received) == mails_before


async def test_the_api_refuses_a_suppressed_address_the_same_way(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    await suppression.suppress(db, ANA, Reason.BOUNCED, "5.1.1")
    key = await new_key(client)

    answer = await anonymous_client.post(
        "/api/v1/convites", json={"email": ANA}, headers=bearer(key)
    )

    assert answer.status_code == 422
    assert answer.json()["campos"] == {"email": REFUSALS[Reason.BOUNCED]}
    assert await written(db) == (0, 0, 0)


async def test_each_reason_has_its_own_words_and_none_names_who_caused_it(
    client: httpx.AsyncClient, db: Database
) -> None:
    headers = await api_headers(client)
    for n, reason in enumerate(Reason):
        email = f"pessoa{n}@exemplo.com"
        await suppression.suppress(db, email, reason, "detalhe")
        answer = await client.post("/convites", json={"email": email}, headers=headers)
        assert answer.status_code == 422
        said = answer.json()["campos"]["email"]
        assert said == REFUSALS[reason] and "@" not in said and "detalhe" not in said
    assert REFUSALS[Reason.BOUNCED] == "Este endereço não existe (devolução permanente)."


async def test_the_batch_review_gives_a_suppressed_row_its_own_verdict_counted_apart(
    client: httpx.AsyncClient, db: Database
) -> None:
    await suppression.suppress(db, ANA, Reason.BOUNCED, "5.1.1")

    page = await review_text(client, f"{ANA}\nlivre@exemplo.com")
    as_json = await client.post(
        "/lotes/revisar",
        json={"enderecos": f"{ANA}\nlivre@exemplo.com"},
        headers=await api_headers(client),
    )

    counted = dict(
        (label, int(number))
        for number, label in re.findall(r'veredito-\w+"><strong>(\d+)</strong> ([^<]+)<', page.text)
    )
    assert counted == {"Prontos para enviar": 1, "Não recebem convites": 1}
    assert REFUSALS[Reason.BOUNCED] in page.text
    assert as_json.json()["contagem"] == {"ok": 1, "nao_recebe": 1}
    assert await written(db) == (0, 0, 0)


async def test_a_resend_to_an_address_suppressed_since_is_refused_and_the_row_stays(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    sent = await post_invite(client, ANA)
    await drain(settings)
    invite = await wait_for_status(db, sent["id"], Status.ENVIADO)
    cancelled = await transitions.cancel(db, invite.sender_id, invite.public_id)
    assert cancelled is not None
    await suppression.suppress(db, ANA, Reason.COMPLAINED, "abuse")

    answer = await client.post(
        f"/convites/{sent['id']}/reenviar", headers=await api_headers(client)
    )

    assert answer.status_code == 422
    assert answer.json()["erro"] == REFUSALS[Reason.COMPLAINED]
    assert (await invite_row(db, sent["id"])).status == Status.CANCELADO


async def test_a_correction_to_a_suppressed_address_is_refused_like_a_bad_address(
    client: httpx.AsyncClient, db: Database, settings: Settings
) -> None:
    sent = await post_invite(client, "errado@exemplo.com")
    await drain(settings)
    invite = await wait_for_status(db, sent["id"], Status.ENVIADO)
    async with db.write() as conn:
        await transitions.mark_bounced(conn, invite.id, None, "A caixa não existe.")
    await suppression.suppress(db, ANA, Reason.OPTED_OUT)

    answer = await client.post(
        f"/convites/{sent['id']}/corrigir", json={"email": ANA}, headers=await api_headers(client)
    )

    assert answer.status_code == 422
    assert answer.json()["campos"]["email"] == REFUSALS[Reason.OPTED_OUT]
    after = await invite_row(db, sent["id"])
    assert (after.status, after.email, after.attempt) == (Status.DEVOLVIDO, invite.email, 1)


async def test_an_invite_queued_before_the_suppression_is_never_sent_and_ends_cancelado(
    client: httpx.AsyncClient, db: Database, settings: Settings, smtp: ScriptedSmtp
) -> None:
    sent = await post_invite(client, ANA)
    await suppression.suppress(db, ANA, Reason.OPTED_OUT)
    mails_before = len(smtp.received)

    await drain(settings)

    row = await invite_row(db, sent["id"])
    note = "Este endereço pediu para não receber convites. O convite não foi enviado."
    assert (row.status, row.error) == (Status.CANCELADO, note)
    assert len(smtp.received) == mails_before
    last = (await invite_history(db, row.id))[-1]
    assert (last.status, event_text(last)) == (Status.CANCELADO, note)


async def test_a_sign_in_mail_to_a_suppressed_address_still_goes(
    settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """The owner of the address asked for it: the list is about invitations from others."""
    from tests.helpers import client_for

    await suppression.suppress(db, "dona@exemplo.com", Reason.OPTED_OUT)
    async with client_for(settings, smtp=smtp, email="dona@exemplo.com") as signed_in:
        assert (await signed_in.get("/convites")).status_code == 200
