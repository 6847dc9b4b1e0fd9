"""Who may open ``/operacao``: the token's fingerprint, failed-token throttling, logouts.

- The login cookie holds an HMAC (keyed with ``SECRET_KEY``) of ``OPS_TOKEN``, never a plain
  hash an offline guesser could test candidate tokens against; changing either signs everyone
  out. It also holds a random session id, so "Sair" can be remembered by the server.
- Failed tokens (form or bearer) are counted per client network in Redis (an IPv4 address, an
  IPv6 /64: ``app.web.common.client_network``); past ``FAILURES_ALLOWED`` in
  ``FAILURE_WINDOW_SECONDS`` every attempt from that network gets 429, right or wrong, until
  the window ends.
- "Sair" records the session id in Redis until the cookie would have expired anyway.

Redis down: both fail open (logged), like the send limits. The panel is what on-call opens
during an incident, and a Redis outage is one; the cookie still expires after 12 hours.
"""

from __future__ import annotations

import logging
import secrets

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.signing import FULL, Purpose, sign

log = logging.getLogger(__name__)

PREFIX = "convites:operacao"
FAILURES_ALLOWED = 10
FAILURE_WINDOW_SECONDS = 15 * 60


def fingerprint(secret_key: str, token: str) -> str:
    """What the cookie carries instead of the token: HMAC-SHA256 keyed with ``SECRET_KEY``."""
    return sign(secret_key, Purpose.OPERATOR_COOKIE, token, length=FULL, encoding="hex")


def new_session_id() -> str:
    return secrets.token_urlsafe(16)


def _failures_key(network: str) -> str:
    return f"{PREFIX}:falhas:{network}"


def _logout_key(session_id: str) -> str:
    return f"{PREFIX}:saiu:{session_id}"


async def throttled_for(redis: Redis, network: str) -> int:
    """Seconds this network must wait before trying a token again (0: it may try now)."""
    try:
        failures = await redis.get(_failures_key(network))
        if failures is None or int(failures) < FAILURES_ALLOWED:
            return 0
        ttl = int(await redis.ttl(_failures_key(network)))
    except (RedisError, OSError) as exc:
        log.warning("operator throttle unavailable; attempt allowed", extra={"error": str(exc)})
        return 0
    return max(1, ttl)


async def record_failure(redis: Redis, network: str) -> None:
    """Count one wrong token from ``network``; the window starts at the first one."""
    key = _failures_key(network)
    try:
        async with redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, FAILURE_WINDOW_SECONDS, nx=True)
            await pipe.execute()
    except (RedisError, OSError) as exc:
        log.warning("could not count a failed operator token", extra={"error": str(exc)})


async def remember_logout(redis: Redis, session_id: str, seconds: int) -> None:
    try:
        await redis.set(_logout_key(session_id), "1", ex=seconds)
    except (RedisError, OSError) as exc:
        log.warning("could not record an operator logout", extra={"error": str(exc)})


async def logged_out(redis: Redis, session_id: str) -> bool:
    try:
        return bool(await redis.exists(_logout_key(session_id)))
    except (RedisError, OSError) as exc:
        log.warning("operator logouts unavailable; cookie accepted", extra={"error": str(exc)})
        return False
