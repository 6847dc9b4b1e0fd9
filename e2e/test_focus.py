"""Focus after the form is swapped: decided in the same moment as the swap, never later.

htmx settles swapped content (and fires htmx:load) a moment after the swap: 20 ms when idle,
much longer on a busy machine. A focus() at settle time pulled a person who had already
tabbed on back to E-mail. These tests make the settle slow on purpose, so the moment is wide.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from e2e.conftest import Stack
from e2e.test_live_pages import focused, open_home, row
from tests.services import ScriptedSmtp

SLOW_SETTLE = "htmx.config.defaultSettleDelay = 1500"


def test_tabbing_on_right_after_a_sent_invite_is_not_pulled_back_to_email(
    page: Page, stack: Stack, smtp: ScriptedSmtp
) -> None:
    page.clock.install()  # the page's timers run as usual until the test moves them on
    open_home(page)
    page.evaluate(SLOW_SETTLE)
    page.get_by_label("E-mail").fill("iara@exemplo.com")
    page.get_by_label("E-mail").press("Enter")
    expect(row(page, "iara@exemplo.com")).to_be_visible()
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.id === 'email'"
        " && document.activeElement.closest('form[data-estado=\"limpo\"]')",
        timeout=5_000,
    )

    page.keyboard.press("Tab")
    assert focused(page) == "INPUT|nome"
    page.clock.run_for(2_500)  # the slow settle (1.5 s) is well past: its timers have run

    assert focused(page) == "INPUT|nome"


def test_after_a_refused_form_focus_is_on_the_invalid_field_at_once(
    page: Page, stack: Stack, smtp: ScriptedSmtp
) -> None:
    open_home(page)
    page.evaluate(SLOW_SETTLE)
    page.get_by_label("Nome").fill("x" * 101)
    page.get_by_role("button", name="Enviar convite").click()

    # Long before the slow settle: the swap itself placed focus and the alert.
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.id === 'email'", timeout=1_000
    )
    assert page.locator("#email").get_attribute("aria-invalid") == "true"
