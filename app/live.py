"""Wake-ups for the browser: every committed transition is announced on the sender's channel.

The message carries only the event id; the SSE stream reads the event rows from the database,
which stays the single source of truth. A lost wake-up delays a screen update, never a fact.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from contextlib import nullcontext

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.batching import Batcher
from app.invites import Change

log = logging.getLogger(__name__)


def sender_channel(sender_id: str) -> str:
    return f"convites:sender:{sender_id}"


async def announce(redis: Redis, changes: Iterable[Change | None]) -> None:
    """Publish each change on its sender's channel; a Redis outage is logged, not raised."""
    for change in changes:
        if change is None:
            continue
        try:
            await redis.publish(sender_channel(change.invite.sender_id), str(change.event_id))
        except (RedisError, OSError) as exc:
            _not_announced(change, exc)


def _not_announced(change: Change, exc: Exception) -> None:
    # The row and its event are committed; open pages catch up on their next check.
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
