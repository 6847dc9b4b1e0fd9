"""Webhooks: created through the API (secret once), a delivery row for every status change of
the account's invites (in the change's own transaction), delivered by a real worker run to a
real receiver that verifies the signature with ``standardwebhooks``; retries with the movable
clock and the same ``webhook-id``; disabled after WEBHOOK_MAX_FAILURES; the claim held by one
worker at a time; the SSRF guard at registration and at delivery. SQLite or PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from openapi_schema_validator import OAS31Validator
from sqlalchemy import select, update

from app.config import ConfigError, Settings, load_settings
from app.invites.records import WEBHOOK_MAIL
from app.storage.database import Database
from app.storage.tables import accounts, invites, webhook_deliveries, webhooks
from app.web import webhooks as webhook_pages
from app.webhooks import addresses, deliver, post, store
from app.webhooks.post import Outcome
from app.webhooks.store import resend
from tests.api_keys import bearer, new_key
from tests.fixtures import ROOT, SENDER, MovableClock, app_client, drain
from tests.helpers import JSON, app_command, page_token
from tests.services import ScriptedSmtp
from tests.test_bounce_corrections import bounced
from tests.webhook_receiver import STALL, Receiver, webhook_receiver

SPEC = json.loads((ROOT / "app" / "api" / "openapi.json").read_text())
LOCAL = {"webhook_allow_private_networks": True, "webhook_retry_backoff_seconds": (5.0, 30.0)}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with webhook_receiver() as running:
        yield running


def local(settings: Settings, **more: Any) -> Settings:
    return replace(settings, **{**LOCAL, **more})


def matches(instance: Any, schema_name: str) -> None:
    """``instance`` is what the OpenAPI document says ``schema_name`` is."""
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": SPEC["components"]}
    OAS31Validator(schema).validate(instance)


async def register(client: httpx.AsyncClient, receiver: Receiver) -> tuple[str, str]:
    """An API key of ``client``'s account and a webhook to ``receiver`` made with it."""
    key = await new_key(client)
    made = await client.post(
        "/api/v1/webhooks", json={"url": receiver.url}, headers=bearer(key, **JSON)
    )
    assert made.status_code == 201, made.text
    body = made.json()
    matches(body, "WebhookCriado")
    assert body["secret"].startswith("whsec_")
    receiver.secret = body["secret"]
    return key, body["id"]


async def deliveries(db: Database) -> list[Any]:
    async with db.read() as conn:
        query = select(webhook_deliveries).order_by(webhook_deliveries.c.id)
        return list((await conn.execute(query)).all())


async def delivery(db: Database, public_id: str) -> Any:
    return next(row for row in await deliveries(db) if row.public_id == public_id)


async def publish(db: Database, settings: Settings) -> int:
    from arq.connections import ArqRedis

    redis = ArqRedis.from_url(settings.redis_url)
    try:
        return await deliver.publish_due(db, redis, deliver.lease_seconds(settings))
    finally:
        await redis.aclose()


