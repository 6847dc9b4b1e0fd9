"""Only the operator's bearer token, and only under /operacao, skips the CSRF check."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from app.config import Settings
from app.storage.database import Database
from tests.helpers import JSON, client_for, csrf_token, invite_count

TOKEN = "token-de-operacao-bem-comprido"


@pytest.fixture
async def ops(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(replace(settings, ops_token=TOKEN)) as http:
        yield http


async def test_the_ops_token_as_bearer_posts_under_operacao_without_a_csrf_token(
    ops: httpx.AsyncClient,
) -> None:
    response = await ops.post(
        "/operacao/tentar-de-novo",
        data={"motivo": "x"},
        headers={**JSON, "Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 200
    assert response.json() == {"reenviados": 0, "deixados": 0}


async def test_a_wrong_bearer_under_operacao_is_stopped_by_the_csrf_check(
    ops: httpx.AsyncClient,
) -> None:
    response = await ops.post(
        "/operacao/tentar-de-novo",
        data={"motivo": "x"},
        headers={**JSON, "Authorization": "Bearer errado-errado-errado"},
    )
    assert response.status_code == 403
    assert "veio desta página" in response.json()["erro"]


async def test_the_ops_token_does_not_skip_the_check_outside_operacao(
    ops: httpx.AsyncClient, db: Database
) -> None:
    await csrf_token(ops)

    response = await ops.post(
        "/convites",
        json={"email": "ana@exemplo.com"},
        headers={**JSON, "Authorization": f"Bearer {TOKEN}"},
    )

    assert response.status_code == 403
    assert await invite_count(db) == 0


async def test_the_ops_token_under_another_scheme_is_stopped_by_the_csrf_check(
    ops: httpx.AsyncClient,
) -> None:
    # A browser attaches Basic credentials on its own; only a bearer token proves a script.
    response = await ops.post(
        "/operacao/tentar-de-novo",
        data={"motivo": "x"},
        headers={**JSON, "Authorization": f"Basic x{TOKEN}"},
    )
    assert response.status_code == 403
