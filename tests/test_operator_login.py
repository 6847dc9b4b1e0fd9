"""Operator login: wrong tokens are throttled, the cookie carries an HMAC, Secure follows the
request's scheme, and "Sair" is remembered by the server."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.ops.auth import FAILURES_ALLOWED
from tests.helpers import client_for, page_token

TOKEN = "token-de-operacao-bem-comprido"
COOKIE = "convites_operacao"


@pytest.fixture
def ops_settings(settings: Settings) -> Settings:
    return replace(settings, ops_token=TOKEN)


@pytest.fixture
async def ops(ops_settings: Settings, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(ops_settings) as http:
        yield http


async def log_in(ops: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    form = page_token((await ops.get("/operacao")).text)
    return await ops.post("/operacao/entrar", data={"token": token, "csrf_token": form})


def cookie_payload(cookie: str) -> str:
    """The readable part of an itsdangerous cookie (signed, not encrypted). itsdangerous
    compresses it with zlib, after a leading ".", whenever that is shorter: it depends on the
    cookie's random session id, so a test that ignored it failed now and then."""
    compressed = cookie.startswith(".")
    encoded = cookie.removeprefix(".").split(".")[0]
    raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    return (zlib.decompress(raw) if compressed else raw).decode()


async def test_after_too_many_wrong_tokens_even_the_right_one_waits(
    ops: httpx.AsyncClient,
) -> None:
    for _ in range(FAILURES_ALLOWED):
        assert (await log_in(ops, "errado-errado-errado")).status_code == 403

    refused = await log_in(ops)
    bearer = await ops.get("/operacao", headers={"Authorization": f"Bearer {TOKEN}"})

    assert refused.status_code == 429 and "Tentativas demais" in refused.text
    assert int(refused.headers["retry-after"]) > 60
    assert bearer.status_code == 429
    assert COOKIE not in ops.cookies


async def test_wrong_bearer_tokens_count_towards_the_throttle_too(
    ops: httpx.AsyncClient,
) -> None:
    for _ in range(FAILURES_ALLOWED):
        wrong = await ops.get("/operacao", headers={"Authorization": "Bearer errado"})
        assert wrong.status_code == 403

    right = await ops.get("/operacao", headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 429


async def test_the_cookie_carries_an_hmac_of_the_token_not_a_plain_hash(
    ops: httpx.AsyncClient,
) -> None:
    assert (await log_in(ops)).status_code == 303

    payload = cookie_payload(ops.cookies[COOKIE])
    plain = hashlib.sha256(TOKEN.encode()).hexdigest()
    assert plain[:16] not in payload and TOKEN not in payload
    assert len(json.loads(payload)["f"]) == 64


async def test_the_cookie_is_secure_when_the_login_came_over_https(
    ops_settings: Settings, redis: Redis
) -> None:
    async with client_for(ops_settings, base_url="https://testserver") as secure:
        login = await log_in(secure)
    async with client_for(ops_settings) as plain:
        plain_login = await log_in(plain)

    assert "secure" in login.headers["set-cookie"].lower()
    assert "secure" not in plain_login.headers["set-cookie"].lower()


async def test_a_cookie_used_after_sair_no_longer_opens_the_page(ops: httpx.AsyncClient) -> None:
    await log_in(ops)
    stolen = ops.cookies[COOKIE]
    panel = await ops.get("/operacao")
    assert panel.status_code == 200

    await ops.post("/operacao/sair", data={"csrf_token": page_token(panel.text)})
    ops.cookies.set(COOKIE, stolen, path="/operacao")

    assert (await ops.get("/operacao")).status_code == 401


async def test_wrong_tokens_count_per_ipv6_64_not_per_address(
    ops_settings: Settings, redis: Redis
) -> None:
    """Fails if the throttle keys on the full IPv6 address: a /64 has 2⁶⁴ of them to rotate."""
    for n in range(FAILURES_ALLOWED):
        async with client_for(ops_settings, client=(f"2001:db8:7:8::{n + 1:x}", 1)) as guesser:
            assert (await log_in(guesser, "errado-errado-errado")).status_code == 403
    async with client_for(ops_settings, client=("2001:db8:7:8::ffff", 1)) as same_64:
        throttled = await log_in(same_64)
    async with client_for(ops_settings, client=("2001:db8:7:9::1", 1)) as elsewhere:
        allowed = await log_in(elsewhere)

    assert throttled.status_code == 429
    assert allowed.status_code == 303
