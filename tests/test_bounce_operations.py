"""Bounces for on-call: counted by class in /metrics, listed by reason on /operacao, and /saude
healthy whatever the recipients' servers say, unless the receiver itself is down."""

from __future__ import annotations

import time
from dataclasses import replace

import aiosmtplib
import httpx
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.invites.records import Invite
from app.sending.heartbeat import BOUNCE_RECEIVERS, beat
from app.storage.database import Database
from tests.fixtures import drain
from tests.helpers import (
    JSON,
    bounce_sample,
    client_for,
    invite_row,
    post_invite,
    send_bounce,
    verp_address,
)

TOKEN = "token-de-operacao-bem-comprido"


async def bounce(settings: Settings, port: int, invite: Invite, sample: str) -> None:
    raw = bounce_sample(sample, invite, settings)
    await send_bounce(port, raw, verp_address(settings, invite.public_id))


async def two_bounced(
    client: httpx.AsyncClient, settings: Settings, db: Database, port: int
) -> None:
    """One invite devolvido (Gmail, 5.1.1), one that got an unreadable bounce (still enviado)."""
    first = await post_invite(client, "ana@exemplo.con")
    second = await post_invite(client, "bia@exemplo.com")
    await drain(settings)
    await bounce(settings, port, await invite_row(db, first["id"]), "gmail.eml")
    await bounce(settings, port, await invite_row(db, second["id"]), "malformed.eml")


async def test_metrics_count_bounces_by_class_and_outcome(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int
) -> None:
    await two_bounced(client, settings, db, bounce_port)

    text = (await client.get("/metrics")).text

    assert 'convites_bounces_total{class="permanent",outcome="devolvido"} 1.0' in text
    assert 'convites_bounces_total{class="unreadable",outcome="history"} 1.0' in text
    assert 'convites_invites{status="devolvido"} 1.0' in text


async def test_saude_stays_healthy_with_devolvido_invites_and_a_live_receiver(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int
) -> None:
    await two_bounced(client, settings, db, bounce_port)

    response = await client.get("/saude", headers=JSON)

    assert response.status_code == 200, response.text
    assert response.json()["por_status"]["devolvido"] == 1
    assert response.json()["devolucoes"] == {"receptores_ativos": 1}


async def test_saude_says_when_the_bounce_receiver_died_until_one_beats_again(
    client: httpx.AsyncClient, redis: Redis
) -> None:
    await redis.zadd(BOUNCE_RECEIVERS, {"morto:1:abc": time.time() - 60})  # killed, no goodbye

    down = await client.get("/saude", headers=JSON)
    await beat(redis, BOUNCE_RECEIVERS, "vivo:2:def")
    back = await client.get("/saude", headers=JSON)

    assert down.status_code == 503
    assert [p["codigo"] for p in down.json()["problemas"]] == ["bounce_receiver_down"]
    assert back.status_code == 200


async def test_saude_has_no_opinion_without_any_receiver(client: httpx.AsyncClient) -> None:
    response = await client.get("/saude", headers=JSON)

    assert response.status_code == 200
    assert response.json()["devolucoes"] == {"receptores_ativos": 0}


async def test_operacao_lists_the_devolvido_invites_by_reason(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int
) -> None:
    await two_bounced(client, settings, db, bounce_port)
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    async with client_for(replace(settings, ops_token=TOKEN)) as ops:
        page = (await ops.get("/operacao", headers=bearer)).text
        body = (await ops.get("/operacao", headers={**bearer, **JSON})).json()

    [group] = body["devolvidos_por_motivo"]
    assert group["quantidade"] == 1
    assert "a caixa não existe (5.1.1)" in group["motivo"]
    assert "Devolvidos por motivo" in page and "ana@exemplo.con" in page


async def test_metrics_count_refused_bounces_by_reason(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int
) -> None:
    created = await post_invite(client, "ana@exemplo.com")
    await drain(settings)
    invite = await invite_row(db, created["id"])
    forged = verp_address(settings, invite.public_id, invite.attempt + 1)  # not yet issued
    raw = bounce_sample("gmail.eml", invite, settings)
    for to in (forged, "postmaster@convites.exemplo"):
        with pytest.raises(aiosmtplib.SMTPRecipientsRefused):
            await send_bounce(bounce_port, raw, to)

    text = (await client.get("/metrics")).text

    assert 'convites_bounces_refused_total{reason="unknown_invite"} 1.0' in text
    assert 'convites_bounces_refused_total{reason="not_ours"} 1.0' in text
