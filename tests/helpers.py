"""Small helpers the tests share."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from redis.asyncio import Redis
from sqlalchemy import func, select

from app.config import Settings
from app.db import Database
from app.live.wakeups import Announcer
from app.models import invite_events, invites, outbox
from app.queries import invite_history
from app.records import INVITE, Change, Invite, record_from
from app.status import Status
from tests.services import ScriptedSmtp

JSON = {"Accept": "application/json"}


async def csrf_token(client: httpx.AsyncClient) -> str:
    """The client's CSRF token, as a JSON client gets it (this also starts its session)."""
    response = await client.get("/convites", headers=JSON)
    assert response.status_code == 200, response.text
    token: str = response.json()["csrf_token"]
    return token


def sync_api_headers(client: httpx.Client) -> dict[str, str]:
    """``api_headers`` for a blocking client talking to a real web process."""
    response = client.get("/convites", headers=JSON)
    assert response.status_code == 200, response.text
    return {**JSON, "X-CSRF-Token": response.json()["csrf_token"]}


async def api_headers(client: httpx.AsyncClient) -> dict[str, str]:
    """Headers for a JSON client's POST: Accept and the CSRF token."""
    return {**JSON, "X-CSRF-Token": await csrf_token(client)}


async def post_invite(
    client: httpx.AsyncClient, email: str, nome: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"email": email}
    if nome is not None:
        body["nome"] = nome
    response = await client.post("/convites", json=body, headers=await api_headers(client))
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/convites/{response.json()['id']}"
    data: dict[str, Any] = response.json()
    return data


async def invite_row(db: Database, public_id: str) -> Invite:
    """The invite as the database has it now, whoever sent it."""
    async with db.read() as conn:
        row = (await conn.execute(select(invites).where(invites.c.public_id == public_id))).one()
    return record_from(Invite, row)


async def announce(redis: Redis, changes: list[Change | None]) -> None:
    """Wake the senders' pages for ``changes``, as the worker and the sweep do."""
    announcer = Announcer(redis)
    await announcer.announce_all(changes)
    await announcer.close()


async def statuses(db: Database, public_id: str) -> list[tuple[str, int]]:
    found = await invite_row(db, public_id)
    return [(event.status.value, event.attempt) for event in await invite_history(db, found.id)]


async def wait_for_status(
    db: Database, public_id: str, *wanted: Status, timeout: float = 20.0
) -> Invite:
    deadline = time.monotonic() + timeout
    while True:
        found = await invite_row(db, public_id)
        if found.status in wanted:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{public_id} is {found.status}, not {wanted}")
        await asyncio.sleep(0.05)


def page_token(html: str) -> str:
    """The CSRF token a page put in its forms."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no csrf_token field"
    return found.group(1)


async def written(db: Database) -> tuple[int, int, int]:
    """How many invitation rows, events and outbox rows exist (sign-in mails not counted)."""
    mine = invites.c.kind == INVITE
    async with db.read() as conn:
        counts = [
            (await conn.execute(query)).scalar_one()
            for query in (
                select(func.count()).select_from(invites).where(mine),
                select(func.count()).select_from(invite_events.join(invites)).where(mine),
                select(func.count()).select_from(outbox.join(invites)).where(mine),
            )
        ]
    return int(counts[0]), int(counts[1]), int(counts[2])


async def invite_count(db: Database) -> int:
    """How many invitations exist (sign-in mails are not invites)."""
    return (await written(db))[0]


@asynccontextmanager
async def client_for(
    settings: Settings,
    base_url: str = "http://testserver",
    *,
    smtp: ScriptedSmtp | None = None,
    email: str = "marta@exemplo.com",
    **transport: Any,
) -> AsyncIterator[httpx.AsyncClient]:
    """A browser (own cookie jar) on an app built with ``settings``; with ``smtp``, signed in
    as ``email`` through the real link mail. ``transport`` options go to
    ``httpx.ASGITransport`` (e.g. ``client=("10.0.0.1", 1)``, ``raise_app_exceptions``)."""
    from tests.fixtures import drain, running_app
    from tests.signing_in import sign_in

    async with running_app(settings) as app:
        asgi = httpx.ASGITransport(app=app, **transport)
        async with httpx.AsyncClient(transport=asgi, base_url=base_url) as http:
            if smtp is not None:
                await sign_in(http, smtp, email, lambda: drain(settings))
            yield http
