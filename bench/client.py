"""How a bench client looks like a browser: signed in by the link in its mail, a session
cookie and, when the app has one, the anti-forgery token, read once from the page like a browser
would (``GET /``).

Everything that depends on how the app guards a POST lives here, so a change there is a
one-line change here.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx

from bench.load import Request

_TOKEN_PATTERNS = (
    re.compile(r'<meta[^>]+name="csrf-token"[^>]+content="([^"]+)"'),
    re.compile(r'name="csrf_token"[^>]*value="([^"]+)"'),
)
TOKEN_HEADER = "X-CSRF-Token"
#: In a body, replaced by a new tag for each request built (so two runs never share addresses).
RUN = "__RUN__"
TOKEN_FIELD = "csrf_token"


@dataclass(frozen=True)
class BrowserSession:
    """One sender: its cookie header and, if the page offered one, its form token."""

    cookie: str
    token: str | None

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Cookie": self.cookie, **extra}
        if self.token:
            headers[TOKEN_HEADER] = self.token
        return headers

    def post_json(self, path: str, body: dict[str, str]) -> Request:
        headers = self.headers(**{"Content-Type": "application/json", "Accept": "application/json"})
        return Request("POST", path, headers, _tagged(json.dumps(body)))

    def post_form(self, path: str, fields: dict[str, str]) -> Request:
        if self.token:
            fields = {**fields, TOKEN_FIELD: self.token}
        headers = self.headers(**{"Content-Type": "application/x-www-form-urlencoded"})
        return Request("POST", path, headers, _tagged(urlencode(fields)))


def _tagged(body: str) -> str:
    return body.replace(RUN, uuid.uuid4().hex[:8])


def _form_token(html: str) -> str | None:
    for pattern in _TOKEN_PATTERNS:
        found = pattern.search(html)
        if found:
            return found.group(1)
    return None


async def _ask_for_link(http: httpx.AsyncClient, email: str) -> None:
    token = (await http.get("/entrar", headers={"Accept": "application/json"})).json()
    response = await http.post(
        "/entrar",
        json={"email": email},
        headers={"Accept": "application/json", TOKEN_HEADER: token["csrf_token"]},
    )
    response.raise_for_status()


async def _wait_for_links(links: Path, emails: set[str], seconds: float = 60) -> dict[str, str]:
    deadline = time.monotonic() + seconds
    while True:
        found = {}
        if links.exists():
            for line in links.read_text().splitlines():
                address, _, link = line.partition("\t")
                if address in emails:
                    found[address] = link
        if len(found) == len(emails):
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"sign-in links missing for {sorted(emails - set(found))[:3]}")
        await asyncio.sleep(0.05)


async def _use_link(http: httpx.AsyncClient, link: str) -> None:
    path = "/" + link.split("/", 3)[3]
    page = await http.get(path)
    entered = await http.post(path, data={TOKEN_FIELD: _form_token(page.text) or ""})
    if entered.status_code != 303:
        raise RuntimeError(f"sign-in refused: {entered.status_code} {entered.text[:200]}")
    if entered.headers["location"].startswith("/conta"):
        form = await http.get("/conta")
        named = await http.post(
            "/conta", data={TOKEN_FIELD: _form_token(form.text) or "", "nome": "Bench"}
        )
        if named.status_code != 303:
            raise RuntimeError(f"naming refused: {named.status_code} {named.text[:200]}")


async def open_sessions(
    clients: list[httpx.AsyncClient], links: Path, deliver: Callable[[], Awaitable[object]]
) -> list[BrowserSession]:
    """Fresh senders, signed in like people: each asks for a link (``deliver()`` runs the
    worker that mails them), opens it from the mail and presses Entrar; then each loads the
    home page and keeps what a browser would keep."""
    emails = [f"bench-sender-{uuid.uuid4().hex[:12]}@exemplo.com" for _ in clients]
    pairs = list(zip(clients, emails, strict=True))
    room = asyncio.Semaphore(50)

    async def bounded(step: Awaitable[None]) -> None:
        async with room:
            await step

    await asyncio.gather(*(bounded(_ask_for_link(http, email)) for http, email in pairs))
    await deliver()
    found = await _wait_for_links(links, set(emails))
    await asyncio.gather(*(bounded(_use_link(http, found[email])) for http, email in pairs))
    return [await _home(http) for http in clients]


async def _home(http: httpx.AsyncClient) -> BrowserSession:
    response = await http.get("/", headers={"Accept": "text/html"})
    response.raise_for_status()
    cookie = "; ".join(f"{name}={value}" for name, value in http.cookies.items())
    return BrowserSession(cookie, _form_token(response.text))
