"""Sessions: signed HttpOnly cookie, Secure over HTTPS, proxies trusted only when configured,
and no production start without a real SECRET_KEY."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from app.config import ConfigError, Settings, load_settings
from tests.fixtures import ROOT, process_env
from tests.helpers import JSON, client_for, post_invite
from tests.services import free_port

GOOD_KEY = "Zq3v8K1xw9Lr2Tn6Yp0Bc5Hd7Jf4Mg1Qs8Vk3We6Ra"


def session_cookie(response: httpx.Response) -> str:
    [cookie] = [c for c in response.headers.get_list("set-cookie") if "convites_sessao=" in c]
    return cookie.lower()


def production_env(**extra: str) -> dict[str, str]:
    return {
        "APP_ENV": "production",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "PUBLIC_URL": "https://convites.example.com",
        **extra,
    }


def test_production_refuses_to_start_without_a_secret_key() -> None:
    with pytest.raises(ConfigError, match="SECRET_KEY is required"):
        load_settings(production_env())


@pytest.mark.parametrize(
    "key", ["short-key-1234567", "change-me-change-me-change-me-change-me", "x" * 31]
)
def test_production_refuses_a_sample_or_short_secret_key(key: str) -> None:
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        load_settings(production_env(SECRET_KEY=key))


def test_production_starts_with_a_real_secret_key() -> None:
    assert load_settings(production_env(SECRET_KEY=GOOD_KEY)).secret_key == GOOD_KEY


def test_the_web_process_exits_naming_secret_key_in_production_without_one(
    settings: Settings, tmp_path: Path
) -> None:
    env = process_env(settings, APP_ENV="production", CONVITES_VAR_DIR=str(tmp_path / "var"))
    del env["SECRET_KEY"]
    env.pop("WEBHOOK_ALLOW_PRIVATE_NETWORKS", None)  # a setting for tests, refused in production
    result = subprocess.run(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--port", str(free_port())],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "SECRET_KEY is required when APP_ENV=production" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "var" / "secret_key").exists()


async def test_the_session_cookie_is_signed_httponly_and_samesite_lax_not_secure_over_http(
    anonymous_client: httpx.AsyncClient,
) -> None:
    cookie = session_cookie(await anonymous_client.get("/"))
    assert "httponly" in cookie and "samesite=lax" in cookie
    assert "secure" not in cookie and not cookie.startswith("__host-")


async def test_a_tampered_cookie_is_signed_out_and_sees_nothing(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    await post_invite(client, "ana@exemplo.com")
    value = client.cookies["convites_sessao"]
    forged = value[:-3] + ("aaa" if not value.endswith("aaa") else "bbb")
    async with client_for(settings) as other:
        other.cookies.set("convites_sessao", forged)
        listed = await other.get("/convites", headers=JSON)
    assert listed.status_code == 401 and "convites" not in listed.json()


async def test_the_cookie_is_secure_and_host_only_when_the_request_came_over_https(
    settings: Settings,
) -> None:
    async with client_for(settings, base_url="https://testserver") as browser:
        cookie = session_cookie(await browser.get("/"))
    assert cookie.startswith("__host-convites_sessao=")
    assert "secure" in cookie and "path=/" in cookie and "domain=" not in cookie


async def test_https_only_cookies_marks_the_cookie_secure_even_over_http(
    settings: Settings,
) -> None:
    async with client_for(replace(settings, https_only_cookies=True)) as browser:
        assert "secure" in session_cookie(await browser.get("/"))


async def test_x_forwarded_proto_is_ignored_unless_proxy_headers_are_trusted(
    settings: Settings,
) -> None:
    async with client_for(settings) as browser:
        response = await browser.get("/", headers={"X-Forwarded-Proto": "https"})
    assert "secure" not in session_cookie(response)
    assert "strict-transport-security" not in response.headers


async def test_a_trusted_proxy_saying_https_gets_a_secure_cookie(settings: Settings) -> None:
    async with client_for(replace(settings, trust_proxy_headers=True)) as browser:
        response = await browser.get("/", headers={"X-Forwarded-Proto": "https"})
    assert "secure" in session_cookie(response)
    assert response.headers["strict-transport-security"]
