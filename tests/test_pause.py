"""Pausing sending on purpose: workers claim nothing, invites wait as pendente, the page and
/saude say so, and sending resumes where it stopped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from arq.worker import Worker
from redis.asyncio import Redis

from app.config import Settings
from app.invites.status import Status
from app.sending.heartbeat import WORKERS, beat
from app.sending.pause import current_pause, pause_sending, resume_sending
from app.storage.database import Database
from app.web.present import TEAM_PAUSED_NOTICE
from tests.fixtures import MovableClock, drain, process_env
from tests.helpers import JSON, app_command, client_for, invite_row, post_invite, wait_for_status
from tests.services import AppProcess, ScriptedSmtp

TOKEN = "token-de-operacao-bem-comprido"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


async def cli(settings: Settings, *args: str) -> str:
    result = await app_command(settings, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_the_command_line_pauses_and_resumes_and_saude_reports_it_as_no_failure(
    client: httpx.AsyncClient, settings: Settings, db: Database, redis: Redis
) -> None:
    await beat(redis, WORKERS, "worker-a")
    assert "Envio pausado" in await cli(settings, "pause", "--motivo", "provedor fora")
    paused = await client.get("/saude", headers=JSON)

    assert "Envio retomado" in await cli(settings, "resume")
    running = await client.get("/saude", headers=JSON)

    assert paused.status_code == 200 and paused.json()["problemas"] == []
    assert paused.json()["envio"]["pausado"] is True
    assert paused.json()["envio"]["por"] == "cli"
    assert "motivo" not in paused.json()["envio"]  # free text is for the operator
    assert running.json()["envio"] == {"pausado": False}
    assert await current_pause(db) is None


async def test_a_paused_job_leaves_the_invite_pendente_and_sends_nothing(
    client: httpx.AsyncClient, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    await pause_sending(db, "teste")
    created = await post_invite(client, "ana@exemplo.com")

    # The job's own check, for a worker that does not follow the pause (the plain arq CLI);
    # ``python -m app worker`` picks no job at all meanwhile (the last test below).
    await drain(settings, Worker)

    assert (await invite_row(db, created["id"])).status == Status.PENDENTE
    assert smtp.received == []


async def test_the_page_says_the_team_paused_sending(
    client: httpx.AsyncClient, db: Database, redis: Redis
) -> None:
    await beat(
        redis, WORKERS, "worker-a"
    )  # a worker is alive: the pause is the team's, not a crash
    await pause_sending(db, "teste")  # a page reads the pause afresh, not the streams' cache

    page = await client.get("/")

    assert TEAM_PAUSED_NOTICE in page.text
    assert 'data-motivo="equipe"' in page.text


async def test_a_pending_invite_is_no_alarm_while_sending_is_paused(
    settings: Settings, db: Database, redis: Redis, smtp: ScriptedSmtp, clock: MovableClock
) -> None:
    async with client_for(replace(settings, alarm_pending_seconds=0.2), smtp=smtp) as browser:
        await post_invite(browser, "cris@exemplo.com")
        await pause_sending(db, "teste")
        clock.advance(0.4)
        await beat(redis, WORKERS, "worker-a")
        answer = await browser.get("/saude", headers=JSON)
    assert answer.status_code == 200
    assert answer.json()["fila"]["pendente_mais_antigo_segundos"] > 0.2


@pytest.fixture
async def ops(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(replace(settings, ops_token=TOKEN)) as http:
        yield http


async def test_the_operator_page_has_a_button_to_pause_and_one_to_resume(
    ops: httpx.AsyncClient, db: Database
) -> None:
    assert "Pausar o envio" in (await ops.get("/operacao", headers=BEARER)).text

    paused = await ops.post("/operacao/pausar", data={"motivo": "teste"}, headers=BEARER)
    panel = (await ops.get("/operacao", headers=BEARER)).text
    state = await current_pause(db)
    resumed = await ops.post("/operacao/retomar", headers=BEARER)

    assert paused.status_code == resumed.status_code == 303
    assert state is not None and state.by == "operacao" and state.reason == "teste"
    assert "Retomar o envio" in panel and "Pausado pela equipe" in panel
    assert await current_pause(db) is None


async def test_a_running_worker_claims_nothing_while_paused_and_sends_on_resume(
    settings: Settings, db: Database, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    async with client_for(settings, smtp=smtp) as browser:  # signed in before the pause
        await pause_sending(db, "teste")
        worker = AppProcess.worker(process_env(settings), tmp_path / "worker.log")
        with worker:
            worker.wait_for_log("sending paused by the team", timeout=60)
            created = await post_invite(browser, "ana@exemplo.com")
            await asyncio.sleep(3)
            assert (await invite_row(db, created["id"])).status == Status.PENDENTE
            assert smtp.received == []

            await resume_sending(db)
            await wait_for_status(db, created["id"], Status.ENVIADO, timeout=30)
        worker.wait_for_log("sending resumed", timeout=10)
    assert [m.rcpt_tos for m in smtp.received] == [["ana@exemplo.com"]]
    # It did not even pick the job up while paused: the job waited in the queue.
    assert "job left for later" not in worker.log(), worker.describe()
