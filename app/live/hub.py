"""Each web process's one Redis pub/sub connection, fanned out to the open streams by sender."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterator
from typing import TypeVar

import anyio
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app import clock
from app.invites import queries
from app.live.settle import SETTLE_SECONDS, TrailingFloor
from app.live.wakeups import CHANNEL_PREFIX
from app.storage.database import Database

log = logging.getLogger(__name__)
T = TypeVar("T")

CLOSE_TIMEOUT_SECONDS = 5.0
START_SECONDS = 2.0


class Wakeup:
    """One open stream's doorbell: set when its sender may have news, cleared by the stream.
    Waiting costs no task (a timer handle rings it): a process holds thousands of streams."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._rang = False

    def ring(self) -> None:
        self._rang = True
        self._event.set()

    async def wait(self, seconds: float) -> bool:
        """Wait for a ring or ``seconds``; True if it rang. Clears the bell either way."""
        timer = asyncio.get_running_loop().call_later(seconds, self._event.set)
        try:
            await self._event.wait()
        finally:
            timer.cancel()
            self._event.clear()
        rang, self._rang = self._rang, False
        return rang


class Hub:
    """One Redis pub/sub connection per web process, fanned out to the open streams by sender.

    A message only rings doorbells; each stream then reads the database. If Redis drops,
    every stream is rung and the hub reconnects. For wake-ups that were lost (a worker could
    not publish), every ``check_seconds`` one range read finds the senders with newer events
    and rings their streams; the server stopping rings them all, so each stream ends.
    """

    def __init__(
        self,
        redis_url: str,
        db: Database,
        check_seconds: float,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        self.redis_url = redis_url
        self.db = db
        self.check_seconds = check_seconds
        self.settle_seconds = settle_seconds
        self.closed = False
        self.streams_ending = False  # the server is stopping: every stream ends
        # Every response gets this ``shutdown_event``: one waiter rings every stream at once,
        # so a resting stream ends cleanly instead of being cut.
        self.server_stopping = anyio.Event()
        self._streams: dict[str, set[Wakeup]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Subscribe, and take the newest event id before any stream opens: every event after
        it is the periodic check's business."""
        floor: int | None = None
        try:
            floor = await asyncio.wait_for(queries.last_event_id(self.db), START_SECONDS)
        except Exception as exc:  # the web serves without it; the check retries
            log.warning("live check starts without a floor", extra={"error": repr(exc)})
        self._tasks = [
            asyncio.create_task(self._run(), name="live-hub"),
            asyncio.create_task(self._check_forever(floor), name="live-hub-check"),
            asyncio.create_task(self._end_streams_when_stopping(), name="live-hub-stopping"),
        ]

    async def _end_streams_when_stopping(self) -> None:
        await self.server_stopping.wait()
        self.end_streams()

    def end_streams(self) -> None:
        """Ring every stream so each one ends cleanly (the server is stopping)."""
        self.streams_ending = True
        self._ring_all()

    async def close(self) -> None:
        """Stop listening and ring every stream so each one ends cleanly."""
        self.closed = True
        self.end_streams()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # Bounded: a Redis that stopped answering must not hold up the server's shutdown.
            await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_SECONDS)

    @contextlib.contextmanager
    def subscribe(self, sender_id: str) -> Iterator[Wakeup]:
        wakeup = Wakeup()
        self._streams.setdefault(sender_id, set()).add(wakeup)
        try:
            yield wakeup
        finally:
            streams = self._streams.get(sender_id, set())
            streams.discard(wakeup)
            if not streams:
                self._streams.pop(sender_id, None)

    def _ring_all(self) -> None:
        for streams in self._streams.values():
            for wakeup in streams:
                wakeup.ring()

    def ring(self, sender_id: str) -> None:
        """Ring this process's open streams of ``sender_id`` (a change it committed itself)."""
        for wakeup in self._streams.get(sender_id, ()):
            wakeup.ring()

    def _deliver(self, channel: bytes | str) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        self.ring(name.removeprefix(CHANNEL_PREFIX))

    async def _run(self) -> None:
        delay = 0.5
        while not self.closed:
            client = Redis.from_url(self.redis_url, socket_connect_timeout=1, socket_timeout=5)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(CHANNEL_PREFIX + "*")
                # Anything published while we were away is in the database: re-read now.
                self._ring_all()
                delay = 0.5
                while not self.closed:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] == "pmessage":
                        self._deliver(message["channel"])
            except (RedisError, OSError) as exc:
                log.warning("live updates lost Redis; reconnecting", extra={"error": str(exc)})
                self._ring_all()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            finally:
                await pubsub.aclose()
                await client.aclose()

    async def _check_forever(self, start_floor: int | None) -> None:
        """Every ``check_seconds``, ring the senders with events above the floor
        (``TrailingFloor``: on PostgreSQL it trails, see ``app.live.settle``)."""
        floor = None if start_floor is None else self._floor(start_floor)
        while not self.closed:
            await asyncio.sleep(self.check_seconds)
            started = clock.monotonic()
            try:
                if floor is None:  # the database was away at start: anything may be missed
                    floor = self._floor(await self._bounded_read(queries.last_event_id(self.db)))
                    self._ring_all()
                    continue
                newest = await self._bounded_read(
                    queries.senders_with_events_after(self.db, floor.before_read())
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the check die: lost wake-ups need it
                log.warning("live check could not read the database", extra={"error": repr(exc)})
                continue
            for sender_id in newest:
                self.ring(sender_id)
            if floor.catch_up_due(started):
                self._ring_all()
            floor.after_read(started, max(newest.values(), default=None))

    def _floor(self, value: int) -> TrailingFloor:
        return TrailingFloor(value, exact=self.db.is_sqlite, settle_seconds=self.settle_seconds)

    async def _bounded_read(self, read: Awaitable[T]) -> T:
        return await asyncio.wait_for(read, self.check_seconds + self.settle_seconds)
