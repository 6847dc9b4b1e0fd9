"""How an invite ends without an answer, and starts again: expiry (the sweep, INVITE_TTL_SECONDS),
the sender's cancel (a pendente one is never sent), and a re-send that replaces the link.
Also the sender's summary line and filter. Real worker (burst), real SMTP capture."""

from __future__ import annotations

import asyncio

import httpx
from redis.asyncio import Redis
from sqlalchemy import delete

from app.config import Settings
from app.invites import transitions
from app.invites.records import Change
from app.invites.status import Status
from app.live.wakeups import Announcer, sender_channel
from app.sending.queue import Publisher
from app.sending.sweep import reconcile
from app.storage.database import Database
from app.storage.tables import invite_links as invite_links_table
from tests.answering import answer_link, invited, press
from tests.fixtures import MovableClock, drain
from tests.helpers import (
    JSON,
    api_headers,
    bounce_sample,
    client_for,
    csrf_token,
    invite_row,
    post_invite,
    send_bounce,
    statuses,
    verp_address,
)
from tests.services import ScriptedSmtp


async def sweep_once(settings: Settings, db: Database, redis: Redis) -> int:
    from arq.connections import ArqRedis

    arq_redis = ArqRedis.from_url(settings.redis_url)
    publisher, announcer = Publisher(db, arq_redis), Announcer(arq_redis)
    try:
        done = await reconcile(
            db,
            arq_redis,
            publisher,
            announcer,
            invite_ttl_seconds=settings.invite_ttl_seconds,
            sending_lease_seconds=settings.sending_lease_seconds,
            webhook_requeue_seconds=30,
        )
    finally:
        await arq_redis.aclose()
    return done.expired


