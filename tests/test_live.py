"""The SSE stream on a real uvicorn process: scoped to the sender, resumable, never silent."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from app.clock import utcnow
from app.config import Settings
from app.invites import queries, transitions
from app.invites.records import Invite
from app.live.hub import Hub
from app.live.wakeups import Announcer, sender_channel
from app.storage.database import Database
from app.storage.tables import invite_events
from tests.fixtures import BACKEND, SENDER, drain, process_env
from tests.helpers import announce, invite_row, post_invite
from tests.services import AppProcess, RedisServer, ScriptedSmtp, free_port, wait_for_port
from tests.signing_in import sign_in
from tests.waiting import eventually


@dataclass
class Sse:
    event: str
    id: str
    data: str


@dataclass
class Web:
    process: AppProcess
    url: str


@pytest.fixture
def web_process(settings: Settings, tmp_path: Path) -> Iterator[Web]:
    port = free_port()
    with AppProcess.web(process_env(settings), tmp_path / "web.log", port) as process:
        wait_for_port(port)
        yield Web(process, f"http://127.0.0.1:{port}")


@pytest.fixture
def web(web_process: Web) -> str:
    return web_process.url


async def read_events(
    response: httpx.Response, opened: asyncio.Event | None = None
) -> AsyncIterator[Sse]:
    """The named events of the stream; ``opened`` is set at the end of the server's first
    block (its hello, sent once the stream is subscribed to its sender's wake-ups)."""
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line == "":
            if opened is not None:
                opened.set()
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
    opened: asyncio.Event | None = None,
    first_row: asyncio.Event | None = None,
    **kwargs: object,
) -> list[Sse]:
    """Open the stream and gather row events until ``until`` of them came, or one has the
    status ``stop_at`` (or time runs out); ``opened`` is set once the stream is subscribed,
    ``first_row`` once a row came (a new stream's snapshot has been read)."""
    got: list[Sse] = []

    async def run() -> None:
        async with client.stream("GET", "/convites/eventos", **kwargs) as response:  # type: ignore[arg-type]
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in read_events(response, opened):
                if event.event == "convite":
                    got.append(event)
                    if first_row is not None:
                        first_row.set()
                if len(got) >= until or (stop_at and f'data-status="{stop_at}"' in event.data):
                    return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run(), seconds)
    return got


def statuses(events: list[Sse]) -> list[str]:
    return [re.search(r'data-status="(\w+)"', event.data).group(1) for event in events]  # type: ignore[union-attr]


async def signed_in(
    http: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, email: str
) -> httpx.AsyncClient:
    """``http``, signed in as ``email`` (the link mail sent by an in-process burst worker)."""
    await sign_in(http, smtp, email, lambda: drain(settings))
    return http


async def test_a_new_stream_sends_the_senders_rows_and_never_another_senders(
    web: str, settings: Settings, smtp: ScriptedSmtp
) -> None:
    async with httpx.AsyncClient(base_url=web) as ana, httpx.AsyncClient(base_url=web) as bia:
        await signed_in(ana, settings, smtp, "ana.remetente@exemplo.com")
        await signed_in(bia, settings, smtp, "bia.remetente@exemplo.com")
        mine = await post_invite(ana, "ana@exemplo.com")
        theirs = await post_invite(bia, "bia@exemplo.com")

        events = await collect(ana, until=2, seconds=3)

    assert [mine["id"] in event.data for event in events] == [True]
    assert all(theirs["id"] not in event.data for event in events)
    assert events[0].id.isdigit() and f'data-evento="{events[0].id}"' in events[0].data


