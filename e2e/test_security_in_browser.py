"""In Chromium: the app's CSP is enforced on our pages, our pages break none of it, and the plain
form (no JavaScript) carries its CSRF token through a real uvicorn + arq."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import Error as PlaywrightError

from e2e.conftest import Stack

pytestmark = pytest.mark.e2e

NAME = "<script>alert(1)</script>"


def _refusals(page: Page) -> list[str]:
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Refused" in msg.text else None)
    return refused


def test_pages_obey_the_csp_which_blocks_inline_script_and_the_form_posts_with_its_token(
    new_context: Callable[..., BrowserContext], stack: Stack
) -> None:
    page = new_context(java_script_enabled=False).new_page()
    refused = _refusals(page)
    page.goto("/")
    page.fill("#email", "ana@exemplo.com")
    page.fill("#nome", NAME)
    page.get_by_role("button", name="Enviar convite").click()
    page.wait_for_url(stack.url + "/convites/*")
    assert "ana@exemplo.com" in page.content()

    page = new_context().new_page()  # JavaScript on, to prove the policy is enforced
    refused += _refusals(page)
    page.goto("/")
    page.wait_for_function("window.htmx !== undefined")
    assert refused == [], refused  # our own pages never trip the policy
    with pytest.raises(PlaywrightError, match="Content Security Policy"):
        page.add_script_tag(content="window.inlineRan = true")
    assert page.evaluate("window.inlineRan === undefined")
