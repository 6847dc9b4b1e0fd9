"""/conta/chaves in Chromium: create an API key (shown once, read first), see it listed, revoke
it after the confirmation page; axe-clean on every page, and no live region says anything
(every change here is a whole new page, read in order)."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from e2e.spoken import polite, read_through, spoken, wait_for_spoken

pytestmark = pytest.mark.e2e

WHEN = re.compile(r"^\d{2}/\d{2}/\d{4} \d{2}:\d{2}(:\d{2})?$")
INTRO = [
    "heading, Chaves de API, level 1",
    "paragraph",
    "Uma chave deixa outro sistema criar e acompanhar convites em seu nome pela API (",
    "link, descrição da API",
    "). Guarde-a como uma senha.",
    "end of paragraph",
]
NO_KEYS = [
    "region, Suas chaves",
    "heading, Suas chaves, level 2",
    "paragraph",
    "Você ainda não tem chaves.",
    "end of paragraph",
    "end of region, Suas chaves",
]
CREATE = [
    "region, Criar uma chave",
    "heading, Criar uma chave, level 2",
    "form",
    "Nome da chave",
    "textbox, Nome da chave, required",
    "button, Criar chave",
    "end of form",
    "end of region, Criar uma chave",
]
REVOKED = "Chave revogada. Os programas que a usavam não conseguem mais entrar com ela."


def test_a_key_is_created_shown_once_listed_and_revoked(page: Page) -> None:
    page.goto("/conta")
    page.get_by_role("link", name="Chaves de API").click()
    expect(page).to_have_url(re.compile(r"/conta/chaves$"))
    assert Axe().run(page).violations_count == 0
    assert read_through(page) == ["main", "status", "alert", *INTRO, *NO_KEYS, *CREATE]
    assert spoken(page) == []

    page.get_by_label("Nome da chave").fill("Sistema de RH")
    page.get_by_role("button", name="Criar chave").click()
    expect(page.locator("#chave")).to_have_text(re.compile(r"^cvk_"))
    key = page.locator("#chave").inner_text()
    assert Axe().run(page).violations_count == 0
    assert read_through(page, "#chave-nova") == [
        "region, Chave “Sistema de RH” criada",
        "heading, Chave “Sistema de RH” criada, level 2",
        "paragraph",
        "Copie agora: ela não será mostrada de novo.",
        "end of paragraph",
        "paragraph",
        "code",
        key,
        "end of code",
        "end of paragraph",
    ]
    listed = ["<quando>" if WHEN.match(p) else p for p in read_through(page, "#chaves")]
    assert listed[:3] == ["region, Suas chaves", "heading, Suas chaves, level 2", "list"]
    assert listed[3:21] == [
        "listitem, level 1, position 1, set size 1",
        "paragraph",
        "strong",
        "Sistema de RH",
        "end of strong",
        "end of paragraph",
        "paragraph",
        "Criada em",
        "time",
        "<quando>",
        "end of time",
        ".",
        "end of paragraph",
        "paragraph",
        "Nunca usada.",
        "end of paragraph",
        "paragraph",
        "link, Revogar a chave Sistema de RH",
    ]
    assert spoken(page) == []

    page.goto("/conta/chaves")  # shown once: the list never holds the key again
    expect(page.locator("#chave")).to_have_count(0)
    assert key not in page.content()

    page.get_by_role("link", name="Revogar a chave Sistema de RH").click()
    assert Axe().run(page).violations_count == 0
    assert read_through(page) == [
        "main",
        "status",
        "alert",
        "heading, Revogar a chave “Sistema de RH”?, level 1",
        "paragraph",
        "Os programas que usam esta chave deixam de conseguir entrar na hora. Isso não pode ser "
        "desfeito: para voltar a usar a API, crie uma chave nova.",
        "end of paragraph",
        "form",
        "button, Revogar chave",
        "end of form",
        "paragraph",
        "link, Voltar sem revogar",
        "end of paragraph",
    ]
    page.get_by_role("button", name="Revogar chave").click()
    expect(page).to_have_url(re.compile(r"/conta/chaves$"))  # ?revogada=1 said, then dropped
    assert Axe().run(page).violations_count == 0
    notice = ["paragraph", REVOKED, "end of paragraph"]
    said = ["status", REVOKED, "end of status"]  # what the press did, heard once
    wait_for_spoken(page, polite(REVOKED))
    assert read_through(page) == ["main", *said, "alert", *INTRO, *notice, *NO_KEYS, *CREATE]
    assert spoken(page) == [polite(REVOKED)]
    page.reload()  # the address lost its ?revogada=1: nothing is said or shown again
    page.wait_for_function("window.htmx !== undefined")
    expect(page.locator("[data-anuncio-ao-abrir]")).to_have_count(0)


def test_a_key_without_a_name_is_refused_with_the_field_saying_why(page: Page) -> None:
    page.goto("/conta/chaves")
    page.get_by_role("button", name="Criar chave").click()
    field = page.get_by_label("Nome da chave")
    expect(field).to_have_attribute("aria-invalid", "true")
    assert Axe().run(page).violations_count == 0
    assert "Dê um nome à chave, por exemplo o do sistema que vai usá-la." in read_through(page)
    expect(page.locator("#chave")).to_have_count(0)
