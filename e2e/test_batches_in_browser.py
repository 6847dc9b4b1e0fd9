"""A 50-row batch in Chromium: review, send, follow; what a screen reader hears is bounded,
ordered and ends with one summary; axe finds nothing on the review and batch pages, nor on the
form with a spreadsheet refused at its field."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, Page, Route, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from e2e.conftest import BATCH_ANNOUNCE_SECONDS, Stack
from e2e.spoken import polite, spoken, wait_for_spoken
from e2e.test_live_pages import PAUSED, RECEIVED_PAUSED, RESUMED, SENT
from tests.answering import answer_link
from tests.services import ScriptedSmtp
from tests.waiting import until

pytestmark = pytest.mark.e2e

SIZE = 50
FAILING = 3
RECEIVED = f"Recebemos {SIZE} convites, enviando…"
FINAL = f"{SIZE - FAILING} enviados, {FAILING} falharam."
PROGRESS = re.compile(rf"^(\d+) de {SIZE} enviados$")
SMTP_SECONDS = 0.8  # each DATA: well under the SMTP timeout, slow enough to take a few periods
FAILURES = re.compile(r"^(\d+) falharam: veja a lista$|^1 falhou: veja a lista$")


def announcements(page: Page) -> list[tuple[str, str]]:
    """What the page's live regions said, as the virtual screen reader heard it (e2e/spoken.py):
    ("status" | "alert", text), in order; focus moves left out."""
    heard = []
    for phrase in spoken(page):
        for region, prefix in (("status", "polite: "), ("alert", "assertive: ")):
            if phrase.startswith(prefix):
                heard.append((region, phrase.removeprefix(prefix)))
    return heard


def test_a_50_row_batch_is_heard_as_a_few_ordered_summaries_and_axe_finds_nothing(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    context = new_context()
    home = context.new_page()
    home.goto("/")
    page = context.new_page()
    page.goto("/")
    page.get_by_role("link", name="Convidar várias pessoas").click()
    page.get_by_label("Endereços", exact=True).fill(
        "\n".join(f"lote{n}@exemplo.com" for n in range(SIZE))
    )
    page.get_by_role("button", name="Revisar").click()
    expect(page.get_by_role("heading", name="Revise os convites")).to_be_visible()
    assert Axe().run(page).violations_count == 0

    # A slow but working mail server: the batch takes several announce periods to drain.
    smtp_server.slow(SMTP_SECONDS)
    smtp_server.reply_next(*["550 5.1.1 Mailbox unavailable"] * FAILING)
    began = time.monotonic()
    page.get_by_role("button", name=f"Enviar {SIZE} convites").click()
    page.wait_for_url(re.compile(r"/lotes/[\w-]+\?novo=1$"))
    try:
        wait_for_spoken(page, polite(FINAL), timeout=60_000)
    except (AssertionError, PlaywrightTimeoutError):
        summary = page.locator("#lote-resumo").inner_text()
        raise AssertionError(f"never said {FINAL!r}: {announcements(page)}; {summary}") from None
    finally:
        smtp_server.slow(0)
    elapsed = time.monotonic() - began
    said = announcements(page)
    print(f"heard in {elapsed:.1f} s: {said}")
    assert Axe().run(page).violations_count == 0

    assert said[0] == ("status", RECEIVED)
    assert said[-1] == ("status", FINAL)
    assert [text for _, text in said].count(FINAL) == 1
    middle = said[1:-1]
    progress = [int(m.group(1)) for r, t in middle if r == "status" and (m := PROGRESS.match(t))]
    alerts = [t for r, t in middle if r == "alert"]
    assert len(progress) + len(alerts) == len(middle), said  # nothing else, nothing per row
    assert progress == sorted(progress)
    most = elapsed / BATCH_ANNOUNCE_SECONDS + 1
    assert len(progress) <= most and len(alerts) <= most, (elapsed, said)
    assert all(FAILURES.match(text) for text in alerts)
    expect(page.locator("#lote-resumo")).to_contain_text("Lote terminado")
    expect(page.locator("li.convite.estado-falhou")).to_have_count(FAILING)
    # The home page got every batch row live, and said nothing about any of them.
    expect(home.locator("li.convite.estado-enviado")).to_have_count(SIZE - FAILING, timeout=5000)
    assert announcements(home) == []

    page.reload()
    expect(page.locator("#lote-resumo")).to_contain_text("Lote terminado")
    page.wait_for_timeout(1500)  # time for a (wrong) replay to arrive
    assert spoken(page) == []  # a reload repeats nothing, not even a focus move
    assert page.evaluate("window.__violacoes") == []


def test_corrigir_a_lista_brings_back_the_list_and_the_mensagem(page: Page, stack: Stack) -> None:
    pasted = "Ana Souza <ana@exemplo.com>\nnao-e-email\nbia@exemplo.com"
    message = "Treino de sábado às 7h, no parque."
    page.goto("/lotes/novo")
    page.get_by_label("Endereços", exact=True).fill(pasted)
    page.get_by_label("Mensagem").fill(message)
    page.get_by_role("button", name="Revisar").click()
    expect(page.get_by_role("heading", name="Revise os convites")).to_be_visible()

    page.get_by_role("button", name="Corrigir a lista").click()

    expect(page.get_by_role("heading", name="Convidar várias pessoas")).to_be_visible()
    expect(page.get_by_label("Endereços", exact=True)).to_have_value(pasted)
    expect(page.get_by_label("Mensagem")).to_have_value(message)
    assert Axe().run(page).violations_count == 0


def test_an_answer_after_the_batch_ended_is_heard_without_the_summary_again_and_meus_lotes_finds_it(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    page = new_context().new_page()
    send_batch(page, "lote1@exemplo.com", "lote2@exemplo.com")
    wait_for_spoken(page, polite("2 enviados."), timeout=30_000)
    batch_url = page.url.split("?")[0]

    invitee = new_context(signed_in=False).new_page()
    invitee.goto(answer_link(smtp_server, "lote2@exemplo.com"))
    invitee.get_by_role("button", name="Recusar").click()

    wait_for_spoken(page, polite("lote2@exemplo.com recusou o convite."))
    # The batch's summary arrived with the new counts; its sentence ("2 enviados.") is old news.
    expect(page.locator("#lote-resumo .contador.estado-recusado")).to_be_visible()
    page.wait_for_timeout(1000)  # a repeated summary would be said here (400 ms after)
    assert spoken(page) == [
        polite("Recebemos 2 convites, enviando…"),
        polite("2 enviados."),
        polite("lote2@exemplo.com recusou o convite."),
    ]
    counters = page.locator("#lote-resumo .contador:visible")
    expect(counters).to_have_text(["Enviado1", "Recusado1"])

    # Found again: "/" links to "Meus lotes", which links to the batch. Nothing is said there.
    page.goto("/")
    page.get_by_role("link", name="Meus lotes").click()
    expect(page.get_by_role("heading", name="Meus lotes", level=1)).to_be_visible()
    assert page.locator("html").get_attribute("lang") == "pt-BR"
    assert Axe().run(page).violations_count == 0
    page.get_by_role("link", name=re.compile(r"^Lote de 2 convites")).click()
    expect(page).to_have_url(batch_url)
    assert spoken(page) == []


def test_a_batch_that_ended_before_its_page_came_is_heard_to_its_end(
    new_context: Callable[..., BrowserContext], stack: Stack
) -> None:
    """A small batch and an idle worker: every mail left before the batch's page loaded. The
    page's stream has nothing newer to say, so the page says the end itself."""
    page = new_context().new_page()

    def after_the_end(route: Route) -> None:
        """The send's answer (a redirect to the batch's page) reaches the browser only once
        the batch has ended."""
        if route.request.method != "POST":
            route.continue_()
            return
        sent = route.fetch(max_redirects=0)
        batch_url = sent.headers["location"].split("?")[0]
        until(
            lambda: 'data-final="sim"' in page.request.get(batch_url).text(),
            30,
            "the batch ends before its page is asked for",
        )
        route.fulfill(response=sent)

    page.route(re.compile(r"/lotes$"), after_the_end)
    send_batch(page, "cedo1@exemplo.com", "cedo2@exemplo.com")

    wait_for_spoken(page, polite("2 enviados."))
    assert spoken(page) == [polite("Recebemos 2 convites, enviando…"), polite("2 enviados.")]