async def test_each_status_change_is_delivered_signed_by_a_real_worker_run(
    settings: Settings, db: Database, client: httpx.AsyncClient, receiver: Receiver
) -> None:
    settings = local(settings)
    key, _ = await register(client, receiver)
    made = await client.post(
        "/api/v1/convites", json={"email": "ana@exemplo.com", "nome": "Ana"}, headers=bearer(key)
    )
    assert made.status_code == 202, made.text
    invite_id = made.json()["id"]

    # The invite's first event was written with its delivery, in one transaction.
    assert [row.event_type for row in await deliveries(db)] == ["convite.pendente"]
    await drain(settings)  # sends the mail (enviado: a second delivery) and delivers
    await publish(db, settings)
    await drain(settings)

    # Deliveries run side by side: their order is not promised (each says its own moment).
    by_type = {d.body["type"]: d for d in receiver.received}
    assert len(receiver.received) == 3 and all(d.verified for d in receiver.received)
    assert set(by_type) == {"convite.pendente", "convite.enviando", "convite.enviado"}
    sent = by_type["convite.enviado"]
    for each in receiver.received:
        matches(each.body, "EventoConvite")
    assert sent.body["data"]["id"] == invite_id and sent.body["data"]["status"] == "enviado"
    assert [step["status"] for step in sent.body["data"]["historico"]] == [
        "pendente",
        "enviando",
        "enviado",
    ]
    assert set(sent.body["data"]) == set(
        (await client.get(f"/api/v1/convites/{invite_id}", headers=bearer(key))).json()
    )
    # The first delivery says what the invite was at its event, not what it became.
    assert by_type["convite.pendente"].body["data"]["status"] == "pendente"
    assert [step["status"] for step in by_type["convite.pendente"].body["data"]["historico"]] == [
        "pendente"
    ]
    # Delivered after the mail left, it still says the mail had not left then.
    assert by_type["convite.pendente"].body["data"]["enviado_em"] is None
    assert sent.body["data"]["enviado_em"] == sent.body["data"]["historico"][-1]["em"]
    rows = await deliveries(db)
    assert [(row.state, row.status_code, row.attempts) for row in rows] == [
        ("entregue", 200, 1)
    ] * 3
    assert {d.headers["webhook-id"] for d in receiver.received} == {r.public_id for r in rows}


async def test_a_resent_invites_deliveries_say_its_new_round_has_no_reminder_yet(
    settings: Settings,
    db: Database,
    client: httpx.AsyncClient,
    receiver: Receiver,
    clock: MovableClock,
) -> None:
    settings = local(settings)
    key, _ = await register(client, receiver)
    made = await client.post(
        "/api/v1/convites", json={"email": "ana@exemplo.com"}, headers=bearer(key)
    )
    invite_id = made.json()["id"]
    await drain(settings)
    clock.advance(settings.reminder_after_seconds + 1)
    await drain(settings)  # the reminder
    for action in ("cancelar", "reenviar"):
        done = await client.post(f"/api/v1/convites/{invite_id}/{action}", headers=bearer(key))
        assert done.status_code in (200, 202), done.text
    await drain(settings)  # the new round's mail
    await publish(db, settings)
    await drain(settings)

    said = {
        (d.body["type"], len(d.body["data"]["historico"])): d.body["data"]["lembrete"]
        for d in receiver.received
    }
    [cancelled_at] = [at for kind, at in said if kind == "convite.cancelado"]
    assert said["convite.cancelado", cancelled_at] == "enviado"
    # The new round's deliveries say no reminder: the one before was the old round's.
    new_round = sorted((at, kind) for kind, at in said if at > cancelled_at)
    assert [kind for _, kind in new_round] == [
        "convite.pendente",
        "convite.enviando",
        "convite.enviado",
    ]
    assert {said[kind, at] for at, kind in new_round} == {None}


async def test_a_corrected_invites_new_round_says_its_mail_has_not_left_until_it_leaves(
    settings: Settings,
    db: Database,
    client: httpx.AsyncClient,
    receiver: Receiver,
    bounce_port: int,
) -> None:
    settings = local(settings)
    key, _ = await register(client, receiver)
    created = await bounced(client, settings, db, bounce_port)
    fixed = await client.post(
        f"/api/v1/convites/{created['id']}/corrigir",
        json={"email": "ana@exemplo.com"},
        headers=bearer(key),
    )
    assert fixed.status_code == 202, fixed.text
    await drain(settings)  # the corrected address's mail
    await publish(db, settings)
    await drain(settings)

    said = {
        (d.body["type"], len(d.body["data"]["historico"])): d.body["data"]["enviado_em"]
        for d in receiver.received
    }
    [first_sent, again_sent] = sorted(at for kind, at in said if kind == "convite.enviado")
    [bounced_at] = [at for kind, at in said if kind == "convite.devolvido"]
    [corrected_at] = [at for kind, at in said if kind == "convite.pendente" and at > bounced_at]
    assert said["convite.devolvido", bounced_at] == said["convite.enviado", first_sent]
    # The new address was never sent to until its own mail left, as the row itself says.
    assert said["convite.pendente", corrected_at] is None
    assert said["convite.enviado", again_sent] not in (None, said["convite.enviado", first_sent])
    # Built after the correction, each delivery still names the address its event was about.
    addressed = {
        len(d.body["data"]["historico"]): d.body["data"]["email"] for d in receiver.received
    }
    assert {n: a for n, a in addressed.items() if n <= bounced_at} == dict.fromkeys(
        [1, 2, 3, 4], "ana@exemplo.con"
    )
    assert {a for n, a in addressed.items() if n > bounced_at} == {"ana@exemplo.com"}

    # Erasing the old address reaches the deliveries that kept it, and only an equal address.
    erased = await app_command(settings, "esquecer", "ana@exemplo.con")
    assert erased.returncode == 0, erased.stderr
    assert "  entregas de webhook de antes de uma correção (endereço substituído): 4" in (
        erased.stdout.splitlines()
    )
    kept = {row.email for row in await deliveries(db)}
    assert kept == {"[endereço apagado]", "ana@exemplo.com"}


