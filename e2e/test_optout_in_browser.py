"""The invitee's way out, in Chromium: the opt-out pages (opened from the real mail's link) are
axe-clean and read in order, record nothing until the person confirms, then offer the way back;
every state offers Apagar meus dados; the sender's page hears the suppression once. Real web,
worker, Redis and SMTP. (An operator lifting it: e2e/test_operacao.py.)"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from e2e.conftest import Stack
from e2e.spoken import polite, read_through, spoken
from e2e.test_answers_in_browser import SUBMITTED, answer_link, invite
from e2e.test_live_pages import RECEIVED, SENT, assert_no_axe_violations, open_home, row
from tests.services import ScriptedSmtp
from tests.waiting import until

pytestmark = pytest.mark.e2e

OPTOUT_LINK = re.compile(r"/descadastro/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+")
UNWANTED = "{}: Pediu para não receber convites."


def optout_link(smtp: ScriptedSmtp, email: str) -> str:
    """The path of the "Não quero receber convites" link in the newest invitation mail to
    ``email`` (the mail's ``PUBLIC_URL`` is not the test server's)."""

    def newest() -> str | None:
        for mail in reversed(smtp.received):
            body = mail.message.get_body(("plain",)) if email in mail.rcpt_tos else None
            found = OPTOUT_LINK.search(body.get_content()) if body is not None else None
            if found:
                return found.group(0)
        return None

    return until(newest, 15, f"an invitation mail with an opt-out link reaches {email}")


#: What a screen reader says of the page's structure, not of its words.
STRUCTURE = {"main", "status", "alert", "paragraph", "strong", "form"}


def your_data(email: str) -> list[str]:
    """How every state of the opt-out page ends: **Apagar meus dados** (``app.web.erasure``)."""
    return [
        "region, Seus dados",
        "heading, Seus dados, level 2",
        "Quer que o Convites esqueça",
        email,
        "? Mandamos um link de confirmação para esse e-mail.",
        "button, Apagar meus dados",
    ]


def words(page: Page) -> list[str]:
    """The main's reading order (``read_through``), its words and controls only."""
    reading = read_through(page, "main")
    return [p for p in reading if p not in STRUCTURE and not p.startswith("end of ")]


def test_the_opt_out_pages_read_in_order_record_only_on_confirming_and_offer_the_way_back(
    page: Page, new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    open_home(page)
    email = "dora.descadastro@exemplo.com.br"
    invite(page, email)
    link = optout_link(smtp_server, email)
    invitee = new_context(signed_in=False).new_page()

    # From the invitation's own page, below its two answers.
    invitee.goto(answer_link(smtp_server, email))
    invitee.get_by_role("link", name="Não quero receber convites").click()
    invitee.wait_for_url(re.compile(re.escape(link) + "$"))
    assert words(invitee) == [
        "heading, Não quer receber convites?, level 1",
        "Se confirmar, ninguém mais consegue convidar",
        email,
        "pelo Convites. Nada muda até você confirmar, e dá para voltar atrás neste navegador por "
        "24 horas.",
        "button, Não quero receber convites",
        *your_data(email),
    ]
    assert_no_axe_violations(invitee, "the opt-out question")
    page.wait_for_timeout(500)
    expect(row(page, email)).to_have_attribute("data-status", "enviado")  # nothing recorded

    invitee.get_by_role("button", name="Não quero receber convites").click()

    expect(invitee.get_by_role("heading", level=1)).to_have_text(
        "Pronto: você não vai mais receber convites"
    )
    assert words(invitee) == [
        "heading, Pronto: você não vai mais receber convites, level 1",
        "Ninguém consegue mais convidar",
        email,
        "pelo Convites.",
        "button, Quero voltar a receber convites",
        *your_data(email),
    ]
    assert_no_axe_violations(invitee, "the opt-out done")
    assert spoken(invitee) == []  # a page of its own: nothing live to announce
    expect(row(page, email)).to_have_attribute("data-status", "recusado")
    expect(row(page, email)).to_contain_text(UNWANTED.format(email))

    # The invitation's own page says so too, and leads to the way back, not out again.
    invitee.goto(answer_link(smtp_server, email))
    heard = words(invitee)
    # Nobody pressed Recusar: the page says why the invitation ended, as its sender reads it.
    assert heard[:2] == ["heading, O convite de Marta Souza foi encerrado, level 1", "Marta Souza"]
    assert re.fullmatch(
        r"\(pessoa\d+@exemplo\.com\) vê no convite o motivo: Pediu para não receber convites\.",
        heard[2],
    )
    assert heard[3:] == [
        "Ninguém consegue mais convidar",
        email,
        "pelo Convites: você pediu para não receber convites.",
        "Mudou de ideia? Dá para",
        "link, voltar a receber convites",
        "no navegador em que você pediu para sair, em até 24 horas.",
        *your_data(email),
    ]
    assert_no_axe_violations(invitee, "the invitation after the opt-out")
    invitee.get_by_role("link", name="voltar a receber convites").click()
    invitee.wait_for_url(re.compile(re.escape(link) + "$"))

    invitee.get_by_role("button", name="Quero voltar a receber convites").click()

    expect(invitee.locator("main .aviso")).to_have_text(
        f"Pronto: {email} volta a receber convites."
    )
    assert words(invitee) == [
        "Pronto:",
        email,
        "volta a receber convites.",
        "heading, Não quer receber convites?, level 1",
        "Se confirmar, ninguém mais consegue convidar",
        email,
        "pelo Convites. Nada muda até você confirmar, e dá para voltar atrás neste navegador por "
        "24 horas.",
        "button, Não quero receber convites",
        *your_data(email),
    ]
    assert_no_axe_violations(invitee, "the way back")
    page.wait_for_timeout(500)
    # The sender heard the suppression once; the way back is the invitee's, not news to them.
    assert spoken(page) == [
        *SUBMITTED,
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
        polite(UNWANTED.format(email)),
    ]

    # Apagar meus dados, from the opt-out page: the same request as the invitation's page's.
    invitee.get_by_role("button", name="Apagar meus dados").click()

    expect(invitee.get_by_role("heading", level=1)).to_have_text("Confira seu e-mail")
    back = invitee.get_by_role("link", name="Voltar para a página anterior")
    expect(back).to_have_attribute("href", link)
    assert_no_axe_violations(invitee, "the erasure request, asked on the opt-out page")
    assert spoken(invitee) == []
