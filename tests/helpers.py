"""Small helpers the tests share."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from app.db import Database
from app.invites import Invite, get_invite_by_public_id, invite_history
from app.status import Status

JSON = {"Accept": "application/json"}


async def post_invite(
    client: httpx.AsyncClient, email: str, nome: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"email": email}
    if nome is not None:
        body["nome"] = nome
    response = await client.post("/convites", json=body, headers=JSON)
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/convites/{response.json()['id']}"
    data: dict[str, Any] = response.json()
    return data


async def invite(db: Database, public_id: str) -> Invite:
    found = await get_invite_by_public_id(db, public_id)
    assert found is not None
    return found


async def statuses(db: Database, public_id: str) -> list[tuple[str, int]]:
    found = await invite(db, public_id)
    return [(event.status.value, event.attempt) for event in await invite_history(db, found.id)]


async def wait_for_status(
    db: Database, public_id: str, *wanted: Status, timeout: float = 20.0
) -> Invite:
    deadline = time.monotonic() + timeout
    while True:
        found = await invite(db, public_id)
        if found.status in wanted:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{public_id} is {found.status}, not {wanted}")
        await asyncio.sleep(0.05)