async def test_a_failed_delivery_is_retried_with_the_same_id_and_body_after_the_backoff(
    settings: Settings,
    db: Database,
    client: httpx.AsyncClient,
    receiver: Receiver,
    clock: MovableClock,
) -> None:
    settings = local(settings)
    key, _ = await register(client, receiver)
    await client.post("/api/v1/convites", json={"email": "bia@exemplo.com"}, headers=bearer(key))
    [row] = await deliveries(db)
    receiver.script = [500, 200]

    assert await deliver.deliver(db, row.public_id, settings) == "pendente"
    [row] = await deliveries(db)
    assert (row.state, row.status_code, row.snippet, row.attempts) == (
        "pendente",
        500,
        "falhou aqui",
        1,
    )
    assert await deliver.deliver(db, row.public_id, settings) == "not claimed"  # not due yet
    assert await publish(db, settings) == 0

    clock.advance(5)
    assert await publish(db, settings) == 1
    await drain(settings)  # also sends the invite: its own changes are delivered too
    row = await delivery(db, row.public_id)
    assert (row.state, row.status_code, row.attempts) == ("entregue", 200, 2)
    first, second = [d for d in receiver.received if d.headers["webhook-id"] == row.public_id]
    assert first.body == second.body and first.verified and second.verified
    assert first.headers["webhook-timestamp"] != second.headers["webhook-timestamp"]


async def test_a_stalled_receiver_times_out_and_the_delivery_waits_for_its_retry(
    settings: Settings, db: Database, client: httpx.AsyncClient, receiver: Receiver
) -> None:
    settings = local(settings, webhook_timeout_seconds=0.5)
    key, _ = await register(client, receiver)
    await client.post("/api/v1/convites", json={"email": "caio@exemplo.com"}, headers=bearer(key))
    [row] = await deliveries(db)
    receiver.script = [STALL]
    assert await deliver.deliver(db, row.public_id, settings) == "pendente"
    [row] = await deliveries(db)
    assert (row.status_code, row.snippet) == (None, "Sem resposta dentro de 0.5 s.")


