"""What the person sees and hears, in Chromium, against real web, worker, Redis and SMTP.

What is heard is asserted as a virtual screen reader's phrase log (``e2e/spoken.py``): every
focus move and every live-region announcement, in order. A test waits for each announcement
before its next action, as a person listening would (the page spaces its sentences 400 ms apart,
faster than a robot but not than a person)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, Page, expect
from redis.asyncio import Redis

from app.config import Settings
from app.invites import transitions
from app.invites.transitions import reminders
from app.sending.sweep import LEASE_EXPIRED_REASON
from app.storage.database import Database
from e2e.conftest import Stack
from e2e.spoken import assertive, polite, spoken, wait_for_spoken
from tests.helpers import announce, invite_row
from tests.services import AppProcess, ScriptedSmtp, free_port, wait_for_port

pytestmark = pytest.mark.e2e

RECEIVED = "Recebemos, enviando… (convite para {})"
SENT = "Convite para {} enviado."
PAUSED = (
    "O envio está pausado no momento. Nada do que você pediu se perde: tudo sai assim que ele "
    "voltar."
)
REFUSED_REASON = re.compile(r"550")
RECEIVED_PAUSED = (
    "Recebemos o convite para {}. O envio está pausado; ele sai assim que o envio voltar."
)
RESUMED = "O envio voltou."
UNCERTAIN_WHY = "Ele pode ter saído. Se reenviar, a pessoa pode receber duas vezes."
UNCERTAIN = "Não conseguimos confirmar o envio do convite para {}. " + UNCERTAIN_WHY
FAILED = "Não foi possível enviar o convite para {}. {}"
RETRYING = "Recebemos, enviando… A tentativa 1 para {} falhou; vamos tentar de novo."
EMAIL_REQUIRED = "Informe o e-mail de quem você quer convidar."

# What focus moves read (role, accessible name, description, states).
EMAIL_FIELD = "textbox, E-mail, required"
EMAIL_FIELD_INVALID = f"textbox, E-mail, {EMAIL_REQUIRED}, invalid, required"
SEND_BUTTON = "button, Enviar convite"
MESSAGE_FIELD = (
    "textbox, Mensagem (opcional), Aparece no e-mail e na página do convite. Até 500 caracteres."
)
WHEN_FIELD = "Enviar em (opcional), Deixe em branco para enviar agora. Horário de Brasília."
OCCASION_FIELDS = [
    "textbox, Título da ocasião, Para que é o convite: aparece no assunto do e-mail e na página do "
    "convite.",
    "Data e hora da ocasião",
    "textbox, Local da ocasião",
]
#: The filter by state above "Meus convites", as each link is read (the first is the page's).
FILTER_LINKS = [
    "link, Todos, current page",
    "link, Aceitos",
    "link, Agendados",
    "link, Enviando",
    "link, Aguardando resposta",
    "link, Precisam de atenção",
    "link, Recusados, expirados ou cancelados",
]
#: Filling E-mail and pressing Enviar convite (``submit``): the clean form takes focus back.
SUBMITTED = [EMAIL_FIELD, SEND_BUTTON, EMAIL_FIELD]


def announcements(page: Page) -> list[tuple[str, str]]:
    """The mutation recorder's view (``recorder.js``): each text a live region was given."""
    return [tuple(item) for item in page.evaluate("window.__anuncios")]


def wait_for_heard(page: Page, phrase: str, timeout: float = 10_000) -> list[str]:
    """``wait_for_spoken``, and on a timeout the rows too (what the page shows)."""
    try:
        return wait_for_spoken(page, phrase, timeout)
    except AssertionError as error:
        rows = page.locator("li.convite").evaluate_all("rows => rows.map(r => r.outerHTML)")
        raise AssertionError(f"{error}; rows: {rows}") from None


def assert_page_was_honest(page: Page) -> None:
    """What the screen reader cannot see: live regions empty at load and never replaced; and
    no CSP violation."""
    assert page.evaluate("window.__regioesNoInicio") == {"anuncio": "", "alerta": ""}
    intact = page.evaluate(
        "['anuncio', 'alerta'].every(id => window.__regioes[id] === document.getElementById(id))"
    )
    assert intact, "a live region was replaced"
    assert page.evaluate("window.__violacoes") == []


