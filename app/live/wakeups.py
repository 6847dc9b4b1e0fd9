"""Announcing committed changes on the sender's Redis channel: the one way to wake a page."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.invites.records import Change

log = logging.getLogger(__name__)

CHANNEL_PREFIX = "convites:sender:"


def sender_channel(sender_id: str) -> str:
    return CHANNEL_PREFIX + sender_id


class Announcer:
    """Publishes each committed change on its sender's channel; an outage is logged, not raised
    (the hub's periodic check rings the pages anyway). ``ring_here`` rings this process's own
    streams at once, without the round trip through Redis."""

    def __init__(self, redis: Redis, ring_here: Callable[[str], None] | None = None) -> None:
        self._redis = redis
        self._ring_here = ring_here

    async def announce(self, change: Change | None) -> None:
        if change is None:
            return
        if self._ring_here is not None:
            self._ring_here(change.invite.sender_id)
        try:
            await self._redis.publish(sender_channel(change.invite.sender_id), str(change.event_id))
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
