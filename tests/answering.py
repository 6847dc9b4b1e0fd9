"""Answering an invitation the way an invitee does: the link from the real mail the worker sent
through the real SMTP server, its page, and one of its two buttons (a plain form post)."""

from __future__ import annotations

import re

import httpx

from app.config import Settings
from tests.fixtures import drain
from tests.helpers import api_headers, page_token
from tests.services import ScriptedSmtp

ANSWER_LINK = re.compile(r"/c/([A-Za-z0-9_-]{32,})")
OPTOUT_URL = re.compile(r"https?://[^\s<>\"]+/descadastro/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+")


def answer_link(smtp: ScriptedSmtp, email: str) -> str:
    """The answer link's path in the newest invitation mail to ``email`` (text part), checked
    to be the same in the HTML part."""
    mail = [m for m in smtp.received if email in m.rcpt_tos][-1].message
    text = mail.get_body(("plain",))
    html = mail.get_body(("html",))
    assert text is not None and html is not None
    found = ANSWER_LINK.search(text.get_content())
    assert found, f"no answer link in {text.get_content()!r}"
    assert found.group(0) in html.get_content()
    return found.group(0)


async def invited(
    client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    email: str = "ana@exemplo.com.br",
    **body: str,
) -> tuple[str, str]:
    """An invite sent for real (burst worker, SMTP 250): its public id and its mail's link."""
    response = await client.post(
        "/convites", json={"email": email, **body}, headers=await api_headers(client)
    )
    assert response.status_code == 202, response.text
    await drain(settings)
    return response.json()["id"], answer_link(smtp, email)


async def press(http: httpx.AsyncClient, path: str, button: str) -> httpx.Response:
    """Open the link page and press one of its buttons, as a browser without JS does."""
    page = await http.get(path)
    return await http.post(f"{path}/{button}", data={"csrf_token": page_token(page.text)})


def optout_url_of(smtp: ScriptedSmtp, email: str) -> str:
    """The one-click URL from the newest invitation to ``email``: its ``List-Unsubscribe``."""
    mail = [m for m in smtp.received if email in m.rcpt_tos][-1].message
    found = OPTOUT_URL.search(str(mail["List-Unsubscribe"]))
    assert found, mail["List-Unsubscribe"]
    return found.group(0)
