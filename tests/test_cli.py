"""The on-call command line, run as a real child process: its output and exit codes."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
from redis.asyncio import Redis
from sqlalchemy import update

from app.clock import utcnow
from app.config import Settings
from app.invites import transitions
from app.invites.status import Status
from app.sending.heartbeat import WORKERS, beat
from app.storage.database import Database
from app.storage.tables import outbox
from tests.fixtures import drain
from tests.helpers import app_command, invite_row, post_invite
from tests.services import ScriptedSmtp, free_port


async def test_status_exits_0_when_healthy_and_1_with_the_reason_when_not(
    client: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    await beat(redis, WORKERS, "worker-a")
    # The beat ages on the wall clock while the command starts (seconds on a loaded machine):
    # an interval it cannot outlive, so only the beat's removal below makes the worker gone.
    healthy = await app_command(settings, "status", WORKER_HEARTBEAT_SECONDS="600")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.startswith("Convites: SAUDÁVEL")
    assert "Workers ativos: 1" in healthy.stdout

    await redis.delete("convites:workers")
    await post_invite(client, "ana@exemplo.com")
    sick = await app_command(settings, "status")

    assert sick.returncode == 1
    assert "COM PROBLEMAS" in sick.stdout and "[no_live_worker]" in sick.stdout
    assert "Por status: agendado 0, pendente 1" in sick.stdout


async def test_status_json_is_the_saude_body(settings: Settings) -> None:
    down = await app_command(
        settings, "status", "--json", REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"
    )

    assert down.returncode == 1
    body = json.loads(down.stdout)
    assert body["saudavel"] is False and body["redis"]["ok"] is False
    assert [p["codigo"] for p in body["problemas"]] == ["redis_unreachable"]


async def test_reconcile_publishes_a_forgotten_outbox_row_and_says_so(
    settings: Settings, db: Database, redis: Redis
) -> None:
    change = await transitions.create_invite(
        db, sender_id="s", email="ana@exemplo.com", name=None, correlation_id="c-1"
    )
    async with db.write() as conn:  # the request that wrote it died before enqueueing
        await conn.execute(update(outbox).values(created_at=utcnow() - timedelta(minutes=1)))

    result = await app_command(settings, "reconcile")

    assert result.returncode == 0, result.stderr
    assert "1 do outbox para a fila" in result.stdout
    assert await redis.zcard("arq:queue") == 1
    assert change.invite.public_id in (await redis.zrange("arq:queue", 0, -1))[0].decode()


async def test_retry_sends_again_only_the_failures_whose_reason_matches(
    client: httpx.AsyncClient, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    ids = {}
    for reply in ("550 5.1.1 No such user", "554 5.7.1 Spam"):
        smtp.always(reply)
        ids[reply[:3]] = (await post_invite(client, f"x{reply[:3]}@exemplo.com"))["id"]
        await drain(settings)

    result = await app_command(settings, "retry", "--status", "falhou", "--reason", "5.1.1")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 convite voltou para a fila.")
    assert ids["550"] in result.stdout
    retried = await invite_row(db, ids["550"])
    assert (retried.status, retried.attempt) == (Status.PENDENTE, 2)
    assert (await invite_row(db, ids["554"])).status == Status.FALHOU


async def test_retry_says_how_many_it_left_out_for_an_address_invited_again(
    client: httpx.AsyncClient, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    smtp.always("550 5.1.1 No such user")
    stopped = (await post_invite(client, "x@exemplo.com"))["id"]
    await drain(settings)
    await post_invite(client, "x@exemplo.com")  # the sender invited the address again

    result = await app_command(settings, "retry", "--status", "falhou", "--reason", "5.1.1")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "0 convites voltaram para a fila.",
        "1 convite ficou de fora: o remetente já tem outro convite a caminho do mesmo endereço.",
    ]
    assert (await invite_row(db, stopped)).status == Status.FALHOU


async def test_retry_refuses_a_status_that_cannot_be_sent_again(settings: Settings) -> None:
    result = await app_command(settings, "retry", "--status", "enviado")

    assert result.returncode == 2
    assert "invalid choice" in result.stderr
