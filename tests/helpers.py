"""Small helpers the tests share."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosmtplib
import httpx
from redis.asyncio import Redis
from sqlalchemy import Table, func, or_, select

from app.bounces.addresses import bounce_address
from app.config import Settings
from app.invites.queries import invite_history
from app.invites.records import INVITE, Change, Invite, record_from
from app.invites.status import Status
from app.live.wakeups import Announcer
from app.storage.database import Database
from app.storage.tables import (
    accounts,
    bounces,
    idempotency_keys,
    invite_events,
    invites,
    outbox,
    signin_tokens,
    webhook_deliveries,
)
from tests.services import ScriptedSmtp
from tests.signing_in import SENDER
from tests.waiting import eventually

JSON = {"Accept": "application/json"}


async def csrf_token(client: httpx.AsyncClient) -> str:
    """The client's CSRF token, as a JSON client gets it (this also starts its session)."""
    response = await client.get("/entrar", headers=JSON)
    assert response.status_code == 200, response.text
    token: str = response.json()["csrf_token"]
    return token


def sync_api_headers(client: httpx.Client) -> dict[str, str]:
    """``api_headers`` for a blocking client talking to a real web process."""
    response = client.get("/entrar", headers=JSON)
    assert response.status_code == 200, response.text
    return {**JSON, "X-CSRF-Token": response.json()["csrf_token"]}


async def api_headers(client: httpx.AsyncClient) -> dict[str, str]:
    """Headers for a JSON client's POST: Accept and the CSRF token."""
    return {**JSON, "X-CSRF-Token": await csrf_token(client)}


async def schedule(
    client: httpx.AsyncClient, email: str, when: datetime | str, **body: Any
) -> httpx.Response:
    """``POST /convites`` (JSON) with ``enviar_em``: the answer, whatever it is."""
    moment = when.isoformat() if isinstance(when, datetime) else when
    return await client.post(
        "/convites",
        json={"email": email, "enviar_em": moment, **body},
        headers=await api_headers(client),
    )


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


async def statuses(db: Database, public_id: str) -> list[tuple[str, int]]:
    found = await invite_row(db, public_id)
    return [(event.status.value, event.attempt) for event in await invite_history(db, found.id)]


async def wait_for_status(
    db: Database, public_id: str, *wanted: Status, timeout: float = 20.0
) -> Invite:
    found = await invite_row(db, public_id)

    async def reached() -> bool:
        nonlocal found
        found = await invite_row(db, public_id)
        return found.status in wanted

    await eventually(reached, timeout, lambda: f"{public_id} is {found.status}, not {wanted}")
    return found


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
    email: str = SENDER,
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


BOUNCE_SAMPLES = Path(__file__).resolve().parent / "data" / "bounces"


def bounce_sample(
    name: str, invite: Invite, settings: Settings, attempt: int | None = None
) -> bytes:
    """A sample from ``tests/data/bounces/`` pointed at ``invite``: its address, the signed
    return path, Message-ID and DSN envelope id of ``attempt`` (default its own)."""
    attempt = invite.attempt if attempt is None else attempt
    verp = verp_address(settings, invite.public_id, attempt)
    return bounce_message(name, invite.public_id, invite.email, attempt, verp)


def verp_address(settings: Settings, public_id: str, attempt: int = 1) -> str:
    """The signed return path the worker puts on that attempt's mail."""
    return bounce_address(settings.return_path, settings.secret_key, public_id, attempt)


def bounce_message(name: str, public_id: str, email: str, attempt: int, verp: str) -> bytes:
    """``bounce_sample`` for an invite known only by its id and address (browser tests)."""
    tokens = {
        "{{email}}": email,
        "{{verp}}": verp,
        "{{message_id}}": f"<{public_id}.{attempt}@localhost>",
        "{{envid}}": f"{public_id}.{attempt}",
    }
    raw = (BOUNCE_SAMPLES / name).read_bytes()
    for token, value in tokens.items():
        raw = raw.replace(token.encode(), value.encode())
    return re.sub(rb"\r?\n", b"\r\n", raw)  # SMTP lines end in CRLF


async def send_bounce(port: int, raw: bytes, to: str) -> None:
    """Hand ``raw`` to the bounce receiver over SMTP, as a mail server returns a bounce
    (null reverse-path ``MAIL FROM:<>``)."""
    client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, timeout=10)
    async with client:
        await client.mail("")
        try:
            await client.rcpt(to)
        except aiosmtplib.SMTPRecipientRefused as exc:
            raise aiosmtplib.SMTPRecipientsRefused([exc]) from exc
        await client.data(raw)


async def rows_naming(db: Database, address: str) -> dict[str, int]:
    """Rows of each table that still hold ``address`` in any text we keep."""
    texts: dict[str, tuple[Table, list[Any]]] = {
        "invites": (
            invites,
            [
                invites.c.email,
                invites.c.name,
                invites.c.sender_email,
                invites.c.message,
                invites.c.occasion_title,
                invites.c.occasion_place,
            ],
        ),
        "invite_events": (invite_events, [invite_events.c.error]),
        "accounts": (accounts, [accounts.c.email]),
        "signin_tokens": (signin_tokens, [signin_tokens.c.email]),
        "bounces": (bounces, [bounces.c.diagnostic, bounces.c.reason]),
        "idempotency_keys": (idempotency_keys, [idempotency_keys.c.body]),
        "webhook_deliveries": (
            webhook_deliveries,
            [webhook_deliveries.c.email, webhook_deliveries.c.body, webhook_deliveries.c.snippet],
        ),
    }
    found = {}
    async with db.read() as conn:
        for name, (table, columns) in texts.items():
            where = or_(*(func.lower(column).like(f"%{address}%") for column in columns))
            query = select(func.count()).select_from(table).where(where)
            found[name] = int((await conn.execute(query)).scalar_one())
        raws = (await conn.execute(select(bounces.c.raw))).scalars().all()
    found["bounces.raw"] = sum(address.encode() in bytes(raw).lower() for raw in raws)
    return found


async def app_command(
    settings: Settings, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m app ARGS`` as an operator runs it, with ``settings`` (and ``env``). Off the
    event loop: the test's own app may be between a statement and its commit on SQLite (a group
    commit awaits its commit), and a loop blocked by the command would keep the write lock the
    command itself waits for."""
    from tests.fixtures import process_env

    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "app", *args],
        env=process_env(settings, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )
