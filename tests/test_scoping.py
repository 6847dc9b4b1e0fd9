"""Scoping: another sender's invite does not exist for you — page, JSON, fragment, re-send."""

from __future__ import annotations

import re
from typing import Any

import httpx

from app.config import Settings
from app.invites.status import Status
from app.storage.database import Database
from tests.fixtures import drain
from tests.helpers import JSON, api_headers, invite_row, post_invite
from tests.services import ScriptedSmtp


async def test_another_senders_invite_is_404_everywhere_and_never_listed(
    client: httpx.AsyncClient,
    other_client: Any,
    db: Database,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    smtp.reply_next("550 5.1.1 No such user")
    mine = await post_invite(client, "ana@exemplo.com")
    await drain(settings)
    url = f"/convites/{mine['id']}"

    async with other_client() as stranger:
        answers = [
            await stranger.get(url, headers=JSON),
            await stranger.get(url),
            await stranger.get(url, headers={"HX-Request": "true"}),
            await stranger.post(f"{url}/reenviar", headers=await api_headers(stranger)),
        ]
        listed = (await stranger.get("/convites", headers=JSON)).json()["convites"]
        page = (await stranger.get("/")).text

    assert [a.status_code for a in answers] == [404, 404, 404, 404]
    assert all("ana@exemplo.com" not in a.text for a in answers)
    assert (
        answers[0].json()["erro"] == "Este convite não foi encontrado: talvez tenha sido apagado."
    )
    assert listed == [] and "ana@exemplo.com" not in page
    assert (await invite_row(db, mine["id"])).status == Status.FALHOU  # the re-send changed nothing


async def test_public_ids_are_random_not_row_numbers(client: httpx.AsyncClient) -> None:
    ids = [(await post_invite(client, f"n{i}@exemplo.com"))["id"] for i in range(3)]

    assert all(re.fullmatch(r"[A-Za-z0-9_-]{16,}", public_id) for public_id in ids)
    assert len({public_id[:4] for public_id in ids}) == 3
