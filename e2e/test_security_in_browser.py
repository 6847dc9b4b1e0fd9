"""In Chromium: the CSP is enforced on our pages, our pages break none of it, and the plain
form (no JavaScript) carries its CSRF token through a real uvicorn + arq."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright
from playwright.async_api import Error as PlaywrightError

from app.config import Settings
from tests.conftest import (  # noqa: F401  (fixtures used by name)
    process_env,
    redis,
    redis_server,
    settings,
    smtp,
    smtp_server,
)
from tests.services import AppProcess, free_port

pytestmark = pytest.mark.e2e

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        yield browser
        await browser.close()


@pytest.fixture
def web(settings: Settings, tmp_path: Path) -> Iterator[str]:  # noqa: F811
    port = free_port()
    env = process_env(settings)
    with (
        AppProcess.web(env, tmp_path / "web.log", port) as process,
        AppProcess.worker(env, tmp_path / "worker.log"),
    ):
        process.wait_for_log("Application startup complete")
        yield f"http://127.0.0.1:{port}"


async def test_pages_obey_the_csp_which_blocks_inline_script(chromium: Browser, web: str) -> None:
    page = await chromium.new_page()
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Refused" in msg.text else None)

    await page.goto(web + "/", timeout=10_000)
    await page.fill("#email", "ana@exemplo.com")
    await page.fill("#nome", "<script>alert(1)</script>")
    await page.click("button[type=submit]")
    await page.wait_for_url(web + "/convites/*", timeout=10_000)
    assert "Recebemos" in await page.content() or "Enviado" in await page.content()
    await page.goto(web + "/", timeout=10_000)
    assert await page.locator(".convite-nome").first.inner_text() == "<script>alert(1)</script>"
    assert refused == [], refused  # our own pages never trip the policy

    with pytest.raises(PlaywrightError, match="Content Security Policy"):
        await page.add_script_tag(content="window.inlineRan = true")
    assert await page.evaluate("window.inlineRan === undefined")
