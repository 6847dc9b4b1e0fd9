"""The virtual screen reader itself: the vendored file is the one recorded, and on a page the
tests control it hears what a person hears where the mutation recorder only sees DOM changes.

Two announcements written in one task reach a screen reader as one, the last (the page is read
after the task); the recorder, a MutationObserver, sees both whenever a microtask separates them.
And a focus move is heard with the control's accessible name, which the recorder never sees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route

from e2e.conftest import RECORDER
from e2e.spoken import (
    VENDOR,
    assertive,
    listen,
    polite,
    read_through,
    spoken,
    start_listening,
    wait_for_spoken,
)

pytestmark = pytest.mark.e2e

URL = "http://pagina-de-teste.invalid/"
# Two regions as the app has them, two buttons, and a policy that allows no script at all: the
# reader and the recorder arrive as init scripts, which the page's CSP does not govern.
PAGE = """<!doctype html><html lang="pt-BR"><head><title>Teste</title></head><body><main>
<div id="anuncio" role="status" aria-atomic="true"></div>
<div id="alerta" role="alert"></div>
<p id="motivo">O servidor recusou a mensagem (550).</p>
<button id="com-endereco" aria-label="Tentar de novo o convite para ana@exemplo.com"
        aria-describedby="motivo">Tentar de novo</button>
<button id="sem-endereco" aria-describedby="motivo">Tentar de novo</button>
</main></body></html>"""

REASON = "O servidor recusou a mensagem (550)."
WITH_ADDRESS = f"button, Tentar de novo o convite para ana@exemplo.com, {REASON}"
WITHOUT_ADDRESS = f"button, Tentar de novo, {REASON}"

TWO_IN_ONE_TASK = """async () => {
  const region = document.getElementById("anuncio");
  region.textContent = "Recebemos, enviando…";
  await null;  // a microtask: the recorder's observer runs, the task goes on
  region.textContent = "Convite enviado.";
}"""


def test_the_vendored_reader_matches_its_checksum() -> None:
    lines = (VENDOR / "SHA256SUMS").read_text().splitlines()
    assert lines, "SHA256SUMS is empty"
    for line in lines:
        digest, name = line.split()
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    version = (VENDOR / "VERSION").read_text().strip()
    assert [line.split()[1] for line in lines] == [f"virtual-screen-reader-{version}.iife.js"]


def serve(route: Route) -> None:
    csp = "default-src 'none'; script-src 'none'"
    route.fulfill(body=PAGE, content_type="text/html", headers={"Content-Security-Policy": csp})


@pytest.fixture
def controlled(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context()
    context.add_init_script(RECORDER)
    listen(context)
    context.route(URL, serve)
    page = context.new_page()
    page.goto(URL)
    start_listening(page)
    yield page
    context.close()


def recorded(page: Page) -> list[list[str]]:
    return list(page.evaluate("window.__anuncios"))


def test_two_announcements_in_one_task_are_heard_as_the_last_though_recorded_as_two(
    controlled: Page,
) -> None:
    controlled.evaluate(TWO_IN_ONE_TASK)
    wait_for_spoken(controlled, polite("Convite enviado."))
    controlled.wait_for_timeout(300)  # anything else would be heard by now

    assert recorded(controlled) == [
        ["status", "Recebemos, enviando…"],
        ["status", "Convite enviado."],
    ]
    assert spoken(controlled) == [polite("Convite enviado.")]


def test_announcements_in_separate_moments_are_each_heard_and_an_emptied_region_says_nothing(
    controlled: Page,
) -> None:
    controlled.evaluate("document.getElementById('alerta').textContent = 'Falhou.'")
    wait_for_spoken(controlled, assertive("Falhou."))
    controlled.evaluate(
        "document.getElementById('alerta').textContent = '';"
        " document.getElementById('anuncio').textContent = 'Recebemos, enviando…'"
    )
    wait_for_spoken(controlled, polite("Recebemos, enviando…"))

    assert spoken(controlled) == [assertive("Falhou."), polite("Recebemos, enviando…")]


def test_a_focus_move_is_heard_with_the_name_the_recorder_never_sees(controlled: Page) -> None:
    controlled.focus("#com-endereco")
    controlled.focus("#sem-endereco")
    wait_for_spoken(controlled, WITHOUT_ADDRESS)

    assert recorded(controlled) == []
    assert spoken(controlled) == [WITH_ADDRESS, WITHOUT_ADDRESS]


def test_start_listening_brings_the_reader_to_a_page_of_a_context_without_it(
    chromium: Browser,
) -> None:
    context = chromium.new_context()
    context.route(URL, serve)
    page = context.new_page()
    page.goto(URL)

    start_listening(page)
    page.focus("#com-endereco")

    assert wait_for_spoken(page, WITH_ADDRESS) == [WITH_ADDRESS]
    context.close()


def test_read_through_gives_the_reading_order_without_moving_focus(controlled: Page) -> None:
    assert read_through(controlled) == [
        "main",
        "status",  # the live regions, empty
        "alert",
        "paragraph",
        REASON,
        "end of paragraph",
        WITH_ADDRESS,
        "Tentar de novo",  # its text, under the name given by aria-label
        f"end of {WITH_ADDRESS}",
        WITHOUT_ADDRESS,
    ]
    assert controlled.evaluate("document.activeElement === document.body")
    assert spoken(controlled) == []
