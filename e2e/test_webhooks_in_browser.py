"""/conta/webhooks in Chromium: create a webhook (its secret shown once, read first), watch an
invite's changes fail at a real receiver, **Reenviar** one and see it delivered, then **Excluir**
it through its confirmation page; axe-clean on every page, read in order (every change here is a
whole new page), and the status region says only what a press just did, once. A webhook
disabled after ``WEBHOOK_MAX_FAILURES`` failures in a row: its
notice is spoken once, in the status region, the first time the page shows it (a reload is
silent), and its owner gets one mail."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from app.web.webhooks import DISABLED
from e2e.spoken import polite, read_through, spoken, wait_for_spoken
from tests.services import ScriptedSmtp
from tests.waiting import until
from tests.webhook_receiver import webhook_receiver_thread

pytestmark = pytest.mark.e2e

INTRO = [
    "heading, Webhooks, level 1",
    "paragraph",
    "Um webhook avisa outro sistema de cada mudança nos seus convites: enviamos na hora um "
    "POST assinado para o endereço que você informar (",
    "link, descrição da API",
    ").",
    "end of paragraph",
]
NONE_YET = [
    "region, Seus webhooks",
    "heading, Seus webhooks, level 2",
    "paragraph",
    "Você ainda não tem webhooks.",
    "end of paragraph",
    "end of region, Seus webhooks",
]
CREATE = [
    "region, Criar um webhook",
    "heading, Criar um webhook, level 2",
    "form",
    "Endereço (URL) que recebe os eventos",
    "textbox, Endereço (URL) que recebe os eventos, required",
    "button, Criar webhook",
    "end of form",
    "end of region, Criar um webhook",
]


#: The invite whose changes the webhook delivers, as each delivery names it.
INVITEE = "webhook@exemplo.com"
FOR_INVITE = f"convite para {INVITEE}"
ABOUT = f"do {FOR_INVITE}"


def _states(page: Page) -> list[str]:
    """Each delivery's first line ("convite.enviado (convite para …): falhou"), newest first."""
    return page.locator("#webhooks li li p:first-child").all_inner_texts()


def test_a_webhook_is_created_its_deliveries_shown_and_a_failed_one_sent_again(
    page: Page,
) -> None:
    with webhook_receiver_thread() as receiver:
        receiver.script = [500] * 100  # every attempt fails until the test says otherwise
        page.goto("/conta")
        page.get_by_role("link", name="Webhooks").click()
        expect(page).to_have_url(re.compile(r"/conta/webhooks$"))
        assert Axe().run(page).violations_count == 0
        assert read_through(page) == ["main", "status", "alert", *INTRO, *NONE_YET, *CREATE]
        assert spoken(page) == []

        page.get_by_label("Endereço (URL) que recebe os eventos").fill(receiver.url)
        page.get_by_role("button", name="Criar webhook").click()
        expect(page.locator("#segredo")).to_have_text(re.compile(r"^whsec_"))
        secret = page.locator("#segredo").inner_text()
        assert Axe().run(page).violations_count == 0
        assert read_through(page, "#webhook-novo") == [
            "region, Webhook criado",
            "heading, Webhook criado, level 2",
            "paragraph",
            "Este é o segredo que assina cada envio. Copie agora: ele não será mostrado de novo.",
            "end of paragraph",
            "paragraph",
            "code",
            secret,
            "end of code",
            "end of paragraph",
        ]
        assert spoken(page) == []
        receiver.secret = secret

        page.goto("/")
        page.get_by_label("E-mail").fill(INVITEE)
        page.get_by_role("button", name="Enviar convite").click()
        expect(page.locator("main")).to_contain_text(INVITEE)

        # Each change (pendente, enviando, enviado) fails twice (one retry), then falhou.
        def all_failed() -> bool:
            page.goto("/conta/webhooks")
            states = _states(page)
            return len(states) == 3 and all(s.endswith(": falhou") for s in states)

        until(all_failed, timeout=60, what=lambda: str(_states(page)))
        assert Axe().run(page).violations_count == 0
        assert receiver.received and all(d.verified for d in receiver.received)
        failed = [delivery(kind, "falhou", "500", "falhou aqui", 2) for kind in KINDS]
        assert _heard(page, receiver.url, "#webhooks") == hook_list(*failed)
        assert spoken(page) == []

        receiver.script = []  # the receiver is back: 200 from now on
        page.get_by_role("button", name=f"Reenviar convite.enviado {ABOUT}").click()
        expect(page).to_have_url(re.compile(r"/conta/webhooks$"))  # ?reenviada=1 said, then dropped
        assert Axe().run(page).violations_count == 0
        resent = "Entrega enviada de novo para a fila. Acompanhe o resultado abaixo."
        again = ["paragraph", resent, "end of paragraph"]
        queued = delivery("convite.enviado", "pendente", "500", "falhou aqui", 0)
        wait_for_spoken(page, polite(resent))
        assert (
            _heard(page, receiver.url)
            == [
                "main",
                *["status", resent, "end of status"],  # what the press did, heard once
                "alert",
                *INTRO,
                *again,
                *hook_list(queued, *failed[1:]),
                "end of region, Seus webhooks",
                *CREATE,
            ]
        )
        assert spoken(page) == [polite(resent)]

        def delivered() -> bool:
            page.goto("/conta/webhooks")
            return _states(page)[0] == f"convite.enviado ({FOR_INVITE}): entregue"

        until(delivered, timeout=30, what=lambda: str(_states(page)))
        done = delivery("convite.enviado", "entregue", "200", "recebido", 1)
        assert _heard(page, receiver.url, "#webhooks") == hook_list(done, *failed[1:])
        assert spoken(page) == []
        ids = {
            d.headers["webhook-id"]
            for d in receiver.received
            if d.body["type"] == "convite.enviado"
        }
        assert len(ids) == 1  # every attempt and the resend: one webhook-id

        # Excluir asks first, saying what goes with it; only its button deletes.
        page.get_by_role("link", name=f"Excluir o webhook {receiver.url}").click()
        expect(page).to_have_url(re.compile(r"/conta/webhooks/[\w-]+/excluir$"))
        assert Axe().run(page).violations_count == 0
        assert read_through(page)[:4] == [
            "main",
            "status",
            "alert",
            f"heading, Excluir o webhook “{receiver.url}”?, level 1",
        ]
        page.get_by_role("button", name="Excluir webhook").click()
        expect(page).to_have_url(re.compile(r"/conta/webhooks$"))  # ?excluido=1 said, then dropped
        removed = "Webhook excluído. Nenhum evento será mais enviado para ele."
        wait_for_spoken(page, polite(removed))
        assert read_through(page) == [
            "main",
            *["status", removed, "end of status"],
            "alert",
            *INTRO,
            *["paragraph", removed, "end of paragraph"],
            *NONE_YET,
            *CREATE,
        ]
        assert spoken(page) == [polite(removed)]


