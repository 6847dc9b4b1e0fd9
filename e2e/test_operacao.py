"""The operator page in Chromium against real web and worker processes, under a strict CSP."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Route, async_playwright, expect

from app.config import Settings
from app.migrate import upgrade
from tests.conftest import make_settings, process_env
from tests.helpers import api_headers
from tests.services import (
    CHROMIUM,
    CHROMIUM_ARGS,
    AppProcess,
    RedisServer,
    ScriptedSmtp,
    free_port,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

TOKEN = "token-de-operacao-bem-comprido"
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'"


@pytest.fixture
def smtp() -> Iterator[ScriptedSmtp]:
    server = ScriptedSmtp(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def settings(tmp_path: Path, smtp: ScriptedSmtp) -> Iterator[Settings]:
    redis = RedisServer(tmp_path, free_port())
    redis.start()
    settings = make_settings(tmp_path, redis.url, smtp.port)
    upgrade(settings)
    yield settings
    redis.stop()


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


async def with_csp(route: Route) -> None:
    """What the security layer will send: no inline script or style may run on this page."""
    if route.request.resource_type != "document":
        await route.continue_()
        return
    response = await route.fetch()
    await route.fulfill(
        response=response, headers={**response.headers, "content-security-policy": CSP}
    )


async def wait_for_failures(http: httpx.AsyncClient, count: int) -> None:
    deadline = time.monotonic() + 15
    bearer = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    while (await http.get("/operacao", headers=bearer)).json()["por_status"]["falhou"] != count:
        assert time.monotonic() < deadline, "the invites did not fail in time"
        await asyncio.sleep(0.1)


async def test_an_operator_logs_in_and_sends_a_failure_group_again_watching_it_live(
    chromium: Browser, settings: Settings, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    env = process_env(settings, OPS_TOKEN=TOKEN, ALARM_CHECK_SECONDS="1")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (
        AppProcess.web(env, tmp_path / "web.log", port),
        AppProcess.worker(env, tmp_path / "worker.log") as worker,
    ):
        wait_for_port(port)
        worker.wait_for_log("worker started")
        smtp.always("550 5.7.1 Blocked")
        async with httpx.AsyncClient(base_url=base) as http:
            headers = await api_headers(http)
            for name in ("ana", "bia"):
                await http.post("/convites", json={"email": f"{name}@exemplo.com"}, headers=headers)
            await wait_for_failures(http, 2)

        page = await chromium.new_page()
        csp: list[str] = []
        page.on("console", lambda m: csp.append(m.text) if "Security Policy" in m.text else None)
        await page.route("**/*", with_csp)
        await page.goto(f"{base}/operacao")
        await page.get_by_label("Token de operação").fill(TOKEN)
        await page.get_by_role("button", name="Entrar").click()

        button = page.get_by_role("button", name="Tentar de novo 2 convites com este motivo")
        await expect(button).to_be_visible()
        assert (await Axe().run(page)).violations_count == 0
        smtp.always("250 OK")
        await button.click()

        await expect(page.get_by_role("status")).to_have_text("2 convites voltaram para a fila.")
        painel = page.locator("#painel")
        await expect(painel.locator("dt:text-is('enviado') + dd")).to_have_text("2")

        # A new failure elsewhere shows up on the open page over SSE, without a reload.
        await page.evaluate("window.semRecarregar = true")
        smtp.always("554 5.7.1 Spam")
        async with httpx.AsyncClient(base_url=base) as http:
            await http.post(
                "/convites", json={"email": "cris@exemplo.com"}, headers=await api_headers(http)
            )
        again = page.get_by_role("button", name="Tentar de novo 1 convite com este motivo")
        await expect(again).to_be_visible(timeout=15000)
        assert await page.evaluate("window.semRecarregar") is True
        assert csp == []
