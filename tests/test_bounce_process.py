"""``python -m app bounces`` as a real process: it listens on BOUNCE_LISTEN, beats in Redis,
records a bounce, and a SIGTERM stops it cleanly (its heartbeat gone: no alarm)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from redis.asyncio import Redis

from app.config import Settings
from app.invites import transitions
from app.invites.status import Status
from app.sending.heartbeat import BOUNCE_RECEIVERS
from app.storage.database import Database
from tests.fixtures import process_env
from tests.helpers import bounce_sample, invite_row, send_bounce, verp_address, wait_for_status
from tests.services import AppProcess, wait_for_port
from tests.waiting import eventually


async def test_the_receiver_process_records_a_bounce_and_stops_cleanly(
    settings: Settings, db: Database, redis: Redis, tmp_path: Path
) -> None:
    created = await transitions.create_invite(
        db, sender_id="s1", email="ana@exemplo.com", name=None, correlation_id="c-1"
    )
    claim = await transitions.claim_with_link(db, created.invite.public_id, 1, 60)
    assert claim is not None and await transitions.mark_sent(db, claim.change.invite)
    invite = await invite_row(db, created.invite.public_id)
    port = settings.bounce_listen[1]
    receiver = AppProcess.bounces(process_env(settings), tmp_path / "bounces.log").start()
    try:
        await asyncio.to_thread(wait_for_port, port, 30)
        raw = bounce_sample("microsoft.eml", invite, settings)

        await send_bounce(port, raw, verp_address(settings, invite.public_id))

        await wait_for_status(db, invite.public_id, Status.DEVOLVIDO)
        assert await redis.zcard(BOUNCE_RECEIVERS) == 1
    finally:
        code = await asyncio.to_thread(receiver.stop)
    assert code == 0, receiver.describe()

    async def left() -> bool:
        return await redis.zcard(BOUNCE_RECEIVERS) == 0

    await eventually(left, what="the stopped receiver leaves the heartbeat set")
