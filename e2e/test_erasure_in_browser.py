"""**Apagar meus dados**, in Chromium: the invitee asks on the invitation's page, opens the mailed
link, confirms, and reads that it is done; each page axe-clean, read in order, and nothing said
twice. Real web, worker, Redis and SMTP; the links come from the captured mails."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from app.web.invites import NOT_FOUND
from e2e.conftest import Stack
from e2e.spoken import assertive, polite, read_through, spoken, wait_for_spoken
from e2e.test_answers_in_browser import SUBMITTED, answer_link, invite
from e2e.test_live_pages import RECEIVED, SENT, assert_no_axe_violations, open_home
from tests.services import ScriptedSmtp
from tests.waiting import until

pytestmark = pytest.mark.e2e

#: What every page's main opens with: its two live regions (``_regions.html``), silent here.
PAGE_START = ["main", "status", "alert"]
CONFIRM_LINK = re.compile(r"/apagar/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


def confirmation_link(smtp: ScriptedSmtp, email: str) -> str:
    def found() -> str | None:
        for mail in reversed(smtp.received):
            body = mail.message.get_body(("plain",))
            if email in mail.rcpt_tos and body is not None:
                match = CONFIRM_LINK.search(body.get_content())
                if match:
                    return match.group(0)
        return None

    return until(found, 15, f"a confirmation mail reaches {email}")


def test_the_invitee_asks_confirms_and_hears_each_page_once(
    page: Page, new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    open_home(page)
    email = "ana.apaga@exemplo.com.br"
    invite(page, email)
    link = answer_link(smtp_server, email)
    phone = new_context(signed_in=False).new_page()
    phone.goto(link)
    reading = read_through(phone, "main")
    assert [p for p in reading if p.startswith(("heading", "button"))] == [
        "heading, Marta Souza convidou você, level 1",
        "button, Aceitar convite",
        "button, Recusar",
        "heading, Seus dados, level 2",
        "button, Apagar meus dados",
    ]

    phone.get_by_role("button", name="Apagar meus dados").click()

    expect(phone.get_by_role("heading", level=1)).to_have_text("Confira seu e-mail")
    assert read_through(phone, "main") == [
        *PAGE_START,
        "heading, Confira seu e-mail, level 1",
        "paragraph",
        "Recebemos seu pedido. Um link de confirmação está a caminho de",
        "strong",
        email,
        "end of strong",
        ".",
        "end of paragraph",
        "paragraph",
        "Abra o link e confirme: só então apagamos os dados. Ele vale por 24 horas.",
        "end of paragraph",
        "paragraph",
        "link, Voltar para o convite",
        "end of paragraph",
    ]
    assert_no_axe_violations(phone, "the erasure request's page")
    assert spoken(phone) == []

    phone.goto(confirmation_link(smtp_server, email))
    expect(phone.get_by_role("heading", level=1)).to_have_text(f"Apagar os dados de {email}?")
    assert read_through(phone, "main") == [
        *PAGE_START,
        f"heading, Apagar os dados de {email}?, level 1",
        "paragraph",
        "Vamos apagar do Convites tudo o que guardamos deste endereço: os convites que ele "
        "recebeu, com o histórico e as respostas, e as devoluções de e-mail. Se houver uma conta "
        "com este endereço, ela também será apagada, com as sessões, as chaves de API e os "
        "convites que enviou.",
        "end of paragraph",
        "paragraph",
        "Não dá para desfazer.",
        "end of paragraph",
        "form",
        "button, Apagar meus dados",
        "end of form",
    ]
    assert_no_axe_violations(phone, "the erasure confirmation page")

    phone.get_by_role("button", name="Apagar meus dados").click()

    expect(phone.get_by_role("heading", level=1)).to_have_text("Seus dados foram apagados")
    assert read_through(phone, "main") == [
        *PAGE_START,
        "heading, Seus dados foram apagados, level 1",
        "paragraph",
        "O Convites não guarda mais nada deste endereço. Um novo convite só chega se alguém "
        "enviar outro.",
        "end of paragraph",
    ]
    assert_no_axe_violations(phone, "the erasure done page")
    assert spoken(phone) == []
    gone = phone.goto(link)
    assert gone is not None and gone.status == 404
    # The sender's page heard the send, once each, and nothing about the erasure.
    assert spoken(page) == [*SUBMITTED, polite(RECEIVED.format(email)), polite(SENT.format(email))]
    # Its row is still there until a press on it finds the invite gone: then the row goes too,
    # and focus moves to the list's heading.
    page.get_by_role("button", name=f"Lembrar {email} do convite").click()
    wait_for_spoken(page, assertive(NOT_FOUND))
    expect(page.locator("li.convite", has_text=email)).to_have_count(0)
    expect(page.locator("#lista-vazia")).to_be_visible()
    assert spoken(page)[-3:] == [
        f"button, Lembrar {email} do convite",
        "heading, Meus convites, level 2",
        assertive(NOT_FOUND),
    ]
