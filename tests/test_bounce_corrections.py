"""A devolvido invite on the sender's page: the reason, the history, and Corrigir e reenviar
(validated like a new invite; a new attempt through the worker; with or without JavaScript)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import aiosmtplib
import httpx
import pytest
from redis.asyncio import Redis

from app.clock import utcnow
from app.config import Settings
from app.consent import suppression
from app.consent.suppression import Reason
from app.invites.status import Status
from app.live.wakeups import sender_channel
from app.signing import FULL, Purpose, sign
from app.storage.database import Database
from tests.answering import answer_link, optout_url_of
from tests.api_keys import bearer, new_key
from tests.fixtures import drain
from tests.helpers import (
    JSON,
    api_headers,
    bounce_sample,
    client_for,
    invite_row,
    page_token,
    post_invite,
    schedule,
    send_bounce,
    statuses,
    verp_address,
)
from tests.services import ScriptedSmtp

OLD, NEW = "ana@exemplo.con", "ana@exemplo.com"  # the address that bounced, and its correction
ONE_CLICK = {"List-Unsubscribe": "One-Click"}


async def bounced(
    client: httpx.AsyncClient, settings: Settings, db: Database, port: int
) -> dict[str, Any]:
    """An invite sent for real (worker, SMTP 250), then bounced through the receiver."""
    created = await post_invite(client, "ana@exemplo.con")
    await drain(settings)
    invite = await invite_row(db, created["id"])
    assert invite.status == Status.ENVIADO
    raw = bounce_sample("gmail.eml", invite, settings)
    await send_bounce(port, raw, verp_address(settings, invite.public_id))
    assert (await invite_row(db, invite.public_id)).status == Status.DEVOLVIDO
    return created


async def test_the_bounce_wakes_the_senders_page(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int, redis: Redis
) -> None:
    created = await post_invite(client, "ana@exemplo.con")
    await drain(settings)
    invite = await invite_row(db, created["id"])
    pubsub = redis.pubsub()
    await pubsub.subscribe(sender_channel(invite.sender_id))
    await pubsub.get_message(timeout=1)  # the subscription itself

    raw = bounce_sample("postfix.eml", invite, settings)
    await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))

    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
    await pubsub.aclose()
    assert message is not None
    history = await statuses(db, invite.public_id)
    assert history[-1] == ("devolvido", 1)


async def test_a_devolvido_invite_shows_the_reason_the_history_and_the_correction_form(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int
) -> None:
    created = await bounced(client, settings, db, bounce_port)

    page = (await client.get(f"/convites/{created['id']}")).text
    body = (await client.get(f"/convites/{created['id']}", headers=JSON)).json()

    assert body["status"] == "devolvido"
    [kept] = body["devolucoes"]
    assert (kept["classe"], kept["efeito"], kept["codigo"]) == ("permanent", "devolvido", "5.1.1")
    assert "a caixa não existe (5.1.1). Informado por googlemail.com." in body["erro"]
    assert "Corrigir e reenviar" in page and 'action="/convites/' in page
    assert "Devoluções recebidas" in page and "devolvido: O servidor do destinatário" in page
    assert 'data-anuncio-em="alert"' in page


async def test_without_javascript_the_corrected_address_goes_out_as_a_new_attempt(
    client: httpx.AsyncClient,
    settings: Settings,
    db: Database,
    bounce_port: int,
    smtp: ScriptedSmtp,
) -> None:
    created = await bounced(client, settings, db, bounce_port)
    token = page_token((await client.get(f"/convites/{created['id']}")).text)

    response = await client.post(
        f"/convites/{created['id']}/corrigir",
        data={"email": " Ana@Exemplo.COM ", "csrf_token": token},
    )
    await drain(settings)

    assert response.status_code == 303
    invite = await invite_row(db, created["id"])
    assert (invite.status, invite.email, invite.attempt) == (Status.ENVIADO, "Ana@exemplo.com", 2)
    assert smtp.received[-1].rcpt_tos == ["Ana@exemplo.com"]
    assert await statuses(db, created["id"]) == [
        ("pendente", 1), ("enviando", 1), ("enviado", 1), ("devolvido", 1),
        ("pendente", 2), ("enviando", 2), ("enviado", 2),
    ]  # fmt: skip


async def test_a_bad_corrected_address_is_refused_like_a_new_invite_and_changes_nothing(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int
) -> None:
    created = await bounced(client, settings, db, bounce_port)
    headers = await api_headers(client)
    url = f"/convites/{created['id']}/corrigir"

    as_json = await client.post(url, json={"email": "ana@"}, headers=headers)
    as_htmx = await client.post(
        url,
        data={"email": "ana\r\nBcc: x@exemplo.com"},
        headers={"HX-Request": "true", "X-CSRF-Token": headers["X-CSRF-Token"]},
    )

    assert as_json.status_code == 422 and "email" in as_json.json()["campos"]
    assert as_htmx.status_code == 422
    assert as_htmx.headers["HX-Retarget"] == f"#convite-{created['id']}"
    assert 'aria-invalid="true"' in as_htmx.text and "<details" in as_htmx.text
    assert (await invite_row(db, created["id"])).status == Status.DEVOLVIDO


async def test_a_correction_to_an_address_already_invited_again_is_refused_with_409(
    client: httpx.AsyncClient,
    settings: Settings,
    db: Database,
    bounce_port: int,
    smtp: ScriptedSmtp,
) -> None:
    created = await bounced(client, settings, db, bounce_port)
    again = await post_invite(client, "ana@exemplo.com")  # the right address, invited anew
    url = f"/convites/{created['id']}/corrigir"
    token = page_token((await client.get(f"/convites/{created['id']}")).text)

    as_json = await client.post(
        url, json={"email": "ana@exemplo.com"}, headers=await api_headers(client)
    )
    as_form = await client.post(url, data={"email": "ana@exemplo.com", "csrf_token": token})
    await drain(settings)

    assert as_json.status_code == 409
    assert as_json.json()["erro"].startswith("Você já convidou ana@exemplo.com")
    assert as_json.json()["convite"] == f"/convites/{again['id']}"
    assert as_form.status_code == 409
    assert f'<a href="/convites/{again["id"]}">Ver o convite existente</a>' in as_form.text
    refused = await invite_row(db, created["id"])
    assert (refused.status, refused.email, refused.attempt) == (
        Status.DEVOLVIDO,
        "ana@exemplo.con",
        1,
    )
    assert [message.rcpt_tos for message in smtp.received] == [
        ["ana@exemplo.con"],
        ["ana@exemplo.com"],
    ]


async def test_only_a_devolvido_invite_can_be_corrected(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    created = await post_invite(client, "ana@exemplo.com")
    await drain(settings)

    response = await client.post(
        f"/convites/{created['id']}/corrigir",
        json={"email": "bia@exemplo.com"},
        headers=await api_headers(client),
    )

    assert response.status_code == 409
    assert (await invite_row(db, created["id"])).email == "ana@exemplo.com"


async def test_someone_elses_invite_cannot_be_corrected(
    client: httpx.AsyncClient, other_client: Any, settings: Settings, db: Database, bounce_port: int
) -> None:
    created = await bounced(client, settings, db, bounce_port)

    async with other_client() as stranger:
        response = await stranger.post(
            f"/convites/{created['id']}/corrigir",
            json={"email": "bia@exemplo.com"},
            headers=await api_headers(stranger),
        )

    assert response.status_code == 404
    assert (await invite_row(db, created["id"])).status == Status.DEVOLVIDO


async def test_the_api_corrects_a_devolvido_invite_as_the_page_does(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    db: Database,
    bounce_port: int,
    smtp: ScriptedSmtp,
) -> None:
    created = await bounced(client, settings, db, bounce_port)
    key = await new_key(client)
    path = f"/api/v1/convites/{created['id']}/corrigir"

    invalid = await anonymous_client.post(path, json={"email": "não"}, headers=bearer(key))
    fixed = await anonymous_client.post(
        path, json={"email": "ana@exemplo.com"}, headers=bearer(key)
    )
    await drain(settings)

    assert invalid.status_code == 422 and set(invalid.json()["campos"]) == {"email"}
    assert fixed.status_code == 202 and fixed.json()["status"] == "pendente"
    assert fixed.headers["location"] == f"/api/v1/convites/{created['id']}"
    invite = await invite_row(db, created["id"])
    assert (invite.status, invite.email, invite.attempt) == (Status.ENVIADO, "ana@exemplo.com", 2)
    assert smtp.received[-1].rcpt_tos == ["ana@exemplo.com"]


async def test_the_old_addresss_mail_neither_opts_out_the_new_address_nor_shows_it(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    db: Database,
    bounce_port: int,
    smtp: ScriptedSmtp,
) -> None:
    created = await bounced(client, settings, db, bounce_port)
    old_link, old_optout = answer_link(smtp, OLD), urlsplit(optout_url_of(smtp, OLD)).path
    old_mailto = mailto_of(smtp, OLD)
    by_id_only = sign(settings.secret_key, Purpose.OPT_OUT_LINK, created["id"], length=FULL)
    key = await new_key(client)
    fixed = await anonymous_client.post(
        f"/api/v1/convites/{created['id']}/corrigir", json={"email": NEW}, headers=bearer(key)
    )
    assert fixed.status_code == 202, fixed.text
    await drain(settings)

    # The old mail's way out was the old address's: it opts nobody out now, however it is used
    # (one-click, the page, its mailto:, or a link mailed before links named their address).
    for path in (old_optout, f"/descadastro/{created['id']}/{by_id_only}"):
        assert (await anonymous_client.get(path)).status_code == 404
        assert (await anonymous_client.post(path, data=ONE_CLICK)).status_code == 404
    with pytest.raises(aiosmtplib.SMTPRecipientsRefused):
        await send_bounce(bounce_port, b"Subject: descadastro\r\n\r\n\r\n", old_mailto)
    assert await suppression.reason_for(db, NEW) is None
    # The old invitation's page says it went elsewhere, naming nobody, offering nothing.
    page = await anonymous_client.get(old_link)
    assert page.status_code == 410 and "Este convite não vale mais" in page.text
    assert NEW not in page.text and "/descadastro/" not in page.text
    token = page_token((await anonymous_client.get("/entrar")).text)
    asked = await anonymous_client.post(f"{old_link}/apagar", data={"csrf_token": token})
    assert asked.status_code == 404
    assert [m.rcpt_tos for m in smtp.received].count([NEW]) == 1  # the invitation only

    # The new mail's way out is the new address's.
    done = await anonymous_client.post(urlsplit(optout_url_of(smtp, NEW)).path, data=ONE_CLICK)
    assert done.status_code == 200
    assert await suppression.reason_for(db, NEW) == Reason.OPTED_OUT


def mailto_of(smtp: ScriptedSmtp, email: str) -> str:
    """The opt-out address in the newest invitation to ``email``: its ``List-Unsubscribe``."""
    mail = [m for m in smtp.received if email in m.rcpt_tos][-1].message
    found = re.search(r"<mailto:([^?>]+)", str(mail["List-Unsubscribe"]))
    assert found, mail["List-Unsubscribe"]
    return found.group(1)


async def test_a_permanent_bounce_calls_off_scheduled_invitations_to_the_address(
    client: httpx.AsyncClient,
    settings: Settings,
    db: Database,
    bounce_port: int,
    redis: Redis,
    smtp: ScriptedSmtp,
) -> None:
    """The address does not exist: an invitation waiting for its moment would only be refused
    then. It is cancelled with the reason now, and its sender's open pages are told."""
    async with client_for(settings, smtp=smtp, email="bia@exemplo.com") as other:
        scheduled = await schedule(other, OLD, utcnow() + timedelta(days=2))
    waiting = await invite_row(db, scheduled.json()["id"])
    assert waiting.status == Status.AGENDADO
    pubsub = redis.pubsub()
    await pubsub.subscribe(sender_channel(waiting.sender_id))
    await pubsub.get_message(timeout=1)  # the subscription itself

    await bounced(client, settings, db, bounce_port)

    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
    await pubsub.aclose()
    assert message is not None
    assert await suppression.reason_for(db, OLD) == Reason.BOUNCED
    row = await invite_row(db, waiting.public_id)
    note = suppression.NOT_SENT.format(refusal=suppression.REFUSALS[Reason.BOUNCED])
    assert (row.status, row.error) == (Status.CANCELADO, note)
