"""The invitee answers, in Chromium: the sender's page hears it live, once; the invitee's page on
a phone-sized screen reads who invites, the message, then the two buttons; answering signs
nobody in; a declined, expired, cancelled or replaced link says so. Real web, worker, Redis and
SMTP; the link comes from the captured mail."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from playwright.sync_api import BrowserContext, Page, expect

from app.config import load_settings
from app.ops.commands import reconcile_once
from e2e.conftest import Stack
from e2e.spoken import polite, read_through, spoken
from e2e.test_live_pages import (
    RECEIVED,
    SENT,
    assert_no_axe_violations,
    assert_page_was_honest,
    open_home,
    row,
    wait_for_heard,
)
from tests.services import ScriptedSmtp
from tests.waiting import until

pytestmark = pytest.mark.e2e

ANSWER_LINK = re.compile(r"/c/[A-Za-z0-9_-]{32,}")
ACCEPTED = "{} aceitou o convite."
DECLINED = "{} recusou o convite."
EXPIRED = "O convite para {} expirou sem resposta."
CANCELLED = "Convite para {} cancelado."
#: Filling E-mail and pressing Enviar convite: the clean form takes focus back.
SUBMITTED = ["textbox, E-mail, required", "button, Enviar convite", "textbox, E-mail, required"]
WITH_MESSAGE = [
    "textbox, E-mail, required",
    "textbox, Mensagem (opcional), Aparece no e-mail e na página do convite. Até 500 caracteres.",
    "button, Enviar convite",
    "textbox, E-mail, required",
]
NAME_FIELD = "textbox, Nome (opcional)"
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def answer_link(smtp: ScriptedSmtp, email: str, not_this: str | None = None) -> str:
    """The answer link in the newest invitation mail to ``email`` (waits for it)."""

    def newest_link() -> str | None:
        for mail in reversed(smtp.received):
            if email not in mail.rcpt_tos:
                continue
            body = mail.message.get_body(("plain",))
            found = ANSWER_LINK.search(body.get_content()) if body is not None else None
            return found.group(0) if found and found.group(0) != not_this else None
        return None

    return until(newest_link, 15, f"an invitation mail with a new link reaches {email}")


def heard_twice(page: Page, phrase: str) -> None:
    """Wait until ``phrase`` was heard a second time (a re-send's own "enviado")."""
    until(
        lambda: spoken(page).count(phrase) >= 2,
        15,
        lambda: f"{phrase!r} heard twice: {spoken(page)}",
    )


def invite(page: Page, email: str, message: str = "") -> None:
    page.get_by_label("E-mail").fill(email)
    if message:
        page.get_by_label("Mensagem").fill(message)
    page.get_by_role("button", name="Enviar convite").click()
    wait_for_heard(page, polite(SENT.format(email)))


def test_the_invitee_accepts_on_a_phone_and_the_senders_page_hears_it_once(
    page: Page, new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    open_home(page)
    email = "ana.aceita@exemplo.com.br"
    invite(page, email, "Vem para o churrasco!\n<b>Sábado</b> às 13h.")
    link = answer_link(smtp_server, email)

    phone = new_context(signed_in=False, **PHONE).new_page()
    phone.goto(link)
    # Who invites, the message, then the two buttons: the order a screen reader reads them.
    reading = read_through(phone, "main")
    assert [p for p in reading if p.startswith(("heading", "button")) or "Sábado" in p] == [
        "heading, Marta Souza convidou você, level 1",
        "Vem para o churrasco! <b>Sábado</b> às 13h.",
        "button, Aceitar convite",
        "button, Recusar",
        "heading, Seus dados, level 2",
        "button, Apagar meus dados",
    ]
    assert reading.index("Mensagem de Marta Souza:") < reading.index("button, Aceitar convite")
    main = phone.locator("main")
    expect(main.get_by_role("heading", level=1)).to_have_text("Marta Souza convidou você")
    assert "para o Convites" not in main.inner_text()  # who invites; the Mensagem says what for
    text = main.inner_text()
    assert "<b>Sábado</b> às 13h." in text  # the markup is text, not bold
    assert text.index("convidou você") < text.index("Vem para o churrasco!")
    assert text.index("Vem para o churrasco!") < text.index("Aceitar convite")
    assert text.index("Aceitar convite") < text.index("Recusar")
    accept = phone.get_by_role("button", name="Aceitar convite")
    box = accept.bounding_box()
    assert box is not None and box["height"] >= 44  # a thumb-sized target
    assert_no_axe_violations(phone, "the invitee's page")

    accept.click()

    # The answer is recorded and the link's page says so; nobody is signed in by a link.
    phone.wait_for_url(re.compile(re.escape(link) + "$"))
    expect(phone.get_by_role("heading", level=1)).to_have_text(
        "Você aceitou o convite de Marta Souza"
    )
    expect(phone.get_by_role("link", name="Entrar no Convites")).to_be_visible()
    assert_no_axe_violations(phone, "the link's page, after accepting")
    wait_for_heard(page, polite(ACCEPTED.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "aceito")
    expect(page.locator("#resumo-convites")).to_contain_text("1 aceito")
    phone.goto("/convites")
    expect(phone).to_have_url(re.compile(r"/entrar$"))
    phone.goto(link)  # opened again: what was answered, no second event
    expect(phone.get_by_role("heading", level=1)).to_contain_text("Você aceitou")
    page.wait_for_timeout(500)
    assert spoken(page) == [
        *WITH_MESSAGE,
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
        polite(ACCEPTED.format(email)),
    ]
    assert_page_was_honest(page)


def test_a_decline_is_heard_once_by_name_and_is_final(
    page: Page, new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    open_home(page)
    email, name = "bruno.recusa@exemplo.com.br", "Bruno Pereira"
    page.get_by_label("Nome").fill(name)
    invite(page, email)
    link = answer_link(smtp_server, email)
    other = new_context(signed_in=False).new_page()
    other.goto(link)

    other.get_by_role("button", name="Recusar").click()

    expect(other.get_by_role("heading", level=1)).to_contain_text("Você recusou o convite")
    expect(other.locator("main")).to_contain_text("Peça a Marta Souza que envie o convite de novo")
    # No way to turn the no into a yes: the one button left erases the invitee's data.
    expect(other.get_by_role("button")).to_have_text(["Apagar meus dados"])
    assert_no_axe_violations(other, "the declined page")
    # The sender gave a name: the person is named, not their address.
    wait_for_heard(page, polite(DECLINED.format(name)))
    expect(row(page, email)).to_have_attribute("data-status", "recusado")
    assert spoken(page) == [
        NAME_FIELD,
        *SUBMITTED,
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
        polite(DECLINED.format(name)),
    ]


def test_cancelling_needs_a_confirmation_is_heard_and_closes_the_link(
    page: Page, new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    open_home(page)
    email = "carla.cancela@exemplo.com.br"
    invite(page, email)
    link = answer_link(smtp_server, email)

    row(page, email).get_by_text("Cancelar convite").click()  # type: ignore[attr-defined]
    page.get_by_role("button", name=f"Sim, cancelar o convite para {email}").click()

    wait_for_heard(page, polite(CANCELLED.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "cancelado")
    # The pressed button is gone; focus stayed in the row.
    expect(row(page, email).get_by_role("link", name=email)).to_be_focused()  # type: ignore[attr-defined]
    other = new_context(signed_in=False).new_page()
    response = other.goto(link)
    assert response is not None and response.status == 410
    expect(other.get_by_role("heading", level=1)).to_have_text("Este convite foi cancelado")
    assert_no_axe_violations(other, "a cancelled link (410)")

    # Sent again: the old link says it was replaced, the new mail's link works.
    page.get_by_role("button", name=f"Reenviar o convite para {email}").click()
    heard_twice(page, polite(SENT.format(email)))
    new_link = answer_link(smtp_server, email, not_this=link)
    replaced = other.goto(link)
    assert replaced is not None and replaced.status == 410
    expect(other.get_by_role("heading", level=1)).to_have_text("Este convite foi substituído")
    fresh = other.goto(new_link)
    assert fresh is not None and fresh.status == 200
    assert spoken(page) == [
        *SUBMITTED,
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
        f"Cancelar convite para {email}",
        f"button, Sim, cancelar o convite para {email}",
        f"link, {email}",
        polite(CANCELLED.format(email)),
        f"button, Reenviar o convite para {email}",
        f"link, {email}",  # the pressed button is gone: focus stays in the row
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
    ]
    assert_page_was_honest(page)


def test_an_unanswered_invite_expires_live_and_its_link_is_410(
    page: Page,
    new_context: Callable[..., BrowserContext],
    stack: Stack,
    smtp_server: ScriptedSmtp,
    capsys: pytest.CaptureFixture[str],
) -> None:
    open_home(page)
    email = "davi.expira@exemplo.com.br"
    invite(page, email)
    link = answer_link(smtp_server, email)

    # One sweep pass (the worker's cron job, as ``python -m app reconcile`` runs it) on a clock
    # a whole INVITE_TTL_SECONDS ahead: only this pass needs the later time, so it runs here,
    # under time-machine, in a thread of its own (asyncio.run beside Playwright's loop); the
    # web process shows the change live from the database.
    settings = load_settings(stack.env)
    later = datetime.now(UTC) + timedelta(seconds=settings.invite_ttl_seconds + 1)
    with time_machine.travel(later, tick=True), ThreadPoolExecutor(1) as thread:
        assert thread.submit(reconcile_once, settings).result() == 0
    assert "expiraram" in capsys.readouterr().out

    wait_for_heard(page, polite(EXPIRED.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "expirado")
    other = new_context(signed_in=False).new_page()
    response = other.goto(link)
    assert response is not None and response.status == 410
    expect(other.get_by_role("heading", level=1)).to_have_text("Este convite expirou")
    expect(other.locator("main")).to_contain_text("Peça um novo convite")
    assert spoken(page) == [
        *SUBMITTED,
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
        polite(EXPIRED.format(email)),
    ]


def test_a_filtered_list_still_hears_every_change_and_keeps_its_summary(
    page: Page, new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    """On "Aceitos", a new invite is not listed, yet the person hears it go out; the accepted
    row then arrives in the list, heard once, and the summary follows."""
    page.goto("/?estado=aceitos")
    page.wait_for_function("window.htmx !== undefined")
    email = "eva.filtro@exemplo.com.br"
    page.get_by_role("link", name="Aceitos").focus()
    assert_no_axe_violations(page, "the filtered list")

    invite(page, email)
    expect(row(page, email)).to_have_count(0)  # type: ignore[attr-defined]
    link = answer_link(smtp_server, email)
    other = new_context(signed_in=False).new_page()
    other.goto(link)
    other.get_by_role("button", name="Aceitar convite").click()

    wait_for_heard(page, polite(ACCEPTED.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "aceito")
    expect(page.locator("#resumo-convites")).to_contain_text("1 aceito")
    assert spoken(page) == [
        "link, Aceitos, current page",
        *SUBMITTED,
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
        polite(ACCEPTED.format(email)),
    ]
    assert_page_was_honest(page)
