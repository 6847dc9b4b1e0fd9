"""``ratelimit.take`` with amounts: a batch fits its limits whole or counts nowhere (real Redis)."""

from __future__ import annotations

from redis.asyncio import Redis

from app.ratelimit import Limit, take, used


async def test_a_batch_counts_its_size_or_nothing_and_says_how_much_room_is_left(
    redis: Redis,
) -> None:
    day = Limit("sender_day", "t:dia", 10, 60)
    recipient = Limit("recipient_day", "t:ana", 3, 60)

    first = await take(redis, [day, recipient], [6, 1])
    refused = await take(redis, [day, recipient], [5, 1])

    assert first is None
    assert refused is not None and (refused.limit.kind, refused.room) == ("sender_day", 4)
    assert 1 <= refused.retry_after <= 60
    assert await used(redis, [day, recipient]) == [6, 1]  # the refused batch counted nowhere


async def test_one_address_twice_in_a_batch_counts_twice_on_its_recipient_limit(
    redis: Redis,
) -> None:
    day = Limit("sender_day", "t:dia", 100, 60)
    recipient = Limit("recipient_day", "t:bia", 1, 60)

    refused = await take(redis, [day, recipient, recipient], [2, 1, 1])

    assert refused is not None and refused.limit.kind == "recipient_day"
    assert await used(redis, [day, recipient]) == [0, 0]
