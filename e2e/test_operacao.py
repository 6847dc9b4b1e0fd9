"""The operator page in Chromium against real web and worker processes, under the app's CSP:
its bulk retry, live panel, and the suppression list's lift."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, expect

from e2e.conftest import Stack
from e2e.spoken import read_through, spoken
from e2e.test_live_pages import assert_no_axe_violations
from e2e.test_optout_in_browser import optout_link, words
from tests.helpers import sync_api_headers
from tests.services import RedisServer, ScriptedSmtp, free_port
from tests.signing_in import sign_in_sync
from tests.waiting import until

pytestmark = pytest.mark.e2e

TOKEN = "token-de-operacao-bem-comprido"


@pytest.fixture
def ops_stack(tmp_path: Path, smtp: ScriptedSmtp) -> Iterator[Stack]:
    """Web and worker with ``OPS_TOKEN``, on a Redis of their own (so no other stack's worker
    takes their jobs)."""
    redis = RedisServer(tmp_path, free_port())
    redis.start()
    stack = Stack.migrated(tmp_path, redis.url, smtp.port, OPS_TOKEN=TOKEN, ALARM_CHECK_SECONDS=1)
    try:
        with stack.running():
            yield stack
    finally:
        redis.stop()


def wait_for_failures(http: httpx.Client, count: int) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    until(
        lambda: http.get("/operacao", headers=bearer).json()["por_status"]["falhou"] == count,
        15,
        f"{count} invites falhou",
    )


def post(http: httpx.Client, *emails: str) -> None:
    headers = sync_api_headers(http)
    for email in emails:
        assert http.post("/convites", json={"email": email}, headers=headers).status_code == 202


def test_an_operator_logs_in_and_sends_a_failure_group_again_watching_it_live(
    ops_stack: Stack, smtp: ScriptedSmtp, new_context: Callable[..., BrowserContext]
) -> None:
    sender = httpx.Client(base_url=ops_stack.url)
    sign_in_sync(sender, smtp, "remetente@exemplo.com")
    smtp.always("550 5.7.1 Blocked")
    post(sender, "ana@exemplo.com", "bia@exemplo.com")
    wait_for_failures(sender, 2)

    page = new_context(base_url=ops_stack.url, signed_in=False).new_page()
    csp: list[str] = []
    page.on("console", lambda m: csp.append(m.text) if "Security Policy" in m.text else None)
    page.goto("/operacao")
    page.get_by_label("Token de operação").fill(TOKEN)
    page.get_by_role("button", name="Entrar").click()

    button = page.get_by_role("button", name="Tentar de novo 2 convites com este motivo")
    expect(button).to_be_visible()
    assert Axe().run(page).violations_count == 0
    smtp.always("250 OK")
    button.click()

    expect(page.get_by_role("status")).to_have_text("2 convites voltaram para a fila.")
    # The result comes back on a new page, in a status region filled from the first byte, which
    # is not announced: read from the top, it is the first thing after the heading.
    assert spoken(page) == []
    assert read_through(page)[:7] == [
        "main",
        "heading, Operação, level 1",
        "status",
        "paragraph",
        "2 convites voltaram para a fila.",
        "end of paragraph",
        "end of status",
    ]
    painel = page.locator("#painel")
    expect(painel.locator("dt:text-is('enviado') + dd")).to_have_text("2")

    # A new failure elsewhere shows up on the open page over SSE, without a reload.
    page.evaluate("window.semRecarregar = true")
    smtp.always("554 5.7.1 Spam")
    post(sender, "cris@exemplo.com")
    sender.close()
    again = page.get_by_role("button", name="Tentar de novo 1 convite com este motivo")
    expect(again).to_be_visible(timeout=15000)
    assert page.evaluate("window.semRecarregar") is True
    assert csp == []


def test_an_operator_sees_the_suppression_and_lifts_it_after_saying_who_and_why(
    ops_stack: Stack, smtp: ScriptedSmtp, new_context: Callable[..., BrowserContext]
) -> None:
    sender = httpx.Client(base_url=ops_stack.url)
    sign_in_sync(sender, smtp, "remetente@exemplo.com")
    email = "eva.sair@exemplo.com"
    headers = sync_api_headers(sender)
    assert sender.post("/convites", json={"email": email}, headers=headers).status_code == 202
    sender.close()
    # A mail provider's one-click: a client of its own, no cookie, no token.
    with httpx.Client(base_url=ops_stack.url) as provider:
        answer = provider.post(optout_link(smtp, email), data={"List-Unsubscribe": "One-Click"})
        assert answer.status_code == 200

    page = new_context(base_url=ops_stack.url, signed_in=False).new_page()
    page.goto("/operacao")
    page.get_by_label("Token de operação").fill(TOKEN)
    page.get_by_role("button", name="Entrar").click()
    listed = page.get_by_role("row").filter(has_text=email)
    expect(listed).to_contain_text("Pediu para não receber (link do convite)")
    assert_no_axe_violations(page, "/operacao with the suppression list")

    listed.get_by_text("Retirar da lista").click()
    page.get_by_label("Quem está retirando").fill("Bia da operação")
    page.get_by_label("Por quê").fill("a pessoa pediu por telefone")
    page.get_by_role("button", name=f"Sim, retirar {email} da lista").click()

    expect(page.get_by_role("status").first).to_have_text(
        "Endereço retirado da lista de supressão: ele pode ser convidado de novo."
    )
    assert spoken(page) == []  # a new page: read from the top, right after the heading
    assert words(page)[:2] == [
        "heading, Operação, level 1",
        "Endereço retirado da lista de supressão: ele pode ser convidado de novo.",
    ]
    expect(page.get_by_text("Nenhum endereço na lista.")).to_be_visible()
    assert_no_axe_violations(page, "/operacao after lifting")
