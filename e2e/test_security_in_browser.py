"""In Chromium: the CSP is enforced on our pages, our pages break none of it, and the plain
form (no JavaScript) carries its CSRF token through a real uvicorn + arq.

Sync fixtures only, and Playwright in a thread of its own: this module must run next to other
browser tests that hold a sync Playwright (and so an event loop) on the main thread.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from app.migrate import upgrade
from tests.conftest import make_settings, process_env, redis_server, smtp, smtp_server
from tests.services import CHROMIUM, CHROMIUM_ARGS, AppProcess, RedisServer, ScriptedSmtp, free_port

__all__ = ["redis_server", "smtp", "smtp_server"]

pytestmark = pytest.mark.e2e

NAME = "<script>alert(1)</script>"


def _in_chromium(url: str) -> list[str]:
    """Send an invite through the no-JS form, then try an inline script; the refusals seen."""
    refused: list[str] = []

    def watch(page: Page) -> None:
        page.on("console", lambda msg: refused.append(msg.text) if "Refused" in msg.text else None)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(java_script_enabled=False).new_page()
            watch(page)
            page.goto(url + "/", timeout=10_000)
            page.fill("#email", "ana@exemplo.com")
            page.fill("#nome", NAME)
            page.click("button[type=submit]")
            page.wait_for_url(url + "/convites/*", timeout=10_000)
            assert "ana@exemplo.com" in page.content()

            page = browser.new_page()  # JavaScript on, to prove the policy is enforced
            watch(page)
            page.goto(url + "/", timeout=10_000)
            assert refused == [], refused  # our own pages never trip the policy
            with pytest.raises(PlaywrightError, match="Content Security Policy"):
                page.add_script_tag(content="window.inlineRan = true")
            assert page.evaluate("window.inlineRan === undefined")
        finally:
            browser.close()
    return refused


def test_pages_obey_the_csp_which_blocks_inline_script_and_the_form_posts_with_its_token(
    redis_server: RedisServer, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, redis_server.url, smtp.port)
    port = free_port()
    with ThreadPoolExecutor(1) as thread:  # Alembic and Playwright each run their own loop
        thread.submit(upgrade, settings).result(60)
        env = process_env(settings)
        with (
            AppProcess.web(env, tmp_path / "web.log", port) as web,
            AppProcess.worker(env, tmp_path / "worker.log"),
        ):
            web.wait_for_log("Application startup complete")
            thread.submit(_in_chromium, f"http://127.0.0.1:{port}").result(60)
