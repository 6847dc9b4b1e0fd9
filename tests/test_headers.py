"""Response headers: a strict CSP and friends on every answer, and the static cache policy."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import httpx

from app.config import Settings
from app.web.middleware.security_headers import CONTENT_SECURITY_POLICY
from tests.helpers import JSON, client_for

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def assert_protected(response: httpx.Response) -> None:
    csp = response.headers["content-security-policy"]
    assert csp == CONTENT_SECURITY_POLICY
    for directive in (
        "default-src 'self'",
        "script-src 'self';",
        "style-src 'self';",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ):
        assert directive in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    assert "camera=()" in response.headers["permissions-policy"]
    assert response.headers["x-frame-options"] == "DENY"


async def test_pages_json_and_errors_all_carry_the_security_headers(
    client: httpx.AsyncClient,
) -> None:
    responses = [
        await client.get("/"),
        await client.get("/convites", headers=JSON),
        await client.get("/convites/nao-existe"),
        await client.post("/convites", json={}),  # 403: no token
        await client.post("/convites", content=b"x" * 20_000),  # 413
    ]
    assert [r.status_code for r in responses] == [200, 200, 404, 403, 413]
    for response in responses:
        assert_protected(response)


async def test_personal_pages_are_never_stored_by_a_cache(client: httpx.AsyncClient) -> None:
    for response in (await client.get("/"), await client.get("/convites", headers=JSON)):
        assert response.headers["cache-control"] == "private, no-store"


class _InlineFinder(HTMLParser):
    """Collects what a strict CSP would block: inline scripts, styles and event handlers."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script" and "src" not in names:
            self.found.append("<script> without src")
        if tag == "style":
            self.found.append("<style>")
        self.found += [
            f"{tag} {name}=" for name in names if name == "style" or name.startswith("on")
        ]
        self.found += [
            f"{tag} {name}=javascript:"
            for name, value in attrs
            if name in ("href", "src", "action") and (value or "").strip().startswith("javascript:")
        ]


def test_no_template_has_inline_script_style_or_event_handlers() -> None:
    for template in sorted(TEMPLATES.glob("*.html")):
        finder = _InlineFinder()
        finder.feed(template.read_text())
        assert finder.found == [], f"{template.name}: {finder.found}"


async def test_versioned_static_files_are_cached_for_a_year(client: httpx.AsyncClient) -> None:
    page = (await client.get("/")).text
    css = re.search(r'<link rel="stylesheet" href="([^"]+)">', page)
    assert css and re.fullmatch(r"/static/app\.css\?v=[0-9a-f]{12}", css.group(1))

    for url in (css.group(1), "/static/vendor/htmx-2.0.11.min.js"):
        response = await client.get(url)
        assert response.status_code == 200
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert response.headers["x-content-type-options"] == "nosniff"


async def test_an_app_file_without_its_current_version_is_revalidated(
    client: httpx.AsyncClient,
) -> None:
    for url in ("/static/app.css", "/static/app.css?v=000000000000"):
        assert (await client.get(url)).headers["cache-control"] == "no-cache"


async def test_hsts_only_when_the_request_came_over_https(
    settings: Settings, tmp_path: Path
) -> None:
    async with client_for(settings) as plain:
        assert "strict-transport-security" not in (await plain.get("/")).headers
    async with client_for(settings, base_url="https://testserver") as secure:
        assert (await secure.get("/")).headers["strict-transport-security"] == "max-age=31536000"
