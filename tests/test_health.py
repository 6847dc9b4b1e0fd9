"""GET /saude on real SQLite and redis-server: 200 when healthy, 503 with the reasons."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.invites.status import Status
from app.ops.health import PROBE_TIMEOUT_SECONDS, redact_addresses
from app.sending.heartbeat import WORKERS, beat
from tests.fixtures import MovableClock, drain, running_app
from tests.helpers import JSON, client_for, post_invite
from tests.services import ScriptedSmtp, free_port


def codes(body: dict[str, object]) -> list[str]:
    problems = body["problemas"]
    assert isinstance(problems, list)
    return [problem["codigo"] for problem in problems]


async def saude(settings: Settings) -> httpx.Response:
    """GET /saude on an app with these settings; a hung answer fails the test (a generous
    deadline, ten times the probes' own timeout)."""
    async with running_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            return await asyncio.wait_for(http.get("/saude"), 10 * PROBE_TIMEOUT_SECONDS)


async def test_saude_is_200_with_a_live_worker_and_nothing_stuck(
    client: httpx.AsyncClient, redis: Redis
) -> None:
    await beat(redis, WORKERS, "worker-a")
    await post_invite(client, "ana@exemplo.com")

    response = await client.get("/saude")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["saudavel"] is True and body["problemas"] == []
    assert body["banco"]["ok"] and body["redis"]["ok"]
    assert body["workers"]["ativos"] == 1
    assert body["workers"]["heartbeat_mais_recente_segundos"] < 5
    assert body["fila"]["profundidade"] == 1
    assert body["por_status"]["pendente"] == 1


async def test_saude_is_503_when_invites_wait_and_no_worker_beats(
    client: httpx.AsyncClient,
) -> None:
    await post_invite(client, "bia@exemplo.com")

    response = await client.get("/saude")

    assert response.status_code == 503
    assert codes(response.json()) == ["no_live_worker"]
    assert response.json()["workers"]["ativos"] == 0


async def test_saude_is_200_without_workers_when_nothing_waits(client: httpx.AsyncClient) -> None:
    response = await client.get("/saude")

    assert response.status_code == 200, response.text


async def test_saude_is_503_when_the_oldest_pendente_is_past_the_alarm_threshold(
    settings: Settings, redis: Redis, smtp: ScriptedSmtp, clock: MovableClock
) -> None:
    quick = replace(settings, alarm_pending_seconds=0.2)
    async with client_for(quick, smtp=smtp) as http:
        await post_invite(http, "cris@exemplo.com")
        await beat(redis, WORKERS, "worker-a")
        assert (await http.get("/saude")).status_code == 200
        clock.advance(0.3)
        await beat(redis, WORKERS, "worker-a")
        response = await http.get("/saude")

    assert response.status_code == 503
    assert codes(response.json()) == ["pending_too_old"]
    assert response.json()["fila"]["pendente_mais_antigo_segundos"] > 0.2


async def test_saude_answers_503_at_once_when_redis_refuses_connections(
    settings: Settings,
) -> None:
    response = await saude(replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0"))

    assert response.status_code == 503
    assert codes(response.json()) == ["redis_unreachable"]
    # The refusal itself is the answer: the probe did not sit out its timeout.
    assert response.json()["redis"]["erro"] == "ConnectionError"
    assert response.json()["banco"]["ok"] is True


@pytest.fixture
def silent_redis() -> Iterator[str]:
    """A port that accepts connections and never answers: a hung Redis."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"


async def test_saude_answers_503_within_seconds_when_redis_hangs(
    settings: Settings, silent_redis: str
) -> None:
    response = await saude(replace(settings, redis_url=silent_redis))

    assert response.status_code == 503
    assert "redis_unreachable" in codes(response.json())
    assert response.json()["redis"]["erro"] == f"sem resposta em {PROBE_TIMEOUT_SECONDS:g} s"


async def test_saude_is_503_when_the_database_cannot_be_opened(
    settings: Settings, tmp_path: Path, redis: Redis
) -> None:
    await beat(redis, WORKERS, "worker-a")
    response = await saude(replace(settings, database_url=f"sqlite+aiosqlite:///{tmp_path}"))

    assert response.status_code == 503
    assert codes(response.json()) == ["database_unreachable"]
    assert response.json()["redis"]["ok"] is True


async def test_public_saude_counts_failures_by_class_without_the_servers_text(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, redis: Redis
) -> None:
    smtp.reply_next(
        "550 5.1.1 <um@exemplo.com>: Recipient address rejected",
        "550 5.1.1 <dois@exemplo.com>: Recipient address rejected",
    )
    for email in ("um@exemplo.com", "dois@exemplo.com", "tres@exemplo.com"):
        await post_invite(client, email)
    await drain(settings)
    await beat(redis, WORKERS, "worker-a")

    body = (await client.get("/saude", headers=JSON)).json()

    # The mail server's reply text is for the operator (/operacao, the CLI), not the public.
    assert body["falhas_ultima_hora"] == [{"classe": "permanent", "quantidade": 2}]
    assert "Recipient" not in str(body)
    assert body["por_status"] == {
        **{status.value: 0 for status in Status},
        "enviado": 1,
        "falhou": 2,
    }


def test_addresses_in_server_replies_are_redacted() -> None:
    assert redact_addresses("550 <ana.b+x@mail.exemplo.com>: no") == "550 <<endereço>>: no"