async def test_a_stream_resumes_after_last_event_id_and_sends_each_change_once(
    web: str, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    async with httpx.AsyncClient(base_url=web) as client:
        await signed_in(client, settings, smtp, SENDER)
        created = await post_invite(client, "caio@exemplo.com")
        cursor, listening = await listen_after_newest(
            client, db, created["id"], until=3, stop_at="enviado", header=True
        )
        await drain(settings)  # pendente → enviando → enviado, published on the sender channel
        events = await listening

    # Only what is newer than the cursor, each change once, in order.
    assert statuses(events) in (["enviando", "enviado"], ["enviado"])
    ids = [int(event.id) for event in events]
    assert ids == sorted(set(ids)) and ids[0] > cursor


async def test_a_change_nobody_announced_still_reaches_the_stream(
    web: str, settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    async with httpx.AsyncClient(base_url=web) as client:
        await signed_in(client, settings, smtp, SENDER)
        created = await post_invite(client, "duda@exemplo.com")
        _, listening = await listen_after_newest(client, db, created["id"], until=1)
        # A transition whose Redis message was lost: only the periodic check can find it.
        await transitions.claim_with_link(db, created["id"], 1, lease_seconds=60)
        events = await listening

    assert statuses(events) == ["enviando"]


async def listen_after_newest(
    client: httpx.AsyncClient,
    db: Database,
    public_id: str,
    *,
    header: bool = False,
    **collecting: Any,
) -> tuple[int, asyncio.Task[list[Sse]]]:
    """Start a stream from the sender's newest event (as ``Last-Event-ID`` or ``?depois=``)."""
    cursor = await queries.last_event_id(db, await _sender(db, public_id))
    where: dict[str, Any] = (
        {"headers": {"Last-Event-ID": str(cursor)}} if header else {"params": {"depois": cursor}}
    )
    opened = asyncio.Event()
    listening = asyncio.create_task(collect(client, opened=opened, **collecting, **where))
    await asyncio.wait_for(opened.wait(), 10)
    return cursor, listening


async def _sender(db: Database, public_id: str) -> str:
    invite = await invite_row(db, public_id)
    assert invite is not None
    return invite.sender_id


async def test_open_streams_end_cleanly_when_the_server_stops(
    settings: Settings, tmp_path: Path
) -> None:
    # A resting stream's periodic check is an hour away: only the shutdown ringing its doorbell
    # ends it before sse-starlette's grace period runs out and the response is cut.
    env = process_env(settings, WORKER_HEARTBEAT_SECONDS="3600")
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port) as process:
        wait_for_port(port)
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
            client.stream("GET", "/convites/eventos?depois=0") as response,
        ):
            lines = response.aiter_lines()
            assert await anext(lines) == ": ola"
            await asyncio.to_thread(process.stop)
            # The body ends (no exception): the response was completed, not cut.
            async for _ in lines:
                pass

    assert "returned without completing response" not in process.log()


async def test_the_hub_listens_again_after_redis_restarts(
    settings: Settings,
    db: Database,
    redis_server: RedisServer,
    tmp_path: Path,
    smtp: ScriptedSmtp,
) -> None:
    # A long periodic check: only a pub/sub wake-up can bring the change within the test.
    env = process_env(settings, WORKER_HEARTBEAT_SECONDS="30")
    port = free_port()
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await signed_in(client, settings, smtp, SENDER)
            created = await post_invite(client, "eli@exemplo.com")
            redis_server.stop()
            redis_server.start()
            publisher = Redis.from_url(redis_server.url)
            try:
                await _until_the_hub_listens(publisher)
                _, listening = await listen_after_newest(
                    client, db, created["id"], until=1, seconds=5
                )
                claim = await transitions.claim_with_link(db, created["id"], 1, 60)
                await announce(publisher, [claim.change if claim else None])
                events = await listening
            finally:
                await publisher.aclose()

    assert statuses(events) == ["enviando"]


async def _until_the_hub_listens(redis: Redis) -> None:
    async def subscribed() -> bool:
        return await redis.pubsub_numpat() >= 1

    await eventually(subscribed, what="the hub subscribes again")


