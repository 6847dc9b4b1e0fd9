"""Signing in by link in Chromium: the page tells the truth about the link mail as it does about
invites, the link from the real mail signs in, and a second browser of the same account sees the
same list, live."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, Page, expect

from e2e.conftest import Stack
from e2e.spoken import polite, read_through, spoken, wait_for_spoken
from e2e.test_live_pages import (
    EMAIL_FIELD,
    RECEIVED,
    SENT,
    SUBMITTED,
    assert_page_was_honest,
    open_home,
    row,
    submit,
    wait_for_heard,
)
from tests.services import ScriptedSmtp
from tests.signing_in import sign_in_browser, wait_for_link

pytestmark = pytest.mark.e2e

EMAIL = "leitora@exemplo.com"
ASKED = f"Recebemos, enviando o link… (para {EMAIL})"
LINK_SENT = f"Link de acesso enviado para {EMAIL}. Confira sua caixa de entrada."
#: The sign-in page read from the top of its content to the end: what it is, how it works, the
#: form, the two (empty) live regions and the (empty) list of links asked for.
SIGN_IN_PAGE = [
    "main",
    "heading, Entrar no Convites, level 1",
    "paragraph",
    "Com o Convites você convida pessoas por e-mail e acompanha, de verdade, o que aconteceu "
    "com cada convite.",
    "end of paragraph",
    "paragraph",
    "Informe seu e-mail: enviamos um link de acesso, sem senha.",
    "end of paragraph",
    "form",
    "E-mail",
    "textbox, E-mail, required",
    "button, Enviar link de acesso",
    "end of form",
    "status",
    "alert",
    "region, Links de acesso pedidos",
    "heading, Links de acesso pedidos, level 2",
    "list",
    "end of region, Links de acesso pedidos",
]


def test_signing_in_from_the_mail_says_each_step_once_and_lands_on_the_form(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp: ScriptedSmtp
) -> None:
    page = open_home(new_context(signed_in=False).new_page())
    expect(page.get_by_role("heading", level=1)).to_have_text("Entrar no Convites")
    assert Axe().run(page).violations_count == 0
    assert read_through(page) == SIGN_IN_PAGE

    page.get_by_label("E-mail").fill(EMAIL)
    page.get_by_role("button", name="Enviar link de acesso").click()
    wait_for_heard(page, polite(LINK_SENT))
    expect(page.get_by_label("E-mail")).to_be_focused()
    assert spoken(page) == [
        EMAIL_FIELD,
        "button, Enviar link de acesso",
        EMAIL_FIELD,
        polite(ASKED),
        polite(LINK_SENT),
    ]
    assert_page_was_honest(page)

    page.goto(wait_for_link(smtp, EMAIL))
    page.get_by_role("button", name="Entrar").click()
    expect(page).to_have_url(re.compile(r"/conta\?primeira=1$"))
    assert Axe().run(page).violations_count == 0
    page.get_by_label("Seu nome").fill("Leitora Atenta")
    page.get_by_role("button", name="Salvar").click()

    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Enviar um convite")
    expect(page.get_by_role("navigation", name="Sua conta")).to_contain_text("Leitora Atenta")

    page.get_by_role("button", name="Sair").click()
    expect(page).to_have_url(re.compile(r"/entrar$"))
    page.goto("/convites")
    expect(page).to_have_url(re.compile(r"/entrar$"))  # signed out on the server too


def test_a_second_browser_of_the_same_account_sees_the_invite_arrive_and_be_sent_live(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp: ScriptedSmtp
) -> None:
    phone, laptop = new_context(signed_in=False), new_context(signed_in=False)
    for context in (phone, laptop):
        signing_in = context.new_page()
        sign_in_browser(signing_in, smtp, "dupla.tela@exemplo.com")
        signing_in.close()  # one tab per device: a second tab would share the announcement
    on_phone = open_home(phone.new_page())
    on_laptop = open_home(laptop.new_page())

    submit(on_phone, "amiga@exemplo.com")

    expect(row(on_laptop, "amiga@exemplo.com")).to_have_attribute("data-status", "enviado")
    wait_for_heard(on_phone, polite(SENT.format("amiga@exemplo.com")))
    wait_for_heard(on_laptop, polite(SENT.format("amiga@exemplo.com")))
    # Two devices: the phone, where it was sent, hears its focus moves and both steps; the
    # laptop hears each step once, or only "enviado" when that came before its pause for a new
    # row was over (a row new to a page waits a moment, in case another tab of it acted).
    assert spoken(on_phone) == [
        *SUBMITTED,
        polite(RECEIVED.format("amiga@exemplo.com")),
        polite(SENT.format("amiga@exemplo.com")),
    ]
    assert spoken(on_laptop) in (
        [polite(RECEIVED.format("amiga@exemplo.com")), polite(SENT.format("amiga@exemplo.com"))],
        [polite(SENT.format("amiga@exemplo.com"))],
    )
    assert_page_was_honest(on_laptop)


IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
)
WHEN = re.compile(r"\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2}")


def heard_section(page: Page) -> list[str]:
    """``#sessoes`` read from start to end, each date and time shown as ``<quando>``."""
    return [WHEN.sub("<quando>", phrase) for phrase in read_through(page, "#sessoes")]


