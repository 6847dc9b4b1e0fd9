"""Make docs/screenshot.png: the main page with a few invites, on the real stack.

.venv/bin/python scripts/screenshot.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from e2e.conftest import CHROMIUM, CHROMIUM_ARGS, Stack  # noqa: E402
from tests.services import RedisServer, ScriptedSmtp, free_port  # noqa: E402


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="convites-shot-"))
    redis = RedisServer(folder, free_port())
    smtp = ScriptedSmtp(free_port())
    redis.start()
    smtp.start()
    stack = Stack.migrated(folder, redis.url, smtp.port, SLOW_AFTER_SECONDS=2)
    try:
        stack.start_web()
        stack.start_worker()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(base_url=stack.url, viewport={"width": 900, "height": 900})
            page.goto("/")
            page.wait_for_function("window.htmx !== undefined")

            def send(email: str, name: str, status: str) -> None:
                page.get_by_label("E-mail").fill(email)
                page.get_by_label("Nome").fill(name)
                page.get_by_role("button", name="Enviar convite").click()
                row = page.locator("li.convite", has_text=email)
                expect(row).to_have_attribute("data-status", status)

            send("ana.souza@exemplo.com.br", "Ana Souza", "enviado")
            smtp.always("550 5.1.1 Mailbox unavailable")
            send("joao@exemplo.invalido", "João", "falhou")
            smtp.always("250 2.0.0 OK")
            send("bia@exemplo.com.br", "Bia", "enviado")
            stack.stop_worker()
            send("carlos@exemplo.com.br", "Carlos Lima", "pendente")
            expect(page.locator("#aviso-envio")).to_be_visible()
            page.wait_for_timeout(2500)  # long enough to read "Ainda enviando"
            page.screenshot(path=str(ROOT / "docs" / "screenshot.png"), full_page=True)
            browser.close()
    finally:
        stack.worker.__exit__()
        stack.web.__exit__()
        smtp.stop()
        redis.stop()


if __name__ == "__main__":
    main()