async def test_an_unanswered_invite_expires_live_and_its_link_answers_410(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    redis: Redis,
    clock: MovableClock,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    invite = await invite_row(db, public_id)
    pubsub = redis.pubsub()
    await pubsub.subscribe(sender_channel(invite.sender_id))
    await pubsub.get_message(timeout=1)
    assert await sweep_once(settings, db, redis) == 0  # seven days have not passed

    clock.advance(settings.invite_ttl_seconds + 1)
    assert await sweep_once(settings, db, redis) == 1

    woken = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
    await pubsub.aclose()
    assert woken is not None
    assert (await invite_row(db, public_id)).status == Status.EXPIRADO
    page = await anonymous_client.get(path)
    assert page.status_code == 410
    assert "Este convite expirou" in page.text and "Marta Souza" in page.text
    assert "Peça um novo convite" in page.text
    row = (await client.get(f"/convites/{public_id}", headers=JSON)).json()
    assert row["mensagem"] == "O convite para ana@exemplo.com.br expirou sem resposta."
    assert await sweep_once(settings, db, redis) == 0  # once


async def test_an_answered_invite_never_expires(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    redis: Redis,
    clock: MovableClock,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    await press(anonymous_client, path, "aceitar")
    clock.advance(settings.invite_ttl_seconds + 1)

    assert await sweep_once(settings, db, redis) == 0
    assert (await invite_row(db, public_id)).status == Status.ACEITO


async def test_a_link_older_than_the_ttl_answers_410_even_before_the_sweep(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    clock.advance(settings.invite_ttl_seconds + 1)

    async with client_for(settings) as late:
        page = await late.get(path)
        pressed = await late.post(f"{path}/aceitar", data={"csrf_token": await csrf_token(late)})

    assert page.status_code == 410 and "expirou" in page.text
    assert pressed.status_code == 410
    assert (await invite_row(db, public_id)).status == Status.ENVIADO


async def test_a_pendente_invite_cancelled_is_never_sent(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """The claim is conditional on ``pendente``: the job still runs, and loses."""
    created = await post_invite(client, "ana@exemplo.com.br")

    cancelled = await client.post(
        f"/convites/{created['id']}/cancelar", headers=await api_headers(client)
    )
    await drain(settings)

    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelado"
    assert not any("ana@exemplo.com.br" in mail.rcpt_tos for mail in smtp.received)
    assert await statuses(db, created["id"]) == [("pendente", 1), ("cancelado", 1)]
    # No mail is known to have left: the row does not say a link went out.
    page = (await client.get(f"/convites/{created['id']}")).text
    assert "Se algum e-mail saiu, o link dele não funciona mais. Reenvie se mudar" in page
    assert "O link do convite não funciona mais" not in page


async def test_a_sent_invite_cancelled_has_a_410_link_and_the_form_needs_a_confirmation(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    page = (await client.get(f"/convites/{public_id}")).text
    assert '<details class="convite-acao cancelar">' in page
    assert "Sim, cancelar o convite para ana@exemplo.com.br" in page

    cancelled = await client.post(
        f"/convites/{public_id}/cancelar", data={"csrf_token": await csrf_token(client)}
    )

    assert cancelled.status_code == 303
    assert cancelled.headers["location"] == f"/convites/{public_id}"
    link = await anonymous_client.get(path)
    assert link.status_code == 410 and "Este convite foi cancelado" in link.text
    assert (await client.get(f"/convites/{public_id}", headers=JSON)).json()["mensagem"] == (
        "Convite para ana@exemplo.com.br cancelado."
    )
    assert (
        "O link do convite não funciona mais." in (await client.get(f"/convites/{public_id}")).text
    )


async def test_an_answered_invite_cannot_be_cancelled(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    await press(anonymous_client, path, "aceitar")

    refused = await client.post(
        f"/convites/{public_id}/cancelar", headers=await api_headers(client)
    )

    assert refused.status_code == 409 and "aceito" in refused.json()["erro"]
    assert (await invite_row(db, public_id)).status == Status.ACEITO


async def test_another_sender_cannot_cancel_or_see_the_invite(
    client: httpx.AsyncClient, other_client: object, settings: Settings, db: Database
) -> None:
    created = await post_invite(client, "ana@exemplo.com.br")

    async with other_client() as other:  # type: ignore[operator]
        refused = await other.post(
            f"/convites/{created['id']}/cancelar", headers=await api_headers(other)
        )
        seen = await other.get(f"/convites/{created['id']}", headers=JSON)

    assert refused.status_code == 404 and seen.status_code == 404
    assert (await invite_row(db, created["id"])).status != Status.CANCELADO


async def test_a_resend_replaces_the_link_the_old_one_answers_410_the_new_one_works(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, old = await invited(client, settings, smtp)
    await client.post(f"/convites/{public_id}/cancelar", headers=await api_headers(client))

    resent = await client.post(f"/convites/{public_id}/reenviar", headers=await api_headers(client))

    assert resent.status_code == 202
    replaced = await anonymous_client.get(old)  # before the new mail even left
    assert replaced.status_code == 410 and "substituído" in replaced.text
    await drain(settings)
    new = answer_link(smtp, "ana@exemplo.com.br")
    assert new != old
    assert (await anonymous_client.get(old)).status_code == 410
    assert (await press(anonymous_client, new, "aceitar")).status_code == 303
    assert (await invite_row(db, public_id)).status == Status.ACEITO


async def test_declined_and_expired_invites_can_be_sent_again(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    await press(anonymous_client, path, "recusar")
    page = (await client.get(f"/convites/{public_id}")).text
    assert 'aria-label="Reenviar o convite para ana@exemplo.com.br"' in page

    resent = await client.post(f"/convites/{public_id}/reenviar", headers=await api_headers(client))

    assert resent.status_code == 202
    assert (await invite_row(db, public_id)).status == Status.PENDENTE


async def test_a_devolvido_invite_whose_link_is_opened_is_accepted(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    bounce_port: int,
) -> None:
    """A click proves the mail arrived: the bounce was wrong (or about another copy)."""
    public_id, path = await invited(client, settings, smtp)
    invite = await invite_row(db, public_id)
    raw = bounce_sample("gmail.eml", invite, settings)
    await send_bounce(bounce_port, raw, verp_address(settings, public_id))
    assert (await invite_row(db, public_id)).status == Status.DEVOLVIDO

    assert (await press(anonymous_client, path, "aceitar")).status_code == 303
    assert (await invite_row(db, public_id)).status == Status.ACEITO


async def test_the_summary_line_and_the_filter_by_state(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    accepted, path = await invited(client, settings, smtp, "ana@exemplo.com.br")
    await press(anonymous_client, path, "aceitar")
    await invited(client, settings, smtp, "bia@exemplo.com.br")  # enviado: waiting
    smtp.reply_next("550 5.1.1 No such user")
    failed = await post_invite(client, "caio@exemplo.com.br")
    await drain(settings)
    assert (await client.get(f"/convites/{failed['id']}", headers=JSON)).json()["status"] == (
        "falhou"
    )

    summary = (await client.get("/convites/resumo", headers=JSON)).json()
    home = (await client.get("/")).text
    only_accepted = (await client.get("/?estado=aceitos")).text
    api = (await client.get("/convites?estado=aceitos", headers=JSON)).json()

    assert summary == {
        "total": 3,
        "agendados": 0,
        "aceitos": 1,
        "enviando": 0,
        "aguardando_resposta": 1,
        "precisam_de_atencao": 1,
        "encerrados": 0,
    }
    assert "1 aceito" in home and "aguardando resposta" in home
    assert 'aria-current="page">Todos' in home
    assert 'aria-current="page">Aceitos' in only_accepted
    assert "ana@exemplo.com.br" in only_accepted and "bia@exemplo.com.br" not in only_accepted
    assert 'data-estados="aceito"' in only_accepted
    assert [row["id"] for row in api["convites"]] == [accepted]


async def test_the_cancel_wakes_the_senders_other_pages(
    client: httpx.AsyncClient, settings: Settings, db: Database, redis: Redis
) -> None:
    created = await post_invite(client, "ana@exemplo.com.br")
    invite = await invite_row(db, created["id"])
    pubsub = redis.pubsub()
    await pubsub.subscribe(sender_channel(invite.sender_id))
    await pubsub.get_message(timeout=1)

    await client.post(f"/convites/{created['id']}/cancelar", headers=await api_headers(client))

    assert await pubsub.get_message(ignore_subscribe_messages=True, timeout=5) is not None
    await pubsub.aclose()


async def test_a_cancel_and_a_claim_at_once_never_both_win(db: Database) -> None:
    """The claim and the cancel are conditional UPDATEs: exactly one of them wins."""
    for n in range(10):
        created = await transitions.create_invite(
            db, sender_id="s1", email=f"p{n}@exemplo.com", name=None, correlation_id="c"
        )
        assert isinstance(created, Change)
        public_id = created.invite.public_id
        claim, cancel = await asyncio.gather(
            transitions.claim_with_link(db, public_id, 1, 60),
            transitions.cancel(db, "s1", public_id),
        )
        assert (claim is None) != (cancel is None)


async def test_answers_expiries_and_cancels_are_counted_in_metrics(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    from tests.test_metrics import scrape, value

    _, path = await invited(client, settings, smtp, "ana@exemplo.com.br")
    await press(anonymous_client, path, "aceitar")
    cancelled = await post_invite(client, "bia@exemplo.com.br")
    await client.post(f"/convites/{cancelled['id']}/cancelar", headers=await api_headers(client))

    samples = await scrape(client)

    assert value(samples, "convites_invite_endings_total", status="aceito") == 1
    assert value(samples, "convites_invite_endings_total", status="cancelado") == 1
    assert value(samples, "convites_invite_endings_total", status="recusado") == 0
    assert value(samples, "convites_invites", status="aceito") == 1


async def test_a_resent_invite_gets_a_full_period_from_its_new_link(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    redis: Redis,
    clock: MovableClock,
) -> None:
    """Expiry counts from the live link: a re-send whose attempt ends ``incerto`` is not
    expired by the next sweep because the first mail left long ago."""
    public_id, _ = await invited(client, settings, smtp)
    clock.advance(settings.invite_ttl_seconds + 1)
    assert await sweep_once(settings, db, redis) == 1
    resent = await client.post(f"/convites/{public_id}/reenviar", headers=await api_headers(client))
    assert resent.status_code == 202
    claim = await transitions.claim_with_link(db, public_id, 2, 60)
    assert claim is not None
    assert claim.link is not None
    assert await transitions.mark_uncertain(
        db, claim.change.invite, "A conexão caiu no meio do envio."
    )

    assert await sweep_once(settings, db, redis) == 0
    assert (await invite_row(db, public_id)).status == Status.INCERTO
    clock.advance(settings.invite_ttl_seconds + 1)
    assert await sweep_once(settings, db, redis) == 1  # a full period later, it does


async def test_an_invite_written_before_links_existed_never_expires(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    redis: Redis,
    clock: MovableClock,
) -> None:
    """An upgrade must not expire (and announce) every old enviado row at once."""
    public_id, _ = await invited(client, settings, smtp)
    async with db.write() as conn:
        await conn.execute(delete(invite_links_table))
    clock.advance(settings.invite_ttl_seconds + 1)

    assert await sweep_once(settings, db, redis) == 0
    assert (await invite_row(db, public_id)).status == Status.ENVIADO


async def test_a_cancel_while_a_worker_is_sending_says_to_try_again_in_a_moment(
    client: httpx.AsyncClient, db: Database
) -> None:
    created = await post_invite(client, "ana@exemplo.com.br")
    assert await transitions.claim_with_link(db, created["id"], 1, 60)

    refused = await client.post(
        f"/convites/{created['id']}/cancelar", headers=await api_headers(client)
    )

    assert refused.status_code == 409
    assert "sendo enviado agora" in refused.json()["erro"]
    assert (await invite_row(db, created["id"])).status == Status.ENVIANDO
