"""/saude and /metrics come from a snapshot a few seconds old; METRICS_TOKEN guards /metrics."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from redis.asyncio import Redis

from app.config import Settings
from app.sending.heartbeat import WORKERS, beat
from tests.fixtures import MovableClock
from tests.helpers import JSON, client_for, post_invite
from tests.services import ScriptedSmtp

TOKEN = "token-de-metricas-bem-comprido"


async def test_saude_and_metrics_are_served_from_a_snapshot_not_one_scan_per_request(
    settings: Settings, redis: Redis, smtp: ScriptedSmtp
) -> None:
    await beat(redis, WORKERS, "worker-a")
    async with client_for(replace(settings, status_snapshot_seconds=30), smtp=smtp) as browser:
        first = (await browser.get("/saude", headers=JSON)).json()
        first_metrics = (await browser.get("/metrics")).text
        await post_invite(browser, "ana@exemplo.com")
        # Many scrapes at once share the one snapshot: none of them counts the new row.
        answers = await asyncio.gather(*(browser.get("/saude", headers=JSON) for _ in range(20)))
        later_metrics = (await browser.get("/metrics")).text

    assert first["por_status"]["pendente"] == 0
    assert {a.json()["por_status"]["pendente"] for a in answers} == {0}
    assert later_metrics == first_metrics


async def test_a_snapshot_is_renewed_once_it_is_older_than_its_age(
    settings: Settings, redis: Redis, smtp: ScriptedSmtp, clock: MovableClock
) -> None:
    await beat(redis, WORKERS, "worker-a")
    async with client_for(settings, smtp=smtp) as browser:
        await browser.get("/saude", headers=JSON)
        await post_invite(browser, "ana@exemplo.com")
        clock.advance(settings.status_snapshot_seconds)
        renewed = (await browser.get("/saude", headers=JSON)).json()

    assert renewed["por_status"]["pendente"] == 1


async def test_with_metrics_token_metrics_need_the_bearer_token(settings: Settings) -> None:
    async with client_for(replace(settings, metrics_token=TOKEN)) as scraper:
        anonymous = await scraper.get("/metrics")
        wrong = await scraper.get("/metrics", headers={"Authorization": "Bearer errado"})
        right = await scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        health = await scraper.get("/saude")

    assert anonymous.status_code == wrong.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert "token de métricas" in anonymous.text
    assert right.status_code == 200 and "convites_invites_created_total" in right.text
    assert health.status_code in (200, 503)  # /saude stays public


async def test_in_production_metrics_are_closed_without_a_token_unless_opened(
    settings: Settings,
) -> None:
    production = replace(settings, app_env="production")
    async with client_for(production) as anyone:
        closed = await anyone.get("/metrics")
        health = await anyone.get("/saude")
    async with client_for(replace(production, metrics_public=True)) as anyone:
        opened = await anyone.get("/metrics")
    async with client_for(replace(production, metrics_token=TOKEN)) as scraper:
        anonymous = await scraper.get("/metrics")
        right = await scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})

    assert closed.status_code == 404 and "Página não encontrada" in closed.text
    assert "convites_" not in closed.text
    assert health.status_code in (200, 503)  # /saude stays public
    assert opened.status_code == 200 and "convites_invites_created_total" in opened.text
    assert anonymous.status_code == 401 and right.status_code == 200
