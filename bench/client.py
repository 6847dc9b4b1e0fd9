"""How a bench client looks like a browser: a session cookie and, when the app has one, the
anti-forgery token, read once from the page like a browser would (``GET /``).

Everything that depends on how the app guards a POST lives here, so a change there is a
one-line change here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlencode

import httpx

from bench.load import Request

_TOKEN_PATTERNS = (
    re.compile(r'<meta[^>]+name="csrf-token"[^>]+content="([^"]+)"'),
    re.compile(r'name="csrf_token"[^>]*value="([^"]+)"'),
)
TOKEN_HEADER = "X-CSRF-Token"
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
        return Request("POST", path, headers, json.dumps(body))

    def post_form(self, path: str, fields: dict[str, str]) -> Request:
        if self.token:
            fields = {**fields, TOKEN_FIELD: self.token}
        headers = self.headers(**{"Content-Type": "application/x-www-form-urlencoded"})
        return Request("POST", path, headers, urlencode(fields))


async def open_session(http: httpx.AsyncClient) -> BrowserSession:
    """A fresh sender: load the home page and keep what a browser would keep."""
    response = await http.get("/", headers={"Accept": "text/html"})
    response.raise_for_status()
    cookie = "; ".join(f"{name}={value}" for name, value in response.cookies.items())
    token = None
    for pattern in _TOKEN_PATTERNS:
        found = pattern.search(response.text)
        if found:
            token = found.group(1)
            break
    return BrowserSession(cookie, token)
