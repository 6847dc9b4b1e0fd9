"""TRUST_PROXY_HEADERS believes X-Forwarded-* only from the peers in TRUSTED_PROXIES."""

from __future__ import annotations

import ipaddress
from dataclasses import replace

import httpx
import pytest

from app.config import ConfigError, Settings, load_settings
from tests.helpers import api_headers, client_for
from tests.services import ScriptedSmtp

PROXY = ("198.51.100.7", 40000)
FORWARDED = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.50"}


def secure_cookie(response: httpx.Response) -> bool:
    return "secure" in response.headers.get("set-cookie", "").lower()


async def test_proxy_headers_from_a_peer_outside_trusted_proxies_are_ignored(
    settings: Settings,
) -> None:
    trusting = replace(settings, trust_proxy_headers=True)  # default: loopback only
    async with client_for(trusting, client=PROXY) as browser:
        response = await browser.get("/", headers=FORWARDED)

    assert not secure_cookie(response)
    assert "strict-transport-security" not in response.headers


async def test_proxy_headers_from_a_listed_network_are_believed(settings: Settings) -> None:
    trusting = replace(
        settings,
        trust_proxy_headers=True,
        trusted_proxies=(ipaddress.ip_network("198.51.100.0/24"),),
    )
    async with client_for(trusting, client=PROXY) as browser:
        response = await browser.get("/", headers=FORWARDED)

    assert secure_cookie(response)
    assert response.headers["strict-transport-security"]


def test_trusted_proxies_takes_addresses_and_networks() -> None:
    base = {"SECRET_KEY": "x" * 32, "DATABASE_URL": "sqlite+aiosqlite:///tmp/x.db"}
    settings = load_settings({**base, "TRUSTED_PROXIES": "10.0.0.5, 172.16.0.0/12, ::1"})

    assert [str(n) for n in settings.trusted_proxies] == ["10.0.0.5/32", "172.16.0.0/12", "::1/128"]
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES"):
        load_settings({**base, "TRUSTED_PROXIES": "proxy.internal"})


async def test_repeated_forwarded_lines_are_read_whole_trusting_only_listed_hops(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    # A proxy that appends its own X-Forwarded-For line after the client's: uvicorn's
    # ProxyHeadersMiddleware joins every line and reads from the right, skipping trusted hops,
    # so what the client wrote in its own line cannot choose the address the limits count.
    trusting = replace(
        settings,
        trust_proxy_headers=True,
        trusted_proxies=(ipaddress.ip_network("198.51.100.0/24"),),
        sends_per_address_per_minute=1,
    )
    codes = []
    for n, spoofed in enumerate(("192.0.2.1", "192.0.2.2")):
        async with client_for(trusting, smtp=smtp, email=f"s{n}@exemplo.com", client=PROXY) as http:
            lines = [
                *(await api_headers(http)).items(),
                ("X-Forwarded-For", spoofed),  # the client's own line
                ("X-Forwarded-For", "203.0.113.50, 198.51.100.8"),  # the proxies'
            ]
            answer = await http.post("/convites", json={"email": "x@exemplo.com"}, headers=lines)
            codes.append(answer.status_code)

    assert codes == [202, 429]  # both are 203.0.113.50, whatever the first line said


@pytest.mark.parametrize(
    ("lines", "secure"), [(["http", "https"], True), (["https", "http"], False)]
)
async def test_of_repeated_forwarded_proto_lines_the_last_one_the_proxys_counts(
    settings: Settings, lines: list[str], secure: bool
) -> None:
    trusting = replace(
        settings,
        trust_proxy_headers=True,
        trusted_proxies=(ipaddress.ip_network("198.51.100.0/24"),),
    )
    async with client_for(trusting, client=PROXY) as browser:
        response = await browser.get("/", headers=[("X-Forwarded-Proto", line) for line in lines])

    assert secure_cookie(response) is secure
