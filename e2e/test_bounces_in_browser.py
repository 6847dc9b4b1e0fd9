"""A bounce in Chromium: enviado turns devolvido live, said once as an alert, and Corrigir e
reenviar sends it again (with and without JavaScript). Real web, worker, Redis, SMTP and a real
``python -m app bounces`` process, fed a real-world bounce over SMTP."""

from __future__ import annotations

import smtplib
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from app.invites.validation import check_email
from e2e.conftest import Stack
from e2e.spoken import assertive, polite, spoken
from e2e.test_live_pages import (
    RECEIVED,
    SENT,
    SUBMITTED,
    assert_page_was_honest,
    open_home,
    row,
    submit,
    wait_for_heard,
)
from tests.helpers import bounce_message, verp_address
from tests.services import AppProcess, wait_for_port

pytestmark = pytest.mark.e2e

#: The sentence says what happened; the code and the reporting host are in the history.
BOUNCE_WHY = (
    "O servidor do destinatário informou que a caixa não existe. "
    "Novos convites para este endereço foram bloqueados. Corrija o endereço e reenvie."
)
BOUNCED = "O convite para {} voltou: não foi entregue. " + BOUNCE_WHY


@pytest.fixture(scope="module")
def receiver(running_stack: Stack) -> Iterator[int]:
    """The bounce receiver process, on the stack's BOUNCE_LISTEN."""
    port = running_stack.settings.bounce_listen[1]
    with AppProcess.bounces(running_stack.env, running_stack.folder / "bounces.log"):
        wait_for_port(port, timeout=30)
        yield port


def bounce(stack: Stack, port: int, public_id: str, email: str, attempt: int = 1) -> None:
    """The recipient's server (Postfix) reports "no such user" for this attempt."""
    verp = verp_address(stack.settings, public_id, attempt)
    raw = bounce_message("postfix.eml", public_id, email, attempt, verp)
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.sendmail("", [verp], raw)


def test_a_bounce_turns_the_row_devolvido_live_said_once_then_corrigir_e_reenviar_sends_it(
    page: Page, stack: Stack, receiver: int
) -> None:
    open_home(page)
    wrong, right = "jonas@exemplo.con", "jonas@exemplo.com"
    submit(page, wrong)
    wait_for_heard(page, polite(SENT.format(wrong)))
    public_id = row(page, wrong).get_attribute("data-convite")  # type: ignore[attr-defined]

    bounce(stack, receiver, public_id, wrong)

    wait_for_heard(page, assertive(BOUNCED.format(wrong)))
    expect(row(page, wrong)).to_have_attribute("data-status", "devolvido")
    page.get_by_text("Corrigir e reenviar").click()
    page.get_by_label("E-mail corrigido").fill(right)
    page.get_by_role("button", name="Reenviar para o endereço corrigido").click()
    wait_for_heard(page, polite(SENT.format(right)))
    expect(row(page, right)).to_have_attribute("data-status", "enviado")
    assert spoken(page) == [
        *SUBMITTED,
        polite(RECEIVED.format(wrong)),
        polite(SENT.format(wrong)),
        assertive(BOUNCED.format(wrong)),  # devolvido, through the alert region
        # The disclosure, read with the reason (the library gives <summary> no role).
        f"Corrigir e reenviar o convite para {wrong}, {BOUNCE_WHY}",
        f"textbox, E-mail corrigido, {wrong}, required",
        "button, Reenviar para o endereço corrigido",
        f"link, {right}",  # the row came back corrected: focus stays in it
        polite(RECEIVED.format(right)),
        polite(SENT.format(right)),
    ]
    assert_page_was_honest(page)
    # The code and the host that reported it are kept where the details live: the history.
    page.goto(f"/convites/{public_id}")
    expect(page.locator("main")).to_contain_text("(5.1.1). Informado por mail.exemplo.com.")


def test_without_javascript_the_bounce_shows_on_reload_and_the_correction_posts(
    new_context: Callable[..., BrowserContext], stack: Stack, receiver: int
) -> None:
    page = new_context(java_script_enabled=False).new_page()
    page.goto("/")
    # An international domain: stored and bounced in IDNA, shown and offered in its own letters.
    wrong, right = "lia@açaí.con", "lia@exemplo.com"
    stored, _ = check_email(wrong)
    assert stored == "lia@xn--aa-4iaz.con"
    page.get_by_label("E-mail").fill(wrong)
    page.get_by_role("button", name="Enviar convite").click()
    page.wait_for_url("**/convites/*")
    public_id = page.url.rsplit("/", 1)[1]
    for _ in range(100):
        if row(page, wrong).get_attribute("data-status") == "enviado":  # type: ignore[attr-defined]
            break
        page.get_by_role("link", name="Atualizar").click()
    bounce(stack, receiver, public_id, stored)

    for _ in range(100):
        page.get_by_role("link", name="Atualizar").click()
        if row(page, wrong).get_attribute("data-status") == "devolvido":  # type: ignore[attr-defined]
            break
    expect(page.get_by_text("Devoluções recebidas")).to_be_visible()
    page.get_by_text("Corrigir e reenviar").click()
    expect(page.get_by_label("E-mail corrigido")).to_have_value(wrong)
    page.get_by_label("E-mail corrigido").fill(right)
    page.get_by_role("button", name="Reenviar para o endereço corrigido").click()

    page.wait_for_url(f"**/convites/{public_id}")
    expect(row(page, right)).to_be_visible()
    assert row(page, right).get_attribute("data-status") in ("pendente", "enviando", "enviado")  # type: ignore[attr-defined]
