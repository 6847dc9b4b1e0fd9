"""Wake-ups for the browser: every committed transition is announced on the sender's channel.

The message carries only the event id; the SSE stream reads the event rows from the database,
which stays the single source of truth. A lost wake-up delays a screen update, never a fact.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from redis.asyncio import Redis
from redis.exceptions import RedisError

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
            # The row and its event are committed; open pages catch up on their next check.
            log.warning(
                "could not announce a change",
                extra={
                    "invite": change.invite.public_id,
                    "event_id": change.event_id,
                    "error": str(exc),
                },
            )
