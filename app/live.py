"""Wake-ups for the browser: every committed transition is announced on the sender's channel.

The worker (and the web, for its own transitions) ``announce`` each change; each web process
runs one ``Hub`` that listens to every sender's channel and rings the open streams of that
sender (``app/web/events.py``).

The message carries only the event id; the SSE stream reads the event rows from the database,
which stays the single source of truth. A lost wake-up delays a screen update, never a fact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from typing import TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app import invites as transitions
from app.batching import Batcher
from app.db import Database
from app.heartbeat import live_workers
from app.invites import Change

log = logging.getLogger(__name__)
T = TypeVar("T")

CHANNEL_PREFIX = "convites:sender:"
CLOSE_TIMEOUT_SECONDS = 5.0
# On PostgreSQL two transactions can commit their event rows out of id order (id 10 visible
# before id 9); within this many seconds of being written every event row is visible.
SETTLE_SECONDS = 2.0
START_SECONDS = 2.0


def sender_channel(sender_id: str) -> str:
    return CHANNEL_PREFIX + sender_id


async def announce(redis: Redis, changes: Iterable[Change | None]) -> None:
    """Publish each change on its sender's channel; a Redis outage is logged, not raised."""
    for change in changes:
        if change is None:
            continue
        try:
            await redis.publish(sender_channel(change.invite.sender_id), str(change.event_id))
        except (RedisError, OSError) as exc:
            _not_announced(change, exc)


class Wakeup:
    """One open stream's doorbell: set when its sender may have news, cleared by the stream.

    Waiting costs no task: a timer handle rings the bell when the period is up (one stream
    waits after every wake-up, and a web process holds thousands of streams).
    """

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


class PausedCheck:
    """Whether sending is paused (no fresh worker heartbeat), shared by a process's streams.

    Every open stream asks after each wake-up and the answer is the same for all of them, so
    Redis is read at most once per ``max_age`` seconds per process, one reader at a time.
    """

    def __init__(self, redis: Redis, heartbeat_seconds: float, max_age: float = 1.0) -> None:
        self.redis = redis
        self.heartbeat_seconds = heartbeat_seconds
        self.max_age = min(max_age, heartbeat_seconds / 2)
        self._value: bool | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    def _fresh(self) -> bool:
        return self._value is not None and time.monotonic() - self._read_at < self.max_age

    async def __call__(self) -> bool:
        if not self._fresh():
            async with self._lock:
                if not self._fresh():
                    asked_at = time.monotonic()
                    self._value = await sending_paused(self.redis, self.heartbeat_seconds)
                    self._read_at = asked_at
        assert self._value is not None
        return self._value


