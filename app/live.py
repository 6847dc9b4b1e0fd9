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
from collections.abc import Iterable, Iterator

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.heartbeat import live_workers
from app.invites import Change

log = logging.getLogger(__name__)

CHANNEL_PREFIX = "convites:sender:"


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
            # The row and its event are committed; open pages catch up on their next check.
            log.warning(
                "could not announce a change",
                extra={
                    "invite": change.invite.public_id,
                    "event_id": change.event_id,
                    "error": str(exc),
                },
            )


class Wakeup:
    """One open stream's doorbell: set when its sender may have news, cleared by the stream."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def ring(self) -> None:
        self._event.set()

    async def wait(self, seconds: float) -> bool:
        """Wait for a ring or ``seconds``; True if it rang. Clears the bell either way."""
        try:
            await asyncio.wait_for(self._event.wait(), seconds)
        except TimeoutError:
            return False
        finally:
            self._event.clear()
        return True


class Hub:
    """One Redis pub/sub connection per web process, fanned out to the open streams by sender.

    A message only rings the streams' doorbells: each stream then reads the event rows from the
    database. If Redis drops, every stream is rung (so it re-reads) and the hub reconnects with
    a short back-off; the streams' periodic checks cover whatever happened meanwhile.
    """

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.closed = False
        self._streams: dict[str, set[Wakeup]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="live-hub")

    async def close(self) -> None:
        """Stop listening and ring every stream so each one ends cleanly."""
        self.closed = True
        self._ring_all()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

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

    def _deliver(self, channel: bytes | str) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        sender_id = name.removeprefix(CHANNEL_PREFIX)
        for wakeup in self._streams.get(sender_id, ()):
            wakeup.ring()

    async def _run(self) -> None:
        delay = 0.5
        while not self.closed:
            client = Redis.from_url(self.redis_url, socket_connect_timeout=1)
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


async def sending_paused(redis: Redis, heartbeat_seconds: float) -> bool:
    """True when no worker has beaten recently (or Redis, which carries the work, is down)."""
    try:
        return not await live_workers(redis, heartbeat_seconds)
    except (RedisError, OSError) as exc:
        log.warning("could not read worker heartbeats", extra={"error": str(exc)})
        return True
