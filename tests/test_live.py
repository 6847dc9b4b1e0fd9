"""The SSE stream on a real uvicorn process: scoped to the sender, resumable, never silent."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app import invites as transitions
from app.config import Settings
from app.db import Database
from tests.conftest import drain, process_env
from tests.helpers import post_invite
from tests.services import AppProcess, free_port, wait_for_port


@dataclass
class Sse:
    event: str
    id: str
    data: str


@pytest.fixture
def web(settings: Settings, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    with AppProcess.web(process_env(settings), tmp_path / "web.log", port):
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"


async def read_events(response: httpx.Response) -> AsyncIterator[Sse]:
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "event" in fields:
                yield Sse(fields["event"][0], fields.get("id", [""])[0], "\n".join(fields["data"]))
            fields = {}
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))


async def collect(
    client: httpx.AsyncClient,
    until: int,
    seconds: float = 8.0,
    stop_at: str = "",
    **kwargs: object,
) -> list[Sse]:
    """Open the stream and gather row events until ``until`` of them came, or one has the
    status ``stop_at`` (or time runs out)."""
    got: list[Sse] = []

    async def run() -> None:
        async with client.stream("GET", "/convites/eventos", **kwargs) as response:  # type: ignore[arg-type]
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in read_events(response):
                if event.event == "convite":
                    got.append(event)
                if len(got) >= until or (stop_at and f'data-status="{stop_at}"' in event.data):
                    return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run(), seconds)
    return got


def statuses(events: list[Sse]) -> list[str]:
    return [re.search(r'data-status="(\w+)"', event.data).group(1) for event in events]  # type: ignore[union-attr]


async def test_a_new_stream_sends_the_senders_rows_and_never_another_senders(web: str) -> None:
    async with httpx.AsyncClient(base_url=web) as ana, httpx.AsyncClient(base_url=web) as bia:
        mine = await post_invite(ana, "ana@exemplo.com")
        theirs = await post_invite(bia, "bia@exemplo.com")

        events = await collect(ana, until=2, seconds=3)

    assert [mine["id"] in event.data for event in events] == [True]
    assert all(theirs["id"] not in event.data for event in events)
    assert events[0].id.isdigit() and f'data-evento="{events[0].id}"' in events[0].data


async def test_a_stream_resumes_after_last_event_id_and_sends_each_change_once(
    web: str, settings: Settings, db: Database
) -> None:
    async with httpx.AsyncClient(base_url=web) as client:
        created = await post_invite(client, "caio@exemplo.com")
        cursor = await transitions.last_event_id(db, (await _sender(db, created["id"])))
        listening = asyncio.create_task(
            collect(client, until=3, stop_at="enviado", headers={"Last-Event-ID": str(cursor)})
        )
        await asyncio.sleep(0.5)
        await drain(settings)  # pendente → enviando → enviado, published on the sender channel
        events = await listening

    # Only what is newer than the cursor, each change once, in order.
    assert statuses(events) in (["enviando", "enviado"], ["enviado"])
    ids = [int(event.id) for event in events]
    assert ids == sorted(set(ids)) and ids[0] > cursor


async def test_a_change_nobody_announced_still_reaches_the_stream(
    web: str, settings: Settings, db: Database
) -> None:
    async with httpx.AsyncClient(base_url=web) as client:
        created = await post_invite(client, "duda@exemplo.com")
        cursor = await transitions.last_event_id(db, (await _sender(db, created["id"])))
        listening = asyncio.create_task(collect(client, until=1, params={"depois": cursor}))
        await asyncio.sleep(0.5)
        # A transition whose Redis message was lost: only the periodic check can find it.
        await transitions.claim_for_sending(db, created["id"], 1, lease_seconds=60)
        events = await listening

    assert statuses(events) == ["enviando"]


async def _sender(db: Database, public_id: str) -> str:
    invite = await transitions.get_invite_by_public_id(db, public_id)
    assert invite is not None
    return invite.sender_id