async def test_after_max_failed_deliveries_the_webhook_is_disabled_and_the_account_told(
    settings: Settings,
    db: Database,
    client: httpx.AsyncClient,
    receiver: Receiver,
    clock: MovableClock,
    smtp: ScriptedSmtp,
) -> None:
    settings = local(settings, webhook_retry_backoff_seconds=(5.0,), webhook_max_failures=2)
    key, _ = await register(client, receiver)
    for email in ("d1@exemplo.com", "d2@exemplo.com", "d3@exemplo.com"):
        await client.post("/api/v1/convites", json={"email": email}, headers=bearer(key))
    receiver.script = [500] * 5
    first, second, third = await deliveries(db)
    for row in (first, second, third):  # first attempts: each waits for its retry
        await deliver.deliver(db, row.public_id, settings)
    clock.advance(5)
    assert await deliver.deliver(db, first.public_id, settings) == "falhou"
    # The third's last attempt is under way (claimed) while the second's disables the webhook.
    late = await deliver.claim(db, third.public_id, deliver.lease_seconds(settings))
    assert late is not None
    assert await deliver.deliver(db, second.public_id, settings) == "falhou"
    async with db.read() as conn:
        hook = (await conn.execute(select(webhooks))).one()
    assert hook.failures == 2 and hook.disabled_at is not None
    failed = Outcome(False, 500, "falhou aqui")
    assert await deliver.record(db, late, failed, settings) == deliver.Recorded("falhou")
    assert [row.state for row in await deliveries(db)] == ["falhou"] * 3

    # Its owner is mailed once per disabling: the late failure of an already disabled webhook
    # writes no second mail (the mail is a row the workers send, like a sign-in link).
    assert len(await notices(db)) == 1
    clock.advance(5)  # the outbox relay's grace: nothing published the mail's job here
    await drain(settings)
    await drain(settings)
    [mail] = [m for m in smtp.received if SENDER in m.rcpt_tos]
    assert mail.message["Subject"] == "Um webhook seu foi desativado"
    assert "desativado depois de 2 entregas seguidas com falha" in mail.text
    assert receiver.url.replace("://", "[:]//") in mail.text
    assert f"{settings.public_url}/conta/webhooks" in mail.text

    # Disabled: a new change writes no delivery, and nothing pending is claimed.
    await client.post("/api/v1/convites", json={"email": "d4@exemplo.com"}, headers=bearer(key))
    assert len(await deliveries(db)) == 3
    listed = (await client.get("/api/v1/webhooks", headers=bearer(key))).json()["webhooks"]
    assert listed[0]["ativo"] is False
    page = await client.get("/conta/webhooks")
    assert webhook_pages.DISABLED in page.text
    assert "depois de 3 entregas seguidas com falha" in page.text  # the late one counts too
    account = await client.get("/conta")
    assert "Um webhook seu foi desativado" in account.text

    # Reenviar on a failed delivery: same id, a fresh round, the webhook enabled again.
    assert await resend(db, 999_999, first.public_id) is False  # another account: no
    form = await client.get("/conta/webhooks")
    resent = await client.post(
        f"/conta/webhooks/entregas/{first.public_id}/reenviar",
        data={"csrf_token": page_token(form.text)},
    )
    assert resent.status_code == 303
    assert await deliver.deliver(db, first.public_id, settings) == "entregue"
    assert receiver.received[-1].headers["webhook-id"] == first.public_id
    assert "Um webhook seu foi desativado" not in (await client.get("/conta")).text
    assert len(await notices(db)) == 1


async def notices(db: Database) -> list[Any]:
    """The mails that told an account a webhook of its was disabled."""
    async with db.read() as conn:
        query = select(invites).where(invites.c.kind == WEBHOOK_MAIL)
        return list((await conn.execute(query)).all())


async def test_two_workers_never_hold_one_delivery_at_once(
    settings: Settings, db: Database, client: httpx.AsyncClient, receiver: Receiver
) -> None:
    settings = local(settings)
    key, _ = await register(client, receiver)
    await client.post("/api/v1/convites", json={"email": "eva@exemplo.com"}, headers=bearer(key))
    [row] = await deliveries(db)
    claims = await asyncio.gather(
        *(deliver.claim(db, row.public_id, 30) for _ in range(8)), return_exceptions=True
    )
    won = [claim for claim in claims if isinstance(claim, deliver.Claimed)]
    assert len(won) == 1, claims
    assert all(claim is None for claim in claims if claim is not won[0])


async def test_the_sweep_publishes_a_due_delivery_once_even_when_two_sweeps_run(
    settings: Settings, db: Database, client: httpx.AsyncClient, receiver: Receiver
) -> None:
    settings = local(settings)
    key, _ = await register(client, receiver)
    await client.post("/api/v1/convites", json={"email": "fia@exemplo.com"}, headers=bearer(key))
    counts = await asyncio.gather(publish(db, settings), publish(db, settings))
    assert sorted(counts) == [0, 1]
    assert await publish(db, settings) == 0  # queued: not again before queued_until


