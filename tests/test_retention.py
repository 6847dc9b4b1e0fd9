"""Retention (RETENTION_DAYS): the worker's daily job deletes invites that ended longer ago,
with their events, links, bounces and outbox rows, in chunks, and counts what it deleted.
Time is moved, not waited for (the ``clock`` fixture)."""

from __future__ import annotations

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import func, insert, select

from app.clock import utcnow
from app.config import Settings
from app.invites import transitions
from app.invites.status import Status
from app.ops.metrics import retention_deleted
from app.sending.worker import purge_ended, worker_options
from app.storage.database import Database
from app.storage.tables import (
    bounces,
    idempotency_keys,
    invite_events,
    invite_links,
    invites,
    outbox,
    signin_tokens,
    webhook_deliveries,
)
from tests.answering import invited, press
from tests.api_keys import bearer, new_key
from tests.fixtures import MovableClock
from tests.helpers import JSON, bounce_sample, invite_row, post_invite, send_bounce, verp_address
from tests.services import ScriptedSmtp

DAY = 24 * 3600
TABLES = (
    invites,
    invite_events,
    invite_links,
    bounces,
    outbox,
    signin_tokens,
    webhook_deliveries,
)


async def webhook(client: httpx.AsyncClient) -> None:
    key = await new_key(client)
    url = {"url": "http://127.0.0.1:9/convites"}  # never delivered here: only its rows matter
    made = await client.post("/api/v1/webhooks", json=url, headers=bearer(key, **JSON))
    assert made.status_code == 201, made.text


async def row_counts(db: Database) -> dict[str, int]:
    async with db.read() as conn:
        return {
            table.name: int((await conn.execute(select(func.count()).select_from(table))).scalar())
            for table in TABLES
        }


async def addresses_left(db: Database) -> list[tuple[str, str, str]]:
    async with db.read() as conn:
        rows = await conn.execute(
            select(invites.c.kind, invites.c.email, invites.c.status).order_by(invites.c.id)
        )
        return [tuple(row) for row in rows]


async def unmatched_bounce(db: Database) -> None:
    """A bounce that named no invite of ours (kept, like every bounce)."""
    async with db.write() as conn:
        await conn.execute(
            insert(bounces).values(
                dedup_key="sem-convite",
                received_at=utcnow(),
                envelope_recipient="devolucoes+x@convites.exemplo",
                kind="unreadable",
                outcome="unknown_invite",
                raw=b"To: quem@exemplo.com\r\n\r\nsem convite",
            )
        )


async def test_the_daily_job_deletes_only_what_ended_longer_ago_than_retention_days(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    redis: Redis,
    clock: MovableClock,
    bounce_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("app.consent.retention.CHUNK", 2)  # several chunks
    await webhook(client)  # every status change gets a delivery row, pointing at the invite
    _, link = await invited(client, settings, smtp, "ana@exemplo.com")
    await press(anonymous_client, link, "aceitar")
    bounced, _ = await invited(client, settings, smtp, "bia@exemplo.com")
    bia = await invite_row(db, bounced)
    await send_bounce(
        bounce_port, bounce_sample("gmail.eml", bia, settings), verp_address(settings, bounced)
    )
    assert (await invite_row(db, bounced)).status == Status.DEVOLVIDO
    await invited(client, settings, smtp, "caio@exemplo.com")  # enviado: not ended
    late = await post_invite(client, "dani@exemplo.com")
    await unmatched_bounce(db)
    clock.advance(100 * DAY)
    assert await transitions.cancel(db, bia.sender_id, late["id"]) is not None
    clock.advance(81 * DAY)
    before = await row_counts(db)

    removed = await purge_ended({"db": db, "redis": redis, "settings": settings})

    assert await addresses_left(db) == [
        ("convite", "caio@exemplo.com", "enviado"),
        ("convite", "dani@exemplo.com", "cancelado"),  # ended 81 days ago
    ]
    after = await row_counts(db)
    assert removed == {
        name: before[name] - after[name] for name in before if before[name] > after[name]
    }
    assert removed["invites"] == 3  # ana, bia and the sign-in mail
    assert removed["bounces"] == 2 and removed["signin_tokens"] == 1
    assert removed["invite_links"] == 2 and removed["outbox"] == 3
    assert removed["webhook_deliveries"] > 0
    assert await retention_deleted(redis) == removed
    assert await purge_ended({"db": db, "redis": redis, "settings": settings}) == {}
    metrics = (await anonymous_client.get("/metrics")).text
    assert 'convites_retention_deleted_total{table="invites"} 3.0' in metrics


async def test_nothing_is_deleted_before_its_time(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    redis: Redis,
    clock: MovableClock,
) -> None:
    _, link = await invited(client, settings, smtp, "ana@exemplo.com")
    await press(anonymous_client, link, "recusar")
    clock.advance(settings.retention_days * DAY - 60)

    assert await purge_ended({"db": db, "redis": redis, "settings": settings}) == {}
    assert [row[2] for row in await addresses_left(db)] == ["enviado", "recusado"]


async def test_the_daily_job_deletes_kept_api_answers_older_than_their_period(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    db: Database,
    redis: Redis,
    settings: Settings,
    clock: MovableClock,
) -> None:
    """A claim prunes only its own API key's old answers; an API key never used again would
    keep its answers (and the addresses in them) for ever without the daily job."""
    key = await new_key(client)
    for name, hours_later in (("velho", 23), ("novo", 2)):
        sent = await anonymous_client.post(
            "/api/v1/convites",
            json={"email": f"{name}@exemplo.com"},
            headers=bearer(key, **{"Idempotency-Key": name}),
        )
        assert sent.status_code == 202, sent.text
        clock.advance(hours_later * 3600)

    removed = await purge_ended({"db": db, "redis": redis, "settings": settings})

    assert removed == {"idempotency_keys": 1}
    async with db.read() as conn:
        left = (await conn.execute(select(idempotency_keys.c.key))).scalars().all()
    assert left == ["novo"]
    assert (await retention_deleted(redis))["idempotency_keys"] == 1


def test_the_worker_runs_it_every_hour_for_at_most_a_minute(settings: Settings) -> None:
    [job] = [job for job in worker_options(settings)["cron_jobs"] if job.name == "cron:purge_ended"]
    assert (job.hour, job.minute, job.second, job.unique) == (None, {30}, {30}, True)
    assert job.timeout_s == 60  # the default lease's send job allows it (cron_timeout_seconds)
    assert not job.run_at_startup


def test_retention_days_defaults_to_180(settings: Settings) -> None:
    assert settings.retention_days == 180
