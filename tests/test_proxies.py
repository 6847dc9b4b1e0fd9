"""TRUST_PROXY_HEADERS believes X-Forwarded-* only from the peers in TRUSTED_PROXIES."""

from __future__ import annotations

import ipaddress
from dataclasses import replace

import httpx
import pytest

from app.config import ConfigError, Settings, load_settings
from tests.helpers import client_for

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