class Hub:
    """One Redis pub/sub connection per web process, fanned out to the open streams by sender.

    A message only rings the streams' doorbells: each stream then reads the event rows from the
    database. If Redis drops, every stream is rung (so it re-reads) and the hub reconnects with
    a short back-off.

    A wake-up can still be lost (a worker that could not publish while Redis was down). Every
    ``check_seconds`` the hub reads which senders have events newer than the last check — one
    primary-key range read per process, however many streams are open — and rings their
    streams. A stream reads the database only when rung, so a thousand idle streams cost
    nothing between changes.
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
        self._streams: dict[str, set[Wakeup]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Subscribe, and take the newest event id before any stream opens: every event after
        it is the periodic check's business."""
        floor: int | None = None
        try:
            floor = await asyncio.wait_for(transitions.last_event_id(self.db), START_SECONDS)
        except Exception as exc:  # the web serves without it; the check retries
            log.warning("live check starts without a floor", extra={"error": repr(exc)})
        self._tasks = [
            asyncio.create_task(self._run(), name="live-hub"),
            asyncio.create_task(self._check_forever(floor), name="live-hub-check"),
        ]

    async def close(self) -> None:
        """Stop listening and ring every stream so each one ends cleanly."""
        self.closed = True
        self._ring_all()
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

    @property
    def stream_count(self) -> int:
        return sum(len(streams) for streams in self._streams.values())

    def _ring_all(self) -> None:
        for streams in self._streams.values():
            for wakeup in streams:
                wakeup.ring()

    def _ring(self, sender_id: str) -> None:
        for wakeup in self._streams.get(sender_id, ()):
            wakeup.ring()

    def _deliver(self, channel: bytes | str) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        self._ring(name.removeprefix(CHANNEL_PREFIX))

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

    async def _check_forever(self, floor: int | None) -> None:
        """Every ``check_seconds``, ring the senders with events above the floor.

        On PostgreSQL an event can commit after a newer id is visible, so the floor trails:
        it moves past the newest id of a read only once a later read has *started* at least
        ``settle_seconds`` after it (every id below that newest was committed by then, and that
        later read, still on the old floor, saw it). The floor taken at start (or after the
        database came back) cannot trail: one ring of every stream, a settle time later, lets
        each stream re-read from its own cursor instead.
        """
        seen: deque[tuple[float, int]] = deque()  # (read finished, newest id it saw)
        catch_up_at = None if floor is None else self._catch_up_time()
        previous_start: float | None = None
        while not self.closed:
            await asyncio.sleep(self.check_seconds)
            started = time.monotonic()
            try:
                if floor is None:  # the database was away at start: anything may be missed
                    floor = await self._bounded_read(transitions.last_event_id(self.db))
                    self._ring_all()
                    catch_up_at = self._catch_up_time()
                    continue
                while seen and (self.db.is_sqlite or self._settled(seen[0][0], previous_start)):
                    floor = max(floor, seen.popleft()[1])
                newest = await self._bounded_read(
                    transitions.senders_with_events_after(self.db, floor)
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the check die: lost wake-ups need it
                log.warning("live check could not read the database", extra={"error": repr(exc)})
                continue
            for sender_id in newest:
                self._ring(sender_id)
            if catch_up_at is not None and started >= catch_up_at:
                self._ring_all()
                catch_up_at = None
            seen.append((time.monotonic(), max(newest.values(), default=floor)))
            previous_start = started

    def _settled(self, read_at: float, later_read_started: float | None) -> bool:
        return (
            later_read_started is not None and later_read_started - read_at >= self.settle_seconds
        )

    def _catch_up_time(self) -> float | None:
        return None if self.db.is_sqlite else time.monotonic() + self.settle_seconds

    async def _bounded_read(self, read: Awaitable[T]) -> T:
        return await asyncio.wait_for(read, self.check_seconds + self.settle_seconds)


async def sending_paused(redis: Redis, heartbeat_seconds: float) -> bool:
    """True when no worker has beaten recently (or Redis, which carries the work, is down)."""
    try:
        return not await live_workers(redis, heartbeat_seconds)
    except (RedisError, OSError) as exc:
        log.warning("could not read worker heartbeats", extra={"error": str(exc)})
        return True


def _not_announced(change: Change, exc: Exception) -> None:
    # The row and its event are committed; the hub's periodic check rings the open pages.
    log.warning(
        "could not announce a change",
        extra={"invite": change.invite.public_id, "event_id": change.event_id, "error": str(exc)},
    )


async def _publish_each(redis: Redis, changes: Sequence[Change]) -> list[None]:
    async with redis.pipeline(transaction=False) as pipe:
        for change in changes:
            pipe.publish(sender_channel(change.invite.sender_id), str(change.event_id))
        await pipe.execute()
    return [None] * len(changes)


class Announcer:
    """``announce`` for hot paths: concurrent callers' wake-ups go out in one pipeline.

    Same promise as ``announce``: a Redis outage is logged, not raised.
    """

    def __init__(self, redis: Redis) -> None:
        self._batcher: Batcher[Redis] = Batcher(lambda: nullcontext(redis), isolate_failures=False)

    async def announce(self, change: Change | None) -> None:
        if change is None:
            return
        try:
            await self._batcher.run(_publish_each, change)
        except (RedisError, OSError) as exc:
            _not_announced(change, exc)

    async def close(self) -> None:
        await self._batcher.close()
