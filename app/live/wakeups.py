"""Announcing committed changes on the sender's Redis channel: the one way to wake a page."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.batching import Batcher
from app.invites.records import Change

log = logging.getLogger(__name__)

CHANNEL_PREFIX = "convites:sender:"


def sender_channel(sender_id: str) -> str:
    return CHANNEL_PREFIX + sender_id


async def _publish_each(redis: Redis, changes: Sequence[Change]) -> list[None]:
    async with redis.pipeline(transaction=False) as pipe:
        for change in changes:
            pipe.publish(sender_channel(change.invite.sender_id), str(change.event_id))
        await pipe.execute()
    return [None] * len(changes)


class Announcer:
    """Wake-ups for committed changes: concurrent callers' go out in one pipeline.

    A Redis outage is logged, not raised: the row and its event are committed, and the live
    hub's periodic check rings the open pages anyway (``app.live.hub``).

    In a web process, ``ring_here`` (its hub's ``ring``) rings the process's own streams of
    the sender at once, before the message goes out: they need not wait for the round trip
    through Redis, which under load waits its turn in the same busy loop. The published message
    still rings every other process's streams (and this one's again, which reads nothing new).
    """

    def __init__(self, redis: Redis, ring_here: Callable[[str], None] | None = None) -> None:
        self._batcher: Batcher[Redis] = Batcher(lambda: nullcontext(redis), isolate_failures=False)
        self._ring_here = ring_here

    async def announce(self, change: Change | None) -> None:
        if change is None:
            return
        if self._ring_here is not None:
            self._ring_here(change.invite.sender_id)
        try:
            await self._batcher.run(_publish_each, change)
        except (RedisError, OSError) as exc:
            log.warning(
                "could not announce a change",
                extra={
                    "invite": change.invite.public_id,
                    "event_id": change.event_id,
                    "error": str(exc),
                },
            )

    async def announce_all(self, changes: Iterable[Change | None]) -> None:
        await asyncio.gather(*(self.announce(change) for change in changes))

    async def close(self) -> None:
        await self._batcher.close()
