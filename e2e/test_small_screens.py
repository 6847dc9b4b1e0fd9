"""A 320 px phone (and a 390 px one): every page fits the screen with no sideways scrolling,
even with a long address; the review of a batch and the dev mailbox reflow their tables as one
block per row, and axe finds nothing on them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, Page, expect

from e2e.conftest import Stack
from e2e.spoken import spoken
from tests.services import AppProcess, free_port, wait_for_port

pytestmark = pytest.mark.e2e

WIDTHS = (320, 390)
LONG = "maria.fernanda.albuquerque.de.souza.e.silva"


def document_width(page: Page) -> int:
    width: int = page.evaluate("document.documentElement.scrollWidth")
    return width


def phone(new_context: Callable[..., BrowserContext], width: int, **options: object) -> Page:
    return new_context(viewport={"width": width, "height": 740}, **options).new_page()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_batch_review_fits_a_phone(
    new_context: Callable[..., BrowserContext], stack: Stack, width: int
) -> None:
    page = phone(new_context, width)
    page.goto("/lotes/novo")
    page.get_by_label("Endereços", exact=True).fill(
        f"Maria Fernanda Albuquerque <{LONG}@exemplo-de-dominio-comprido.com.br>\n"
        f"{LONG}-sem-arroba\n"
        f"{LONG}@exemplo-de-dominio-comprido.com.br"
    )
    page.get_by_role("button", name="Revisar").click()
    expect(page.get_by_role("heading", name="Revise os convites")).to_be_visible()

    assert document_width(page) <= width
    # Each row's result is on screen, not beyond its right edge.
    for cell in page.locator("table.revisao td[data-rotulo='Resultado']").all():
        box = cell.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
    assert Axe().run(page).violations_count == 0


def _mail(folder: Path, name: str, to: str, subject: str, text: str) -> None:
    message = EmailMessage()
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime(2026, 12, 4, 18, 30, tzinfo=UTC))
    message.set_content(text)
    return_path = b"Return-Path: <devolucoes+x@convites.localhost>\r\n"
    (folder / f"{name}.eml").write_bytes(return_path + message.as_bytes())


@pytest.fixture
def dev_web(stack: Stack, tmp_path: Path) -> Iterator[str]:
    """A web process in development with a dev mailbox holding an invitation and a sign-in
    mail, as the dev mailbox keeps them."""
    caixa = tmp_path / "caixa"
    caixa.mkdir()
    link = "http://127.0.0.1/c/" + "a" * 43
    _mail(
        caixa,
        "1-0000000a",
        f"{LONG}@exemplo-de-dominio-comprido.com.br",
        "Você recebeu um convite",
        f"Olá!\n\nPara aceitar ou recusar:\n{link}\n",
    )
    _mail(caixa, "2-0000000b", "ana@exemplo.com", "Seu link de acesso ao Convites",
          "Olá!\n\nhttp://127.0.0.1/entrar/" + "b" * 43 + "\n")  # fmt: skip
    port = free_port()
    env = {**stack.env, "APP_ENV": "development", "MAILBOX_DIR": str(caixa)}
    with AppProcess.web(env, tmp_path / "web-dev.log", port):
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_dev_mailbox_fits_a_phone_and_links_each_subject(
    new_context: Callable[..., BrowserContext], dev_web: str, width: int
) -> None:
    page = phone(new_context, width, signed_in=False, base_url=dev_web)
    page.goto("/caixa")

    assert document_width(page) <= width
    expect(page.get_by_role("link", name="Você recebeu um convite")).to_be_visible()
    expect(page.get_by_role("link", name="Seu link de acesso ao Convites")).to_be_visible()
    # Local time in Brazil, in pt-BR: 18:30 UTC is 15:30 in São Paulo.
    expect(page.locator("table")).to_contain_text("04/12/2026 15:30:00")
    # Only an invitation can come back as devolvido.
    expect(page.get_by_role("button", name="Simular devolução")).to_have_count(1)
    expect(page.get_by_role("button", name="Simular devolução")).to_have_accessible_name(
        f"Simular devolução do convite para {LONG}@exemplo-de-dominio-comprido.com.br"
    )
    assert Axe().run(page).violations_count == 0
    assert spoken(page) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_every_senders_page_fits_a_phone(
    new_context: Callable[..., BrowserContext], stack: Stack, width: int
) -> None:
    page = phone(new_context, width)
    page.goto("/")
    page.get_by_label("E-mail").fill(f"{LONG}@exemplo-de-dominio-comprido.com.br")
    page.get_by_role("button", name="Enviar convite").click()
    invite = page.locator("li.convite a[data-foco='link']").first
    expect(invite).to_be_visible()
    detail = invite.get_attribute("href")
    for path in (
        "/",
        "/lotes",
        "/lotes/novo",
        "/conta",
        "/conta/chaves",
        "/conta/webhooks",
        detail,
    ):
        page.goto(str(path))
        assert document_width(page) <= width, path
    signed_out = phone(new_context, width, signed_in=False)
    signed_out.goto("/entrar")
    assert document_width(signed_out) <= width
