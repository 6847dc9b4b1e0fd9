"""Signing in, the way a person does: ask for the link, read it in the real mail the worker
sent through the real SMTP server, open it, press **Entrar**, give a name the first time.

No back door into the session: every test that needs an account goes through here. The link
mail is taken out of the SMTP server's record afterwards (``ScriptedSmtp.take_mail_to``), so a
test's own counts of received mail and DATA commands see only its invites.

Three drivers of the one flow: ``sign_in`` (an in-process app and a burst worker), ``sign_in_sync``
(real uvicorn and arq processes) and ``sign_in_browser`` (Chromium).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from tests.services import ScriptedSmtp
from tests.waiting import eventually, until

JSON = {"Accept": "application/json"}
LINK = re.compile(r"(/entrar/[A-Za-z0-9_-]{40,})")
DEFAULT_NAME = "Marta Souza"
#: The account a test browser signs in as unless it says otherwise (the ``client`` fixture).
SENDER = "marta@exemplo.com"


def link_in(smtp: ScriptedSmtp, email: str) -> str:
    """The sign-in link's path in the newest mail to ``email`` (the mail is taken out)."""
    mail = smtp.take_mail_to(email)
    body = mail.message.get_body(("plain",))
    assert body is not None
    found = LINK.search(body.get_content())
    assert found, f"no sign-in link in {body.get_content()!r}"
    return found.group(1)


def _page_token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no csrf_token field"
    return found.group(1)


async def _mail_arrives(smtp: ScriptedSmtp, email: str, timeout: float = 20.0) -> None:
    async def arrived() -> bool:
        return any(email in mail.rcpt_tos for mail in smtp.received)

    await eventually(arrived, timeout, f"a sign-in mail reaches {email}")


async def sign_in(
    http: httpx.AsyncClient,
    smtp: ScriptedSmtp,
    email: str,
    deliver: Callable[[], Awaitable[Any]] | None = None,
    name: str | None = DEFAULT_NAME,
) -> None:
    """Sign ``http`` in as ``email``; ``deliver()`` runs the worker that sends the link (without
    it, a real worker process is running: wait for its mail)."""
    token = (await http.get("/entrar", headers=JSON)).json()["csrf_token"]
    asked = await http.post(
        "/entrar", json={"email": email}, headers={**JSON, "X-CSRF-Token": token}
    )
    assert asked.status_code == 202, asked.text
    if deliver is not None:
        await deliver()
    await _mail_arrives(smtp, email)  # another running worker may be the one that sent it
    path = link_in(smtp, email)
    page = await http.get(path)
    assert page.status_code == 200, page.text
    entered = await http.post(path, data={"csrf_token": _page_token(page.text)})
    assert entered.status_code == 303, entered.text
    if entered.headers["location"].startswith("/conta") and name is not None:
        form = await http.get("/conta")
        named = await http.post("/conta", data={"csrf_token": _page_token(form.text), "nome": name})
        assert named.status_code == 303, named.text


def wait_for_link(smtp: ScriptedSmtp, email: str, timeout: float = 20.0) -> str:
    """The link, once a real worker process has sent it."""
    until(
        lambda: any(email in mail.rcpt_tos for mail in smtp.received),
        timeout,
        f"a sign-in mail reaches {email}",
    )
    return link_in(smtp, email)


def sign_in_sync(
    http: httpx.Client, smtp: ScriptedSmtp, email: str, name: str | None = DEFAULT_NAME
) -> None:
    """``sign_in`` against real web and worker processes."""
    token = http.get("/entrar", headers=JSON).json()["csrf_token"]
    asked = http.post("/entrar", json={"email": email}, headers={**JSON, "X-CSRF-Token": token})
    assert asked.status_code == 202, asked.text
    path = wait_for_link(smtp, email)
    page = http.get(path)
    assert page.status_code == 200, page.text
    entered = http.post(path, data={"csrf_token": _page_token(page.text)})
    assert entered.status_code == 303, entered.text
    if entered.headers["location"].startswith("/conta") and name is not None:
        form = http.get("/conta")
        named = http.post("/conta", data={"csrf_token": _page_token(form.text), "nome": name})
        assert named.status_code == 303, named.text


def sign_in_browser(page: Any, smtp: ScriptedSmtp, email: str, name: str = DEFAULT_NAME) -> None:
    """``sign_in`` in Chromium (a Playwright sync ``Page``), by the form, the mail and the link."""
    page.goto("/entrar")
    page.get_by_label("E-mail").fill(email)
    page.get_by_role("button", name="Enviar link de acesso").click()
    path = wait_for_link(smtp, email)
    page.goto(path)
    page.get_by_role("button", name="Entrar").click()
    page.wait_for_url(re.compile(r"/(conta\?primeira=1)?$"))
    if "/conta" in page.url:
        page.get_by_label("Seu nome").fill(name)
        page.get_by_role("button", name="Salvar").click()
        page.wait_for_url(re.compile(r"/$"))


def sign_in_through_the_dev_mailbox(
    http: httpx.Client, mailbox: Path, email: str = "dev@exemplo.com"
) -> None:
    """``python -m app dev``, as a newcomer signs in: ask for the link, open it from ``/caixa``,
    press Entrar, give a name. The mailbox folder is emptied afterwards, so a test's own look at
    ``/caixa`` sees only its invites."""
    token = http.get("/entrar", headers=JSON).json()["csrf_token"]
    asked = http.post("/entrar", json={"email": email}, headers={**JSON, "X-CSRF-Token": token})
    assert asked.status_code == 202, asked.text
    until(lambda: any(mailbox.glob("*.eml")), what="the sign-in link reaches the dev mailbox")
    inbox = http.get("/caixa").text
    message = http.get(re.findall(r'href="(/caixa/[^"]+)"', inbox)[0]).text
    link = re.findall(r'href="(https?://[^"]*/entrar/[^"]+)"', message)[0]
    page = http.get(link)
    entered = http.post(link, data={"csrf_token": _page_token(page.text)})
    assert entered.status_code == 303 and entered.headers["location"].startswith("/conta")
    form = http.get("/conta")
    named = http.post("/conta", data={"csrf_token": _page_token(form.text), "nome": "Dev"})
    assert named.status_code == 303, named.text
    for eml in mailbox.glob("*.eml"):
        eml.unlink()