async def test_private_and_plain_http_urls_are_refused_at_registration(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    guarded = replace(settings, webhook_allow_private_networks=False)
    async with app_client(guarded, smtp, "hana@exemplo.com") as client:
        await refuse_private_and_plain_http(client)


async def refuse_private_and_plain_http(client: httpx.AsyncClient) -> None:
    key = await new_key(client)
    for url, message in (
        ("http://exemplo.com/ganchos", addresses.NOT_HTTPS),
        ("https://127.0.0.1/ganchos", addresses.PRIVATE),
        ("https://169.254.169.254/latest", addresses.PRIVATE),
        ("https://[::1]/ganchos", addresses.PRIVATE),
        ("https://10.1.2.3/ganchos", addresses.PRIVATE),
        ("https://localhost/ganchos", addresses.PRIVATE),
        ("ftp://exemplo.com/", addresses.NOT_A_URL),
    ):
        refused = await client.post("/api/v1/webhooks", json={"url": url}, headers=bearer(key))
        assert refused.status_code == 422, url
        assert refused.json()["campos"] == {"url": message}, url


async def test_a_url_that_turned_private_is_refused_at_delivery(
    settings: Settings, db: Database, client: httpx.AsyncClient, receiver: Receiver
) -> None:
    key, _ = await register(client, receiver)  # registered while private addresses were allowed
    await client.post("/api/v1/convites", json={"email": "gil@exemplo.com"}, headers=bearer(key))
    [row] = await deliveries(db)
    guarded = local(settings, webhook_allow_private_networks=False)
    assert await deliver.deliver(db, row.public_id, guarded) == "pendente"
    [row] = await deliveries(db)
    assert row.snippet == addresses.NOT_HTTPS and receiver.received == []
    async with db.write() as conn:
        await conn.execute(update(webhooks).values(url=receiver.url.replace("http://", "https://")))
        await conn.execute(update(webhook_deliveries).values(available_at=row.created_at))
    assert await deliver.deliver(db, row.public_id, guarded) == "pendente"
    [row] = await deliveries(db)
    assert row.snippet == addresses.PRIVATE and receiver.received == []


async def test_urls_a_delivery_could_not_send_are_refused_at_registration(
    client: httpx.AsyncClient,
) -> None:
    key = await new_key(client)
    for url, message in (
        ("http://127.0.0.1:9/a\x7fb", addresses.BAD_CHARACTER),
        ("http://127.0.0.1:9/a\u200bb", addresses.BAD_CHARACTER),
        ("http://127.0.0.1:9/a b", addresses.BAD_CHARACTER),
        ("http://127.0.0.1:9/a\tb", addresses.BAD_CHARACTER),
        ("http://127.0.0.1:0/", addresses.BAD_PORT),
        ("https://1.1.1.1:0/", addresses.BAD_PORT),
        ("http://é_x.com/", addresses.NOT_A_URL),  # no IDNA form: only httpx says so
        ("http://127.0.0.1:99999/", addresses.BAD_PORT),
        ("http://ana:senha@127.0.0.1:9/", addresses.CREDENTIALS),
        # Short enough as typed, too long for its column once percent-encoded.
        ("http://127.0.0.1:9/" + "ç" * 400, addresses.TOO_LONG),
        ("https://exemplo.com/" + "a" * 5000, addresses.TOO_LONG),
    ):
        refused = await client.post("/api/v1/webhooks", json={"url": url}, headers=bearer(key))
        assert refused.status_code == 422, url
        assert refused.json()["campos"] == {"url": message}, url
    form = await client.get("/conta/webhooks")
    refused = await client.post(
        "/conta/webhooks",
        data={"csrf_token": page_token(form.text), "url": "http://127.0.0.1:9/a\x7fb"},
    )
    assert refused.status_code == 422 and addresses.BAD_CHARACTER in refused.text
    assert (await client.get("/api/v1/webhooks", headers=bearer(key))).json()["webhooks"] == []


def test_a_non_ascii_host_is_kept_in_idna() -> None:
    """What is kept is what httpx sends: the host in IDNA, the path percent-encoded."""
    kept = addresses.check_form("https://Exámple.com/caminho/ç", allow_private=False)
    assert kept == "https://xn--exmple-qta.com/caminho/%C3%A7"


async def test_a_row_whose_url_cannot_be_sent_ends_as_a_recorded_failure(
    settings: Settings, db: Database, client: httpx.AsyncClient, receiver: Receiver
) -> None:
    """A webhook kept before its URL's form was checked this closely: each attempt is recorded
    as failed (not left claimed), so the delivery ends and the webhook is disabled."""
    settings = local(settings, webhook_retry_backoff_seconds=(), webhook_max_failures=1)
    key, _ = await register(client, receiver)
    await client.post("/api/v1/convites", json={"email": "ivo@exemplo.com"}, headers=bearer(key))
    async with db.write() as conn:
        await conn.execute(update(webhooks).values(url="http://127.0.0.1:9/a\x7fb"))
    [row] = await deliveries(db)
    assert await deliver.deliver(db, row.public_id, settings) == "falhou"
    [row] = await deliveries(db)
    assert (row.state, row.attempts, row.snippet) == ("falhou", 1, addresses.BAD_CHARACTER)
    async with db.read() as conn:
        assert (await conn.execute(select(webhooks.c.disabled_at))).scalar_one() is not None


async def test_an_attempt_that_breaks_unexpectedly_is_a_recorded_failed_attempt(
    settings: Settings, db: Database, client: httpx.AsyncClient, receiver: Receiver
) -> None:
    """A secret the signer cannot read (a row damaged by hand) stands for anything that breaks
    while the request is built or sent: the attempt is recorded, never left claimed."""
    settings = local(settings)
    key, _ = await register(client, receiver)
    await client.post("/api/v1/convites", json={"email": "jo@exemplo.com"}, headers=bearer(key))
    async with db.write() as conn:
        await conn.execute(update(webhooks).values(secret="whsec_!!!"))
    [row] = await deliveries(db)
    assert await deliver.deliver(db, row.public_id, settings) == "pendente"
    [row] = await deliveries(db)
    assert (row.attempts, row.leased_until, row.snippet) == (1, None, post.UNEXPECTED)
    assert receiver.received == []


async def test_dns_counts_within_the_attempts_timeout(
    settings: Settings,
    db: Database,
    client: httpx.AsyncClient,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A resolver that never answers: the event loop's ``getaddrinfo`` (which hands the OS
    resolver to a thread, beyond any timeout of ours) is replaced by one that waits forever,
    standing in for a hung DNS server."""
    settings = local(settings, webhook_timeout_seconds=0.5)
    key, _ = await register(client, receiver)
    await client.post("/api/v1/convites", json={"email": "lia@exemplo.com"}, headers=bearer(key))
    [row] = await deliveries(db)

    async def never_answers(*args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", never_answers)
    async with asyncio.timeout(10):  # a backstop, so a missing budget fails instead of hanging
        assert await deliver.deliver(db, row.public_id, settings) == "pendente"
    [row] = await deliveries(db)
    assert (row.status_code, row.snippet) == (None, "Sem resposta dentro de 0.5 s.")
    assert receiver.received == []


async def test_a_hung_dns_at_registration_is_a_clear_422_in_time(
    settings: Settings, smtp: ScriptedSmtp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resolver that never answers (as above) holds no registration past the timeout."""

    async def never_answers(*args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    impatient = replace(settings, webhook_timeout_seconds=0.5)
    async with app_client(impatient, smtp, "iara@exemplo.com") as client:
        key = await new_key(client)
        monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", never_answers)
        async with asyncio.timeout(10):  # a backstop: a missing budget fails, not hangs
            made = await client.post(
                "/api/v1/webhooks",
                json={"url": "https://ganchos.exemplo.com/convites"},
                headers=bearer(key, **JSON),
            )
    assert made.status_code == 422
    assert made.json()["campos"] == {"url": addresses.UNANSWERED}


async def test_a_second_webhook_for_the_same_url_is_refused(client: httpx.AsyncClient) -> None:
    """A form sent twice (a reload) must not make every change arrive twice."""
    url = "http://127.0.0.1:9/convites"
    form = await client.get("/conta/webhooks")
    first = await client.post(
        "/conta/webhooks", data={"csrf_token": page_token(form.text), "url": url}
    )
    assert first.status_code == 201
    again = await client.post(
        "/conta/webhooks", data={"csrf_token": page_token(form.text), "url": url}
    )
    assert again.status_code == 422 and webhook_pages.SAME_URL in again.text
    assert "whsec_" not in again.text
    key = await new_key(client)
    # Spelled another way, the same request: an empty query and a fragment are never sent.
    for same in (url, url + "?", url + "#x", url.replace("http://", "HTTP://")):
        through_api = await client.post("/api/v1/webhooks", json={"url": same}, headers=bearer(key))
        assert through_api.status_code == 422, same
        assert through_api.json()["campos"] == {"url": webhook_pages.SAME_URL}, same
    listed = (await client.get("/api/v1/webhooks", headers=bearer(key))).json()["webhooks"]
    assert [hook["url"] for hook in listed] == [url]


async def test_a_webhook_kept_before_urls_were_normalised_still_counts_as_the_same(
    db: Database, client: httpx.AsyncClient
) -> None:
    key = await new_key(client)
    made = await client.post(
        "/api/v1/webhooks", json={"url": "http://127.0.0.1:9/x"}, headers=bearer(key)
    )
    async with db.write() as conn:  # as an older version kept it: as typed
        await conn.execute(
            update(webhooks)
            .where(webhooks.c.public_id == made.json()["id"])
            .values(url="http://127.0.0.1:9/x?#topo")
        )
    again = await client.post(
        "/api/v1/webhooks", json={"url": "http://127.0.0.1:9/x"}, headers=bearer(key)
    )
    assert again.status_code == 422
    assert again.json()["campos"] == {"url": webhook_pages.SAME_URL}


def test_what_no_request_carries_is_not_kept() -> None:
    kept = addresses.check_form("https://exemplo.com?#topo", allow_private=False)
    assert kept == "https://exemplo.com/"
    kept = addresses.check_form("https://exemplo.com/g?a=1#topo", allow_private=False)
    assert kept == "https://exemplo.com/g?a=1"


async def test_an_account_has_at_most_ten_webhooks(db: Database, client: httpx.AsyncClient) -> None:
    key = await new_key(client)

    async def make(path: str) -> httpx.Response:
        return await client.post(
            "/api/v1/webhooks", json={"url": f"http://127.0.0.1:9/{path}"}, headers=bearer(key)
        )

    for n in range(store.MAX_PER_ACCOUNT - 2):
        assert (await make(f"h{n}")).status_code == 201
    # The last two places, asked for eight times at once (each in its own transaction): two
    # get one, on PostgreSQL too, where nothing but the account's row lock keeps them apart.
    async with db.read() as conn:
        query = select(accounts.c.id).where(accounts.c.email == SENDER)
        account_id = (await conn.execute(query)).scalar_one()
    made = await asyncio.gather(
        *(store.create(db, account_id, f"http://127.0.0.1:9/x{n}") for n in range(8)),
        return_exceptions=True,
    )
    assert sum(not isinstance(answer, BaseException) for answer in made) == 2
    assert all(isinstance(a, store.Full) for a in made if isinstance(a, BaseException))
    refused = await make("mais")
    assert refused.status_code == 422
    assert refused.json() == {"erro": webhook_pages.TOO_MANY}
    form = await client.get("/conta/webhooks")
    on_page = await client.post(
        "/conta/webhooks",
        data={"csrf_token": page_token(form.text), "url": "http://127.0.0.1:9/mais"},
    )
    assert on_page.status_code == 422 and webhook_pages.TOO_MANY in on_page.text
    listed = (await client.get("/api/v1/webhooks", headers=bearer(key))).json()["webhooks"]
    assert len(listed) == store.MAX_PER_ACCOUNT

    # A disabled one still counts (Reenviar enables it again); deleting one frees its place.
    async with db.write() as conn:
        await conn.execute(update(webhooks).values(disabled_at=webhooks.c.created_at))
    assert (await make("mais")).status_code == 422
    await client.delete(f"/api/v1/webhooks/{listed[0]['id']}", headers=bearer(key))
    assert (await make("mais")).status_code == 201


async def test_webhooks_are_listed_and_deleted_only_by_their_account(
    settings: Settings,
    db: Database,
    client: httpx.AsyncClient,
    other_client: Any,
    receiver: Receiver,
) -> None:
    key, webhook_id = await register(client, receiver)
    async with other_client() as other:
        other_key = await new_key(other)
        assert (await other.get("/api/v1/webhooks", headers=bearer(other_key))).json() == {
            "webhooks": []
        }
        gone = await other.delete(f"/api/v1/webhooks/{webhook_id}", headers=bearer(other_key))
        assert gone.status_code == 404
        assert (await other.get(f"/conta/webhooks/{webhook_id}/excluir")).status_code == 404
    # The page asks first (what goes with it), then deletes on the confirmation's button.
    confirm = await client.get(f"/conta/webhooks/{webhook_id}/excluir")
    assert confirm.status_code == 200 and "Excluir webhook</button>" in confirm.text
    assert receiver.url in confirm.text and "as entregas dele" in confirm.text
    answer = (await client.get("/api/v1/webhooks", headers=bearer(key))).json()
    matches(answer, "ListaWebhooks")
    listed = answer["webhooks"]
    assert [hook["id"] for hook in listed] == [webhook_id]
    assert "secret" not in listed[0]
    deleted = await client.delete(f"/api/v1/webhooks/{webhook_id}", headers=bearer(key))
    assert deleted.status_code == 204
    assert (await client.get("/api/v1/webhooks", headers=bearer(key))).json()["webhooks"] == []


async def test_the_page_creates_a_webhook_and_shows_its_secret_once(
    settings: Settings, smtp: ScriptedSmtp, receiver: Receiver
) -> None:
    guarded = replace(settings, webhook_allow_private_networks=False)
    async with app_client(guarded, smtp, "ines@exemplo.com") as client:
        await the_page(client)
    async with app_client(settings, smtp, "ines@exemplo.com") as client:
        form = await client.get("/conta/webhooks")
        made = await client.post(
            "/conta/webhooks", data={"csrf_token": page_token(form.text), "url": receiver.url}
        )
        assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
        assert 'id="segredo">whsec_' in made.text
        assert "whsec_" not in (await client.get("/conta/webhooks")).text
        await client.post("/api/v1/convites", json={}, headers={})  # 401: no key, no change


async def the_page(client: httpx.AsyncClient) -> None:
    form = await client.get("/conta/webhooks")
    assert form.status_code == 200 and "Você ainda não tem webhooks." in form.text
    token = page_token(form.text)
    refused = await client.post(
        "/conta/webhooks", data={"csrf_token": token, "url": "http://exemplo.com/x"}
    )
    assert refused.status_code == 422 and addresses.NOT_HTTPS in refused.text
    no_token = await client.post("/conta/webhooks", data={"url": "https://exemplo.com/x"})
    assert no_token.status_code == 403


def test_private_receivers_cannot_be_allowed_in_production() -> None:
    production = {
        "APP_ENV": "production",
        "SECRET_KEY": "k" * 40,
        "PUBLIC_URL": "https://convites.exemplo.com",
    }
    assert load_settings(production).webhook_allow_private_networks is False
    with pytest.raises(ConfigError, match="WEBHOOK_ALLOW_PRIVATE_NETWORKS"):
        load_settings({**production, "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true"})


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),
        ("ff02::1", False),
        ("fec0::1", False),  # site-local
        ("2002:7f00:1::1", False),  # 6to4 around 127.0.0.1
        ("2002:a00:1::1", False),  # 6to4 around 10.0.0.1
        ("2002:5db8:d70e::1", True),  # 6to4 around 93.184.215.14
        ("2001:0:7f00:1::f5ff:fffe", False),  # Teredo: server 127.0.0.1, client 10.0.0.1
        ("2001:0:5db8:d70e::a3ff:fffe", False),  # Teredo: server and client both public
    ],
)
def test_only_public_addresses_pass_the_guard(address: str, public: bool) -> None:
    assert addresses.is_public(address) is public