def test_conta_lists_the_open_sessions_and_ends_one_or_all(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp: ScriptedSmtp
) -> None:
    email = "aparelhos@exemplo.com"
    phone_context = new_context(signed_in=False, user_agent=IPHONE)
    phone = phone_context.new_page()
    sign_in_browser(phone, smtp, email, name="Dona dos Aparelhos")
    laptop = new_context(signed_in=False).new_page()
    sign_in_browser(laptop, smtp, email)

    laptop.goto("/conta")
    expect(laptop.get_by_role("heading", level=2)).to_have_text("Aparelhos conectados")
    assert Axe().run(laptop).violations_count == 0
    assert heard_section(laptop) == [
        "region, Aparelhos conectados",
        "heading, Aparelhos conectados, level 2",
        "paragraph",
        "Os navegadores em que você entrou nesta conta. Não reconhece algum? Encerre-o.",
        "end of paragraph",
        "list",
        *session_heard(1, "Chrome no Linux", " (este aparelho)"),
        *session_heard(2, "Safari no iPhone", ""),
        "end of list",
        "paragraph",
        "Sair de todos os aparelhos encerra todas as sessões, inclusive esta: para entrar de "
        "novo, você pede um novo link.",
        "end of paragraph",
        "form",
        "button, Sair de todos os aparelhos",
        "end of form",
    ]

    ended = (
        "Sessão encerrada. Quem estava usando aquele aparelho precisa de um novo link para entrar."
    )
    laptop.get_by_role("button", name=re.compile(r"^Encerrar Safari no iPhone")).click()
    expect(laptop).to_have_url(re.compile(r"/conta#sessoes$"))  # ?encerrada=1 said, dropped
    expect(laptop.locator(".aviso-sucesso")).to_have_text(
        "Sessão encerrada. Quem estava usando aquele aparelho precisa de um novo link para entrar."
    )
    assert Axe().run(laptop).violations_count == 0
    assert heard_section(laptop)[2:5] == [  # right after the heading the link points at
        "paragraph",
        "Sessão encerrada. Quem estava usando aquele aparelho precisa de um novo link para entrar.",
        "end of paragraph",
    ]
    expect(laptop.get_by_role("button", name=re.compile(r"^Encerrar"))).to_have_count(1)
    wait_for_spoken(laptop, polite(ended))  # what the press did, heard once
    assert spoken(laptop).count(polite(ended)) == 1
    phone.goto("/convites")
    expect(phone).to_have_url(re.compile(r"/entrar$"))  # the phone is signed out

    laptop.get_by_role("button", name="Sair de todos os aparelhos").click()
    expect(laptop).to_have_url(re.compile(r"/entrar$"))  # ?saiu=todos said, then dropped
    assert read_through(laptop)[:5] == [
        "main",
        "heading, Entrar no Convites, level 1",
        "paragraph",
        "Você saiu de todos os aparelhos. Para entrar de novo, peça um link.",
        "end of paragraph",
    ]
    wait_for_spoken(
        laptop, polite("Você saiu de todos os aparelhos. Para entrar de novo, peça um link.")
    )
    assert Axe().run(laptop).violations_count == 0
    laptop.goto("/convites")
    expect(laptop).to_have_url(re.compile(r"/entrar$"))


def session_heard(position: int, device: str, mark: str) -> list[str]:
    """One listed session, as it is read: the device, when and from which network it signed
    in, its last use, and its own **Encerrar** (named after it: there is one per session)."""
    item = f"listitem, level 1, position {position}, set size 2"
    button = f"Encerrar {device}{mark}, último uso em <quando>"
    return [
        item,
        "paragraph",
        "strong",
        device,
        "end of strong",
        *([mark.strip()] if mark else []),
        "end of paragraph",
        *[
            phrase
            for when in ("Entrou em", "Último uso em")
            for phrase in (
                "paragraph",
                when,
                "time",
                "<quando>",
                "end of time",
                ", da rede 127.0.0.1.",
                "end of paragraph",
            )
        ],
        "form",
        f"button, {button}",
        "Encerrar",
        button.removeprefix("Encerrar "),
        f"end of button, {button}",
        "end of form",
        f"end of {item}",
    ]
