"""Alarms, judged by the web process (not the workers), so they fire when every worker is down.

Each problem of the health summary is an alarm: one log line when it appears, one when it clears.
Every web process judges on its own, so alert rules should group by the ``alarm`` field.
"""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis

from app.config import Settings
from app.ops.health import Health, Problem, check_health
from app.ops.metrics import SseConnections
from app.storage.database import Database

log = logging.getLogger("app.ops.alarms")


class Alarms:
    """Remembers which alarms are raised, to log only the changes."""

    def __init__(self) -> None:
        self.raised: dict[str, Problem] = {}

    def evaluate(self, health: Health) -> None:
        """Log each alarm that appeared or cleared since the last evaluation."""
        current = {problem.code: problem for problem in health.problems}
        for code, problem in current.items():
            if code not in self.raised:
                log.log(
                    problem.level,
                    f"alarm raised: {code}",
                    extra={"alarm": code, "alarm_state": "raised", "detail": problem.message},
                )
        for code, problem in self.raised.items():
            if code not in current:
                log.info(
                    f"alarm cleared: {code}",
                    extra={"alarm": code, "alarm_state": "cleared", "detail": problem.message},
                )
        self.raised = current


async def monitor_forever(
    settings: Settings, db: Database, redis: Redis, sse: SseConnections
) -> None:
    """The web's background task: judge the alarms and share the SSE count, every interval."""
    alarms = Alarms()
    while True:
        try:
            alarms.evaluate(await check_health(settings, db, redis))
        except Exception:
            log.exception("alarm evaluation failed")
        try:
            await sse.publish(redis)
        except Exception as exc:
            # Redis being down is already an alarm of its own; say it once per round, quietly.
            log.debug("could not publish the SSE count", extra={"error": repr(exc)})
        await asyncio.sleep(settings.alarm_check_seconds)
