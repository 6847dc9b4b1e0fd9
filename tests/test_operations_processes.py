"""Operations against real processes: uvicorn and arq children, their JSON logs on stderr."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from tests.fixtures import SENDER, process_env
from tests.helpers import sync_api_headers
from tests.services import AppProcess, ScriptedSmtp, free_port, wait_for_port
from tests.signing_in import sign_in_sync
from tests.waiting import until

TOKEN = "token-de-operacao-bem-comprido"


def json_lines(process: AppProcess) -> list[dict[str, Any]]:
    lines = []
    for line in process.log().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    return process_env(settings, ALARM_CHECK_SECONDS="0.3", OPS_TOKEN=TOKEN)


@pytest.fixture
def web(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[AppProcess, str]]:
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port) as process:
        wait_for_port(port)
        yield process, f"http://127.0.0.1:{port}"


@contextmanager
def running_worker(env: dict[str, str], log_path: Path) -> Iterator[AppProcess]:
    with AppProcess.worker(env, log_path) as worker:
        worker.wait_for_log("worker started")
        yield worker


def test_one_correlation_id_follows_an_invite_through_web_worker_and_email(
    web: tuple[AppProcess, str], env: dict[str, str], tmp_path: Path, smtp: ScriptedSmtp
) -> None:
    web_process, base = web
    with running_worker(env, tmp_path / "worker.log") as worker:
        with httpx.Client(base_url=base) as http:
            sign_in_sync(http, smtp, SENDER)
            response = http.post(
                "/convites",
                json={"email": "ana@exemplo.com"},
                headers={**sync_api_headers(http), "X-Request-ID": "qa-trace-0001"},
            )
        assert response.status_code == 202
        assert response.headers["x-request-id"] == "qa-trace-0001"
        [message] = until(lambda: smtp.received)

        def traced() -> list[dict[str, Any]]:
            return [e for e in json_lines(worker) if e.get("correlation_id") == "qa-trace-0001"]

        # The sign-in mail's job logs its own "attempt finished" first: wait for this one's.
        worker_lines = until(
            lambda: traced() if "attempt finished" in {e["message"] for e in traced()} else []
        )

    web_lines = [e for e in json_lines(web_process) if e.get("correlation_id") == "qa-trace-0001"]
    assert "invite accepted" in [e["message"] for e in web_lines]
    assert {"sending", "attempt finished"} <= {e["message"] for e in worker_lines}
    assert all(e["process"] == "worker" for e in worker_lines)
    assert message.message["X-Correlation-ID"] == "qa-trace-0001"


def alarm(process: AppProcess, code: str, state: str) -> list[dict[str, Any]]:
    return [
        e for e in json_lines(process) if e.get("alarm") == code and e.get("alarm_state") == state
    ]


def test_a_stopped_worker_turns_saude_503_and_raises_the_alarm_until_it_is_back(
    web: tuple[AppProcess, str], env: dict[str, str], tmp_path: Path, smtp: ScriptedSmtp
) -> None:
    web_process, base = web
    with httpx.Client(base_url=base) as http:
        with running_worker(env, tmp_path / "worker-1.log") as worker:
            assert httpx.get(f"{base}/saude").status_code == 200
            sign_in_sync(http, smtp, SENDER)
            worker.stop()
        http.post("/convites", json={"email": "bia@exemplo.com"}, headers=sync_api_headers(http))
    down = until(lambda: (r := httpx.get(f"{base}/saude")).status_code == 503 and r)
    assert [p["codigo"] for p in down.json()["problemas"]] == ["no_live_worker"]
    [raised] = until(lambda: alarm(web_process, "no_live_worker", "raised"))
    assert raised["level"] == "ERROR" and raised["process"] == "web"

    with running_worker(env, tmp_path / "worker-2.log"):
        until(lambda: httpx.get(f"{base}/saude").status_code == 200)
        until(lambda: alarm(web_process, "no_live_worker", "cleared"))
        until(lambda: smtp.received)

    assert len(alarm(web_process, "no_live_worker", "raised")) == 1


def test_the_operator_stream_sends_the_panel_and_counts_as_an_open_sse_connection(
    web: tuple[AppProcess, str],
) -> None:
    _, base = web
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{base}/operacao/eventos").status_code == 401

    with httpx.stream("GET", f"{base}/operacao/eventos", headers=bearer, timeout=10) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "event: painel"
        assert "estado-titulo" in next(lines)
        gauge = until(lambda: "convites_sse_connections 1.0" in httpx.get(f"{base}/metrics").text)
        assert gauge

    until(lambda: "convites_sse_connections 0.0" in httpx.get(f"{base}/metrics").text)
