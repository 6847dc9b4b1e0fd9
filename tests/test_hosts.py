"""Host checking, and the dev mailbox (/caixa) only in development."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.config import ConfigError, Settings, load_settings
from tests.helpers import client_for


async def test_a_request_for_an_unknown_host_gets_400_in_pt_br(settings: Settings) -> None:
    async with client_for(settings, base_url="http://evil.example") as browser:
        response = await browser.get("/")

    assert response.status_code == 400
    assert "Host" in response.text and "desconhecido" in response.text


async def test_the_public_url_host_and_localhost_outside_production_are_served(
    settings: Settings,
) -> None:
    public = replace(settings, public_url="https://convites.example.com", allowed_hosts=())
    bases = (
        "http://convites.example.com",
        "http://localhost:8000",
        "http://127.0.0.1",
        "http://[::1]:8000",
    )
    for base in bases:
        async with client_for(public, base_url=base) as browser:
            assert (await browser.get("/")).status_code == 200, base


async def test_production_answers_only_for_the_public_url_host(settings: Settings) -> None:
    production = replace(
        settings, app_env="production", public_url="https://convites.example.com", allowed_hosts=()
    )
    async with client_for(production, base_url="http://localhost") as browser:
        assert (await browser.get("/")).status_code == 400
    async with client_for(production, base_url="https://convites.example.com") as browser:
        assert (await browser.get("/")).status_code == 200


def test_mailbox_dir_outside_development_stops_start_up() -> None:
    env = {"SECRET_KEY": "x" * 32, "MAILBOX_DIR": "/tmp/caixa", "APP_ENV": "test"}
    with pytest.raises(ConfigError, match="MAILBOX_DIR"):
        load_settings(env)


async def test_caixa_exists_only_in_development(settings: Settings, tmp_path: Path) -> None:
    # Settings built in code skip the start-up check: the route itself is guarded too.
    with_mailbox = replace(settings, mailbox_dir=tmp_path)
    async with client_for(with_mailbox) as browser:
        assert (await browser.get("/caixa")).status_code == 404
        assert 'href="/caixa"' not in (await browser.get("/entrar")).text
    async with client_for(replace(with_mailbox, app_env="development")) as browser:
        assert (await browser.get("/caixa")).status_code == 200
        # The sign-in page says where the link arrives when no mail leaves the machine.
        assert 'href="/caixa"' in (await browser.get("/entrar")).text