async def test_a_sender_cannot_open_more_streams_than_the_cap(
    settings: Settings, tmp_path: Path, smtp: ScriptedSmtp
) -> None:
    port = free_port()
    env = process_env(settings, STREAMS_PER_SENDER="2")
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            await signed_in(client, settings, smtp, SENDER)  # one sender
            async with contextlib.AsyncExitStack() as open_streams:
                for _ in range(2):
                    response = await open_streams.enter_async_context(
                        client.stream("GET", "/convites/eventos")
                    )
                    assert response.status_code == 200
                refused = await client.get(
                    "/convites/eventos", headers={"Accept": "application/json"}
                )
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) > 0
            assert "abas" in refused.json()["erro"]

            # Closed streams give their slots back (once their generators have finished).
            async def opens() -> bool:
                async with client.stream("GET", "/convites/eventos") as again:
                    return again.status_code == 200

            await eventually(opens)


async def test_a_change_posted_through_one_web_process_reaches_a_stream_on_another(
    web: str, settings: Settings, tmp_path: Path, smtp: ScriptedSmtp
) -> None:
    port = free_port()
    with AppProcess.web(process_env(settings), tmp_path / "web-b.log", port):
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=web, timeout=10) as on_a:
            # One browser, one session cookie, valid on both processes.
            await signed_in(on_a, settings, smtp, SENDER)
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", cookies=on_a.cookies, timeout=10
            ) as on_b:
                opened = asyncio.Event()
                listening = asyncio.create_task(
                    collect(on_a, until=5, seconds=20, stop_at="enviado", opened=opened)
                )
                await asyncio.wait_for(opened.wait(), 10)
                created = await post_invite(on_b, "outra-aba@exemplo.com")
                await drain(settings)
                events = await listening

    assert all(created["id"] in event.data for event in events)
    assert statuses(events)[0] == "pendente" and statuses(events)[-1] == "enviado"


def _event_row(invite_id: int, sender_id: str, event_id: int) -> Any:
    """An ``INSERT`` of an event row with a chosen id (no wake-up is published for it)."""
    return invite_events.insert().values(
        id=event_id,
        invite_id=invite_id,
        sender_id=sender_id,
        status="enviando",
        attempt=1,
        created_at=utcnow(),
    )


async def _write_event(db: Database, invite_id: int, sender_id: str, event_id: int) -> None:
    async with db.write() as conn:
        await conn.execute(_event_row(invite_id, sender_id, event_id))


async def _invites_of_ana_and_bia(db: Database) -> tuple[Invite, Invite]:
    created = [
        await transitions.create_invite(
            db, sender_id=sender, email=f"{sender}@exemplo.com", name=None, correlation_id=""
        )
        for sender in ("ana", "bia")
    ]
    return created[0].invite, created[1].invite


async def test_the_hub_rings_only_the_senders_with_unannounced_events(
    settings: Settings, db: Database, redis: Redis
) -> None:
    ana, _ = await _invites_of_ana_and_bia(db)
    hub = Hub(settings.redis_url, db, check_seconds=0.1, settle_seconds=0.2)
    await hub.start()
    try:
        with hub.subscribe("ana") as for_ana, hub.subscribe("bia") as for_bia:
            await _until_the_hub_listens(redis)
            await asyncio.sleep(0.5)  # past the catch-up ring a settle time after start
            # Clear the bells (the hub rings every stream once when it first subscribes).
            await for_ana.wait(0.01)
            await for_bia.wait(0.01)
            await transitions.claim_with_link(db, ana.public_id, 1, lease_seconds=60)

            assert await for_ana.wait(2.0)
            assert not await for_bia.wait(0.5)
    finally:
        await hub.close()