def test_a_press_whose_answer_comes_after_the_stream_is_still_answered(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    """The stream brings the row's new state before the button's own answer lands: the answer,
    no longer news for the list, is still what the person hears about their press."""
    email = "corrida@exemplo.com"
    page = new_context().new_page()
    send_batch(page, "corrida.par@exemplo.com", email)
    wait_for_spoken(page, polite("2 enviados."), timeout=30_000)
    invitee = new_context(signed_in=False).new_page()
    invitee.goto(answer_link(smtp_server, email))
    invitee.get_by_role("button", name="Recusar").click()
    wait_for_spoken(page, polite(f"{email} recusou o convite."))
    row = page.locator("li.convite", has_text=email)

    def after_the_stream(route: Route) -> None:
        answer = route.fetch()
        until(
            lambda: row.get_attribute("data-status") != "recusado",
            15,
            "the stream brings the row's new state first",
        )
        route.fulfill(response=answer)

    page.route(re.compile(r"/reenviar$"), after_the_stream)
    row.get_by_role("button", name="Reenviar").click()

    answers = {polite(f"Recebemos, enviando… (convite para {email})"), polite(SENT.format(email))}
    until(lambda: answers & set(spoken(page)), 15, lambda: f"{spoken(page)}")
    assert len(answers & set(spoken(page))) == 1


def test_a_batch_rows_own_press_is_heard_and_a_decline_in_a_new_round_is_heard_again(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp_server: ScriptedSmtp
) -> None:
    """A batch row says nothing but its answers and the person's own press on it, followed to
    what became of it (even when the batch's end says the same as before); the same answer in
    a new round (Reenviar here, or through the API) is news."""
    # Addresses of this test's own: the other batches' bounces and the per-address day limit.
    email, beside = "de.novo@exemplo.com", "ao.lado@exemplo.com"
    declined = polite(f"{email} recusou o convite.")
    context = new_context()
    page = context.new_page()
    send_batch(page, beside, email)
    wait_for_spoken(page, polite("2 enviados."), timeout=30_000)
    invitee = new_context(signed_in=False).new_page()
    row = page.locator("li.convite", has_text=email)

    def decline(count: int) -> None:
        """The invitee declines the newest mail's invitation; the page hears it ``count`` times."""
        until(lambda: mails_to(smtp_server, email) == count, 15, "the round's mail arrives")
        # The mail reaches the server a moment before its row is enviado; until then its
        # link says the invitation is still being sent (409) and offers no answer.
        expect(row).to_have_attribute("data-status", "enviado", timeout=15_000)
        invitee.goto(answer_link(smtp_server, email))
        invitee.get_by_role("button", name="Recusar").click()
        until(lambda: spoken(page).count(declined) == count, 15, lambda: f"{spoken(page)}")

    decline(1)
    row.get_by_role("button", name="Reenviar").click()
    # What the press did, then what became of it: the row is followed to its "enviado" (the
    # stream may bring the mail's departure before the press's answer: then only that is said).
    received = polite(f"Recebemos, enviando… (convite para {email})")
    sent = polite(SENT.format(email))
    until(lambda: sent in spoken(page), 15, lambda: f"{spoken(page)}")
    answered = [received, sent] if received in spoken(page) else [sent]
    decline(2)
    # Sent again from elsewhere: the page's row changes silently, and its decline is news again.
    key = api_key(context.new_page())
    public_id = row.get_attribute("data-convite")
    resent = page.request.post(
        f"/api/v1/convites/{public_id}/reenviar", headers={"Authorization": f"Bearer {key}"}
    )
    assert resent.status == 202, resent.text()
    decline(3)
    # The other row (an address's day allows three invitations), pressed while sending is
    # paused: it says what is true, that the row waits.
    invitee.goto(answer_link(smtp_server, beside))
    invitee.get_by_role("button", name="Recusar").click()
    wait_for_spoken(page, polite(f"{beside} recusou o convite."))
    stack.stop_worker()
    wait_for_spoken(page, polite(PAUSED))
    page.locator("li.convite", has_text=beside).get_by_role("button", name="Reenviar").click()
    wait_for_spoken(page, polite(RECEIVED_PAUSED.format(beside)))
    # The batch's counters change ("1 de 2 enviados") without a word: its end was said.
    expect(page.locator("#lote-resumo")).to_contain_text("1 de 2 enviados")
    # Its next end says "2 enviados." again (not news), but the pressed row's own is heard.
    stack.start_worker()
    wait_for_spoken(page, polite(SENT.format(beside)))
    expect(page.locator("#lote-resumo")).to_contain_text("2 enviados")

    assert spoken(page) == [
        polite("Recebemos 2 convites, enviando…"),
        polite("2 enviados."),
        declined,
        f"button, Reenviar o convite para {email}",
        f"link, {email}",  # focus on the row, then what the press did
        *answered,
        declined,
        declined,
        polite(f"{beside} recusou o convite."),
        polite(PAUSED),
        f"button, Reenviar o convite para {beside}",
        f"link, {beside}",
        polite(RECEIVED_PAUSED.format(beside)),
        polite(RESUMED),
        polite(SENT.format(beside)),
    ]


def send_batch(page: Page, *emails: str) -> None:
    """Paste ``emails`` into a new batch, review it and send it: the page is the batch's own."""
    page.goto("/lotes/novo")
    page.get_by_label("Endereços", exact=True).fill("\n".join(emails))
    page.get_by_role("button", name="Revisar").click()
    page.get_by_role("button", name=f"Enviar {len(emails)} convites").click()
    page.wait_for_url(re.compile(r"/lotes/[\w-]+\?novo=1$"))


def mails_to(smtp: ScriptedSmtp, email: str) -> int:
    return sum(email in mail.rcpt_tos for mail in smtp.received)


def api_key(page: Page) -> str:
    page.goto("/conta/chaves")
    page.get_by_label("Nome da chave").fill("Outro sistema")
    page.get_by_role("button", name="Criar chave").click()
    expect(page.locator("#chave")).to_have_text(re.compile(r"^cvk_"))
    return page.locator("#chave").inner_text()


def test_a_spreadsheet_without_an_email_column_is_said_at_the_planilha_field(
    page: Page, stack: Stack
) -> None:
    page.goto("/lotes/novo")
    page.get_by_label("Planilha").set_input_files(
        {"name": "lista.csv", "mimeType": "text/csv", "buffer": b"nome;telefone\nAna;1\n"}
    )
    page.get_by_role("button", name="Revisar").click()

    problem = page.get_by_role("alert", name="Há um problema")
    expect(problem).to_be_focused()
    expect(problem.get_by_role("link")).to_have_attribute("href", "#planilha")
    field = page.get_by_label("Planilha")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile(r"coluna chamada “email”"))
    expect(page.get_by_label("Endereços", exact=True)).not_to_have_attribute("aria-invalid", "true")
    assert spoken(page) == ["alert, Há um problema"]  # the summary takes focus, as elsewhere
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()