def submit(page: Page, email: str) -> None:
    page.get_by_label("E-mail").fill(email)
    page.get_by_role("button", name="Enviar convite").click()


def row(page: Page, email: str) -> object:
    return page.locator("li.convite", has_text=email)


def open_home(page: Page) -> Page:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/")
    page.wait_for_function("window.htmx !== undefined")
    return page


def test_submitting_says_received_then_sent_and_the_row_follows_without_reload(
    page: Page, stack: Stack
) -> None:
    open_home(page)
    email = "ana@exemplo.com"

    page.get_by_label("E-mail").fill(email)
    page.get_by_label("E-mail").press("Enter")

    wait_for_heard(page, polite(SENT.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "enviado")
    expect(page.get_by_label("E-mail")).to_be_focused()
    expect(page.get_by_label("E-mail")).to_have_value("")
    # Focus stays in E-mail (the clean form's field reads the same): nothing but the two steps.
    assert spoken(page) == [
        EMAIL_FIELD,
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
    ]
    assert_page_was_honest(page)


#: After every change of the page: a row a worker has taken while the notice still says paused.
WATCH_FOR_CONTRADICTIONS = """() => {
  window.__contradicoes = [];
  new MutationObserver(() => {
    const paused = document.getElementById("aviso-envio").dataset.pausado === "sim";
    const taken = document.querySelectorAll(
      'li.convite[data-status="enviando"], li.convite[data-status="enviado"]');
    if (paused && taken.length) window.__contradicoes.push(taken[0].dataset.status);
  }).observe(document.body, {subtree: true, childList: true, attributes: true});
}"""


def test_a_paused_invite_says_paused_in_its_badge_and_the_summary_until_sending_comes_back(
    page: Page, stack: Stack
) -> None:
    open_home(page)
    email = "bia@exemplo.com"
    stack.stop_worker()
    expect(page.locator("#aviso-envio")).to_have_text(PAUSED)
    wait_for_heard(page, polite(PAUSED))

    submit(page, email)
    wait_for_heard(page, polite(RECEIVED_PAUSED.format(email)))
    # What is shown, not only what is in the markup: the badge and the summary say "Pausado".
    expect(row(page, email).locator(".selo:visible")).to_have_text("Pausado")
    expect(page.locator("#resumo-convites li:visible")).to_contain_text(["1 pausado"])
    places = ("#resumo-convites", "#lista-convites")
    shown = " ".join(page.locator(where).inner_text().lower() for where in places)
    assert not re.search(r"\benviad[oa]\b|\benviando\b", shown), shown

    page.evaluate(WATCH_FOR_CONTRADICTIONS)
    stack.start_worker()
    wait_for_heard(page, polite(SENT.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "enviado")
    expect(page.locator("#aviso-envio")).to_be_hidden()
    assert page.evaluate("window.__contradicoes") == []
    # The notice went away before the row said "enviado" (the same stream, the notice first),
    # and sending coming back is heard once.
    assert spoken(page) == [
        polite(PAUSED),
        *SUBMITTED,
        polite(RECEIVED_PAUSED.format(email)),
        polite(RESUMED),
        polite(SENT.format(email)),
    ]
    assert_page_was_honest(page)


def test_a_refused_invite_is_announced_and_tentar_de_novo_sends_it(
    page: Page, stack: Stack, smtp: ScriptedSmtp
) -> None:
    open_home(page)
    email = "carla@exemplo.com"
    smtp.always("550 5.1.1 Mailbox unavailable")

    submit(page, email)
    retry = page.get_by_role("button", name=f"Tentar de novo o convite para {email}")
    expect(retry).to_be_visible()
    reason = page.locator(f"#{retry.get_attribute('aria-describedby')}")
    expect(reason).to_contain_text("550")
    why = reason.inner_text()
    wait_for_heard(page, assertive(FAILED.format(email, why)))

    smtp.always("250 2.0.0 OK")
    retry.click()
    wait_for_heard(page, polite(SENT.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "enviado")
    # The pressed button is gone; focus stayed in the row instead of falling to the page.
    expect(row(page, email).get_by_role("link", name=email)).to_be_focused()
    assert spoken(page) == [
        *SUBMITTED,
        polite(RECEIVED.format(email)),
        assertive(FAILED.format(email, why)),
        f"button, Tentar de novo o convite para {email}, {why}",
        f"link, {email}",
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
    ]
    assert_page_was_honest(page)


def test_a_transient_refusal_is_said_with_the_retry_then_sent(
    page: Page, stack: Stack, smtp: ScriptedSmtp
) -> None:
    open_home(page)
    email = "caio@exemplo.com"
    smtp.reply_next("451 4.7.1 Try again later")

    submit(page, email)

    wait_for_heard(page, polite(SENT.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "enviado")
    assert len(smtp.received) == 1
    assert spoken(page) == [
        *SUBMITTED,
        polite(RECEIVED.format(email)),
        polite(RETRYING.format(email)),
        polite(SENT.format(email)),
    ]
    assert_page_was_honest(page)


def heard_in_any(tabs: list[Page], phrase: str, timeout: float = 10_000) -> None:
    """Wait until one of ``tabs`` heard ``phrase``."""
    deadline = time.monotonic() + timeout / 1000
    while not any(phrase in spoken(tab) for tab in tabs):
        if time.monotonic() > deadline:
            raise AssertionError(f"no tab heard {phrase!r}: {[spoken(tab) for tab in tabs]}")
        tabs[0].wait_for_timeout(50)


def test_coming_back_and_a_second_tab_show_the_truth_and_repeat_nothing(
    new_context: Callable[..., BrowserContext], stack: Stack, smtp: ScriptedSmtp
) -> None:
    context = new_context()
    first = open_home(context.new_page())
    submit(first, "davi@exemplo.com")
    wait_for_heard(first, polite(SENT.format("davi@exemplo.com")))

    first.goto("/convites")
    first.goto("/")
    second = open_home(context.new_page())
    for tab in (first, second):
        expect(row(tab, "davi@exemplo.com")).to_have_attribute("data-status", "enviado")
    first.wait_for_timeout(1000)  # time for a (wrong) replay to arrive
    assert spoken(first) == [] and spoken(second) == []  # nothing old said again

    smtp.always("550 5.1.1 Mailbox unavailable")
    submit(first, "eva@exemplo.com")
    for tab in (first, second):
        expect(row(tab, "eva@exemplo.com")).to_have_attribute("data-status", "falhou")
    why = row(first, "eva@exemplo.com").locator(".convite-detalhe").inner_text()
    failure = assertive(FAILED.format("eva@exemplo.com", why))
    heard_in_any([first, second], failure)
    first.wait_for_timeout(500)  # time for the other tab to (wrongly) say it too
    # Both tabs are in front: the failure is said once, by one of them; the person's own
    # "Recebemos" only where they pressed the button.
    assert [p for p in spoken(first) if p != failure] == [
        *SUBMITTED,
        polite(RECEIVED.format("eva@exemplo.com")),
    ]
    assert [p for p in spoken(second) if p != failure] == []
    assert (spoken(first) + spoken(second)).count(failure) == 1
    second.reload()
    expect(row(second, "eva@exemplo.com")).to_have_attribute("data-status", "falhou")
    second.wait_for_timeout(1500)  # time for a (wrong) replay to arrive

    # The second tab was reloaded after the failure: nothing old is said again.
    assert spoken(second) == []
    assert_page_was_honest(first)
    assert_page_was_honest(second)


def test_a_web_restart_mid_flow_loses_no_state_and_repeats_no_announcement(
    page: Page, stack: Stack
) -> None:
    email = "fabio@exemplo.com"
    stack.stop_worker()
    open_home(page)
    expect(page.locator("#aviso-envio")).to_be_visible()
    submit(page, email)
    wait_for_heard(page, polite(RECEIVED_PAUSED.format(email)))

    stack.stop_web()
    expect(page.locator("#conexao")).to_have_text("Reconectando…")
    stack.start_worker()  # sends while no web process is there to tell the page
    stack.start_web()

    wait_for_heard(page, polite(SENT.format(email)), timeout=15_000)
    expect(row(page, email)).to_have_attribute("data-status", "enviado")
    expect(page.locator("#conexao")).to_be_hidden()
    page.wait_for_timeout(1500)  # a duplicate replay would land here
    # The page opened paused (not said: it was so from the first byte); "Reconectando…" is
    # shown, not said; the stream back says sending resumed before the row it sent.
    assert spoken(page) == [
        *SUBMITTED,
        polite(RECEIVED_PAUSED.format(email)),
        polite(RESUMED),
        polite(SENT.format(email)),
    ]
    assert_page_was_honest(page)


def test_without_javascript_sending_and_checking_status_work(
    new_context: Callable[..., BrowserContext], stack: Stack
) -> None:
    page = new_context(java_script_enabled=False).new_page()
    page.goto("/")
    email = "gil@exemplo.com"

    submit(page, email)

    expect(page).to_have_url(re.compile(r"/convites/[A-Za-z0-9_-]+$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Convite para {email}")
    assert page.locator('meta[http-equiv="refresh"]').count() == 0
    for _ in range(20):
        if SENT.format(email) in page.locator("main").inner_text():
            break
        page.wait_for_timeout(250)
        page.get_by_role("link", name="Atualizar").click()
    expect(row(page, email)).to_have_attribute("data-status", "enviado")
    page.get_by_role("link", name="Voltar para Meus convites").click()
    expect(row(page, email)).to_have_attribute("data-status", "enviado")

    page.get_by_role("button", name="Enviar convite").click()
    expect(page.locator("#email-erro")).to_be_visible()
    expect(page.get_by_label("E-mail")).to_have_attribute("aria-invalid", "true")


def focused(page: Page) -> str:
    return str(
        page.evaluate(
            "(() => { const el = document.activeElement;"
            " return el ? el.tagName + '|' + (el.id || el.textContent.trim()) : ''; })()"
        )
    )


def test_keyboard_alone_reaches_every_action_with_visible_focus_and_no_trap(
    page: Page, stack: Stack, smtp: ScriptedSmtp
) -> None:
    open_home(page)
    page.keyboard.press("Tab")
    assert focused(page) == "A|Pular para o conteúdo"
    page.keyboard.press("Tab")  # the brand link
    page.keyboard.press("Tab")
    assert focused(page) == "A|Marta Souza"  # the account: who is signed in
    page.keyboard.press("Tab")
    assert focused(page) == "BUTTON|Sair"
    page.keyboard.press("Tab")
    assert focused(page) == "INPUT|email"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"

    page.keyboard.press("Enter")  # empty: the error is announced and focus stays on E-mail
    expect(page.locator("#email-erro")).to_be_visible()
    assert focused(page) == "INPUT|email"
    # The invalid field is read with its error first, then the alert says it.
    wait_for_heard(page, assertive(EMAIL_REQUIRED), timeout=5_000)

    smtp.always("550 5.1.1 Mailbox unavailable")
    page.keyboard.type("hugo@exemplo.com")
    page.keyboard.press("Enter")
    expect(row(page, "hugo@exemplo.com")).to_have_attribute("data-status", "falhou")
    why = row(page, "hugo@exemplo.com").locator(".convite-detalhe").inner_text()
    wait_for_heard(page, assertive(FAILED.format("hugo@exemplo.com", why)))
    # The clean form comes back out of band and takes focus once htmx settles it; the old
    # input may still hold focus for a moment, so wait for the new one.
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.id === 'email'"
        " && document.activeElement.closest('form[data-estado=\"limpo\"]')",
        timeout=5_000,
    )
    assert focused(page) == "INPUT|email"

    smtp.always("250 2.0.0 OK")
    seen: list[str] = []
    for _ in range(40):
        page.keyboard.press("Tab")
        # Chromium stops on each part of a date-and-time field (day, month, …): one control.
        if not seen or focused(page) != seen[-1]:
            seen.append(focused(page))
        if seen[-1] == "BUTTON|Tentar de novo":
            break
    assert seen[:7] == [
        "INPUT|nome",
        "TEXTAREA|mensagem",
        "INPUT|ocasiao",
        "INPUT|ocasiao_em",
        "INPUT|ocasiao_local",
        "INPUT|enviar_em",
        "BUTTON|Enviar convite",
    ]
    assert "A|Aceitos" in seen  # the filter by state, then the rows
    assert seen.index("A|Aceitos") < seen.index("A|hugo@exemplo.com")
    assert seen[-1] == "BUTTON|Tentar de novo"
    page.keyboard.press("Enter")
    expect(row(page, "hugo@exemplo.com")).to_have_attribute("data-status", "enviado")
    assert focused(page) == "A|hugo@exemplo.com"
    wait_for_heard(page, polite(SENT.format("hugo@exemplo.com")))
    assert spoken(page) == [
        "link, Pular para o conteúdo",
        "link, Convites",
        "link, Marta Souza",
        "button, Sair",
        EMAIL_FIELD,
        EMAIL_FIELD_INVALID,
        assertive(EMAIL_REQUIRED),
        EMAIL_FIELD,  # the clean form after the 202: the field no longer invalid
        polite(RECEIVED.format("hugo@exemplo.com")),
        assertive(FAILED.format("hugo@exemplo.com", why)),
        "textbox, Nome (opcional)",
        MESSAGE_FIELD,
        *OCCASION_FIELDS,
        WHEN_FIELD,
        SEND_BUTTON,
        *FILTER_LINKS,
        "link, hugo@exemplo.com",
        f"button, Tentar de novo o convite para hugo@exemplo.com, {why}",
        "link, hugo@exemplo.com",
        polite(RECEIVED.format("hugo@exemplo.com")),
        polite(SENT.format("hugo@exemplo.com")),
    ]

    # Nothing traps focus: tabbing on leaves the last control and comes round to the top.
    top = ("BODY|", "", "A|Pular para o conteúdo", "A|Convites", "A|Marta Souza", "BUTTON|Sair")
    for _ in range(10):
        page.keyboard.press("Tab")
        if focused(page) in top:
            break
    assert focused(page) in top


def assert_no_axe_violations(page: Page, state: str) -> None:
    results = Axe().run(page)
    assert results.violations_count == 0, f"{state}:\n{results.generate_report()}"


def test_axe_finds_no_violations_empty_pending_failed_invalid_and_listed(
    page: Page, stack: Stack, smtp: ScriptedSmtp
) -> None:
    open_home(page)
    assert_no_axe_violations(page, "empty page")

    page.get_by_role("button", name="Enviar convite").click()
    expect(page.locator("#email-erro")).to_be_visible()
    assert_no_axe_violations(page, "validation error")

    smtp.always("550 5.1.1 Mailbox unavailable")
    submit(page, "ines@exemplo.com")
    expect(row(page, "ines@exemplo.com")).to_have_attribute("data-status", "falhou")
    assert_no_axe_violations(page, "failed row")

    stack.stop_worker()
    submit(page, "joao@exemplo.com")
    expect(row(page, "joao@exemplo.com")).to_have_attribute("data-status", "pendente")
    expect(page.locator("#aviso-envio")).to_be_visible()
    assert_no_axe_violations(page, "pending row, sending paused")

    # "Meus convites" on its own page, and a page of older ones (page-has-heading-one).
    for path in ("/convites?estado=todos", "/convites?antes=999999999&estado=todos"):
        page.goto(path)
        expect(row(page, "ines@exemplo.com")).to_be_visible()
        assert_no_axe_violations(page, path)


def test_a_browser_on_web_a_sees_an_invite_posted_through_web_b_arrive_and_be_sent(
    new_context: Callable[..., BrowserContext], stack: Stack
) -> None:
    """Scale-out in a real browser: two uvicorn processes, one sender, one cookie.

    Cookies ignore the port, so both tabs are the same sender. Web B (the stack's) accepts the
    invite and the worker sends it; web A learns of both only through Redis pub/sub. Web A's
    periodic check for a lost wake-up is set to a minute, so a row that arrives within seconds
    came by pub/sub. The two tabs are different origins here (ports): they do not share
    localStorage or Web Locks, so each may say the change once; behind one proxy they agree.
    """
    port_a = free_port()
    env_a = {**stack.env, "WORKER_HEARTBEAT_SECONDS": "60"}
    with AppProcess.web(env_a, stack.folder / "web-a.log", port_a):
        wait_for_port(port_a)
        context = new_context()
        on_a = context.new_page()
        on_a.goto(f"http://127.0.0.1:{port_a}/")
        on_a.wait_for_function("window.htmx !== undefined")
        # A's stream is open (and past its first read) before anything is posted: what reaches
        # it afterwards can only come by a wake-up.
        on_a.wait_for_function(
            "() => { const d = document.querySelector('[sse-connect]')['htmx-internal-data'];"
            " return !!(d && d.sseEventSource && d.sseEventSource.readyState === 1); }"
        )
        on_a.wait_for_timeout(500)
        on_a.evaluate("window.__mesmaPagina = true")
        on_b = open_home(context.new_page())
        email = "zeca@exemplo.com"

        submit(on_b, email)

        wait_for_heard(on_b, polite(SENT.format(email)))
        expect(row(on_a, email)).to_have_attribute("data-status", "enviado", timeout=5_000)
        expect(row(on_a, email)).to_have_count(1)
        assert on_a.evaluate("window.__mesmaPagina === true"), "web A's page was reloaded"
        wait_for_heard(on_a, polite(SENT.format(email)))
        on_a.wait_for_timeout(1000)  # a repeated event would land here
        assert spoken(on_b) == [
            *SUBMITTED,
            polite(RECEIVED.format(email)),
            polite(SENT.format(email)),
        ]
        # Web A may get the row first as pendente or already as enviado; each said once.
        assert spoken(on_a) in (
            [polite(RECEIVED.format(email)), polite(SENT.format(email))],
            [polite(SENT.format(email))],
        )
        assert_page_was_honest(on_a)
        assert_page_was_honest(on_b)


async def _lose_the_worker_mid_send(settings: Settings, public_id: str) -> None:
    """What a worker that died during DATA leaves once its lease is over: an ``incerto`` row,
    announced as the reconciliation announces it."""
    db = Database(settings.database_url)
    redis = Redis.from_url(settings.redis_url)
    try:
        claimed = await transitions.claim_with_link(db, public_id, 1, lease_seconds=60)
        assert claimed is not None
        uncertain = await transitions.mark_uncertain(
            db, claimed.change.invite, LEASE_EXPIRED_REASON
        )
        await announce(redis, [claimed.change, uncertain])
    finally:
        await redis.aclose()
        await db.dispose()


def in_own_loop(work: Callable[[], object]) -> None:
    """Run async setup off the main thread, whose event loop the sync Playwright API holds."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(work())  # type: ignore[arg-type]
        except BaseException as exc:  # reported in the test's own thread
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not failures, failures


def test_an_uncertain_invite_is_never_sent_again_until_the_person_confirms(
    page: Page, stack: Stack, smtp: ScriptedSmtp
) -> None:
    open_home(page)
    email = "ines@exemplo.com"
    stack.stop_worker()
    wait_for_heard(page, polite(PAUSED))  # the page was open: the stopped worker is said
    submit(page, email)
    wait_for_heard(page, polite(RECEIVED_PAUSED.format(email)))
    public_id = row(page, email).get_attribute("data-convite")
    assert public_id

    in_own_loop(lambda: _lose_the_worker_mid_send(stack.settings, public_id))

    wait_for_heard(page, assertive(UNCERTAIN.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "incerto")
    stack.start_worker()  # its queued job for attempt 1 finds nothing to claim
    wait_for_heard(page, polite(RESUMED))
    confirm = page.get_by_role("button", name=f"Sim, reenviar para {email}")
    expect(confirm).to_be_hidden()
    page.wait_for_timeout(1500)
    assert smtp.received == [], "an uncertain invite was sent again without the person"
    expect(row(page, email)).to_have_attribute("data-status", "incerto")

    row(page, email).locator("summary", has_text="Reenviar").click()  # opens the confirmation
    expect(confirm).to_be_visible()
    page.wait_for_timeout(500)
    assert smtp.received == []
    confirm.click()

    wait_for_heard(page, polite(SENT.format(email)))
    expect(row(page, email)).to_have_attribute("data-status", "enviado")
    assert [r for m in smtp.received for r in m.rcpt_tos] == [email]
    assert spoken(page) == [
        polite(PAUSED),
        *SUBMITTED,
        polite(RECEIVED_PAUSED.format(email)),
        assertive(UNCERTAIN.format(email)),
        polite(RESUMED),
        # The disclosure, read with the reason (the library gives <summary> no role).
        f"Reenviar o convite para {email}, {UNCERTAIN_WHY}",
        f"button, Sim, reenviar para {email}",
        f"link, {email}",  # the confirmation is gone with the row: focus stays in the row
        polite(RECEIVED.format(email)),
        polite(SENT.format(email)),
    ]
    assert_page_was_honest(page)


ACCEPTED = "{} aceitou o convite."


async def _remind_then_answer(settings: Settings, public_id: str) -> reminders.Reminder:
    """A worker takes the invite's reminder, and the invitee accepts before it is handed over."""
    db = Database(settings.database_url)
    redis = Redis.from_url(settings.redis_url)
    try:
        invite = await invite_row(db, public_id)
        assert await reminders.request(db, invite.sender_id, public_id, min_gap_seconds=0)
        [claimed] = await reminders.claim_due(
            db, after_seconds=0, ttl_seconds=settings.invite_ttl_seconds, key=settings.secret_key
        )
        assert claimed.token is not None
        accepted = await transitions.accept(db, claimed.token, settings.invite_ttl_seconds)
        await announce(redis, [accepted])
        return claimed
    finally:
        await redis.aclose()
        await db.dispose()


async def _reminder_handed_over(settings: Settings, claimed: reminders.Reminder) -> int:
    """The reminder's outcome: a newer event of a row that now says the same as before."""
    db = Database(settings.database_url)
    redis = Redis.from_url(settings.redis_url)
    try:
        finished = await reminders.finish(db, claimed.invite, reminders.ReminderStatus.SENT)
        assert finished is not None
        await announce(redis, [finished])
        return finished.event_id
    finally:
        await redis.aclose()
        await db.dispose()


def test_a_newer_event_that_changes_nothing_said_is_not_heard_again(
    page: Page, stack: Stack
) -> None:
    email = "joana@exemplo.com"
    open_home(page)
    submit(page, email)
    wait_for_heard(page, polite(SENT.format(email)))
    public_id = row(page, email).get_attribute("data-convite")
    assert public_id
    stack.stop_worker()  # the test is the worker now: it takes the reminder itself
    wait_for_heard(page, polite(PAUSED))
    claimed: list[reminders.Reminder] = []
    in_own_loop(lambda: _keep(claimed, _remind_then_answer(stack.settings, public_id)))
    wait_for_heard(page, polite(ACCEPTED.format(email)))

    events: list[int] = []
    in_own_loop(lambda: _keep(events, _reminder_handed_over(stack.settings, claimed[0])))
    expect(row(page, email)).to_have_attribute("data-evento", str(events[0]))
    page.wait_for_timeout(1000)  # time for a (wrong) second saying

    assert spoken(page).count(polite(ACCEPTED.format(email))) == 1


async def _keep(into: list[object], work: object) -> None:
    into.append(await work)  # type: ignore[misc]