def test_a_disabled_webhook_is_announced_once_and_its_owner_mailed_once(
    page: Page, smtp_server: ScriptedSmtp
) -> None:
    with webhook_receiver_thread() as receiver:
        receiver.script = [500] * 100  # every attempt fails
        page.goto("/conta/webhooks")
        page.get_by_label("Endereço (URL) que recebe os eventos").fill(receiver.url)
        page.get_by_role("button", name="Criar webhook").click()
        expect(page.locator("#segredo")).to_have_text(re.compile(r"^whsec_"))
        # Two invites: three changes each, so the fifth failed delivery in a row disables it.
        for email in ("desativa1@exemplo.com", "desativa2@exemplo.com"):
            page.goto("/")
            page.get_by_label("E-mail").fill(email)
            page.get_by_role("button", name="Enviar convite").click()
            expect(page.locator("main")).to_contain_text(email)

        # Watched without a browser page: showing it is what the test is about.
        def disabled() -> bool:
            return 'id="webhook-desativado"' in page.request.get("/conta/webhooks").text()

        until(disabled, timeout=60, what="the webhook disabled")
        page.goto("/conta/webhooks")
        assert wait_for_spoken(page, polite(DISABLED)) == [polite(DISABLED)]
        assert Axe().run(page).violations_count == 0
        assert read_through(page, "#webhook-desativado") == ["paragraph", DISABLED]

        page.reload()
        expect(page.locator("#webhook-desativado")).to_have_text(DISABLED)  # still shown
        assert page.evaluate(
            "() => Object.keys(localStorage).some(k => k.includes('webhooks-desativados:'))"
        )
        assert spoken(page) == []  # and not said again

        def told() -> list[str]:
            return [
                m.message["Subject"]
                for m in smtp_server.received
                if m.message["Subject"] == "Um webhook seu foi desativado"
            ]

        assert until(told, timeout=30, what="the mail about the disabled webhook") == [
            "Um webhook seu foi desativado"
        ]


KINDS = ("convite.enviado", "convite.enviando", "convite.pendente")
WHEN = re.compile(r"^\d{2}/\d{2}/\d{4} \d{2}:\d{2}(:\d{2})?$")


def _heard(page: Page, url: str, selector: str = "main") -> list[str]:
    """``read_through``, with the receiver's URL and the times in words of their own."""
    return [
        "<quando>" if WHEN.match(phrase) else phrase.replace(url, "<url>")
        for phrase in read_through(page, selector)
    ]


def delivery(kind: str, state: str, code: str, answer: str, attempts: int) -> list[str]:
    """What a delivery's list item says (its position is added by ``hook_list``)."""
    queued = state == "pendente" and not attempts  # sent again by Reenviar, not yet tried
    said = [
        "paragraph",
        "strong",
        kind,
        "end of strong",
        f"({FOR_INVITE}): {state}",
        "end of paragraph",
        "paragraph",
        f"Última resposta {code}:",
        answer,
        "end of paragraph",
        "paragraph",
        f"Tentativas: {attempts}." + (" Na fila: sai em instantes." if queued else ""),
        "end of paragraph",
    ]
    if state == "falhou":
        said += [
            "form",
            f"button, Reenviar {kind} {ABOUT}",
            "Reenviar",
            f"{kind} {ABOUT}",
            f"end of button, Reenviar {kind} {ABOUT}",
            "end of form",
        ]
    return said


def hook_list(*deliveries: list[str]) -> list[str]:
    """The "Seus webhooks" region with one active webhook and these deliveries, newest first."""
    items: list[str] = []
    for position, said in enumerate(deliveries, 1):
        item = f"listitem, level 2, position {position}, set size {len(deliveries)}"
        items += [item, *said, f"end of {item}"]
    return [
        "region, Seus webhooks",
        "heading, Seus webhooks, level 2",
        "list",
        "listitem, level 1, position 1, set size 1",
        "heading, <url>, level 3",
        "paragraph",
        "Criado em",
        "time",
        "<quando>",
        "end of time",
        ".",
        "end of paragraph",
        "paragraph",
        "Ativo.",
        "end of paragraph",
        "paragraph",
        "link, Excluir o webhook <url>",
        "Excluir",
        "o webhook <url>",
        "end of link, Excluir o webhook <url>",
        "end of paragraph",
        "heading, Entregas recentes, level 4",
        "list",
        *items,
        "end of list",
        "end of listitem, level 1, position 1, set size 1",
        "end of list",
    ]