async def test_a_change_the_web_commits_rings_its_own_streams_without_redis(
    settings: Settings, db: Database
) -> None:
    # The web's own changes (a POST's pendente) ring its streams at once: no round trip through
    # Redis, and not lost while Redis is down.
    ana, _ = await _invites_of_ana_and_bia(db)
    dead = Redis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=0.2)
    hub = Hub(settings.redis_url, db, check_seconds=60)
    announcer = Announcer(dead, ring_here=hub.ring)
    try:
        with hub.subscribe("ana") as for_ana, hub.subscribe("bia") as for_bia:
            claim = await transitions.claim_with_link(db, ana.public_id, 1, lease_seconds=60)
            await announcer.announce(
                claim.change if claim else None
            )  # Redis refuses: logged, not raised

            assert await for_ana.wait(0.01)  # rung before the announce returned
            assert not await for_bia.wait(0.01)
    finally:
        await dead.aclose()


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite ids are final at commit")
async def test_the_hub_rings_for_an_event_that_commits_after_a_newer_id(
    settings: Settings, db: Database, redis: Redis
) -> None:
    """PostgreSQL can show id 11 before id 10 commits: the check's floor trails by the settle
    time, so id 10 is still found."""
    ana, bia = await _invites_of_ana_and_bia(db)
    # A long settle time: the test's own pauses stay well inside it even on a loaded machine.
    hub = Hub(settings.redis_url, db, check_seconds=0.1, settle_seconds=5.0)
    await hub.start()
    try:
        with hub.subscribe("ana") as for_ana, hub.subscribe("bia") as for_bia:
            await _until_the_hub_listens(redis)
            await for_bia.wait(0.01)  # the ring every stream gets when the hub subscribes
            newest = await queries.last_event_id(db)
            await _write_event(db, bia.id, "bia", newest + 1000)  # the newer id, first
            assert await for_bia.wait(10)  # unannounced: only a check rings it, so one saw it
            await for_ana.wait(0.01)
            await _write_event(db, ana.id, "ana", newest + 500)  # the older id, late

            assert await for_ana.wait(2.0)
    finally:
        await hub.close()


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite ids are final at commit")
async def test_an_event_still_uncommitted_when_the_hub_starts_is_not_lost(
    settings: Settings, db: Database, redis: Redis
) -> None:
    """The floor read at start cannot trail: a lower id that commits after it is found by the
    one catch-up ring a settle time after start (each stream re-reads from its own cursor)."""
    ana, bia = await _invites_of_ana_and_bia(db)
    newest = await queries.last_event_id(db)
    hub = Hub(settings.redis_url, db, check_seconds=0.1, settle_seconds=1.0)
    try:
        with hub.subscribe("ana") as for_ana:
            async with db.write() as conn:  # ana's event, written but not yet committed
                await conn.execute(_event_row(ana.id, "ana", newest + 500))
                await _write_event(db, bia.id, "bia", newest + 1000)  # committed first
                await hub.start()  # its floor: newest + 1000
            await _until_the_hub_listens(redis)
            await for_ana.wait(0.01)  # the ring every stream gets when the hub subscribes

            assert await for_ana.wait(3.0)
    finally:
        await hub.close()


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite ids are final at commit")
async def test_a_snapshot_stream_still_sends_a_lower_id_that_commits_late(
    web: str, settings: Settings, db: Database, redis: Redis, smtp: ScriptedSmtp
) -> None:
    """A stream opens with a snapshot that includes id N+1000; id N+500, of another invite,
    commits only then. The snapshot's cursor is the sender's newest settled id, so the late
    change is not skipped."""
    async with httpx.AsyncClient(base_url=web, timeout=10) as client:
        await signed_in(client, settings, smtp, SENDER)
        first = await post_invite(client, "um@exemplo.com")
        second = await post_invite(client, "dois@exemplo.com")
        sender = await _sender(db, first["id"])
        one = await invite_row(db, first["id"])
        two = await invite_row(db, second["id"])
        assert one is not None and two is not None
        newest = await queries.last_event_id(db)
        async with db.write() as conn:  # the second invite's change, not yet committed
            await conn.execute(_event_row(two.id, sender, newest + 500))
            await _write_event(db, one.id, sender, newest + 1000)  # seen by the browser
            snapshot_read = asyncio.Event()
            listening = asyncio.create_task(
                collect(client, until=99, seconds=4, first_row=snapshot_read)
            )
            await asyncio.wait_for(snapshot_read.wait(), 10)
        await redis.publish(sender_channel(sender), str(newest + 500))
        events = await listening

    assert str(newest + 500) in [event.id for event in events], [e.id for e in events]
