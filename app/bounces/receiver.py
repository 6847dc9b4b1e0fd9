"""``python -m app bounces``: the SMTP server bounces come back to (aiosmtpd, ``BOUNCE_LISTEN``).

It accepts mail only for the VERP addresses of ``RETURN_PATH`` (anything else: 550) and hands
each message to ``app.bounces.store.receive``. A bounce it cannot record right now (the
database is down) is written to a spool folder and refused with a 451, so the sending server
tries again: never lost, never a crash. While it runs it beats in Redis, so ``/saude`` can tell
a receiver that died from one that was never started.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP
from redis.asyncio import Redis

from app.bounces.addresses import public_id_of
from app.bounces.store import receive
from app.config import VAR_DIR, Settings
from app.live.wakeups import Announcer
from app.sending.heartbeat import BOUNCE_RECEIVER_SECONDS, BOUNCE_RECEIVERS, beat, forget
from app.storage.database import Database

log = logging.getLogger(__name__)

MAX_BOUNCE_BYTES = 10 * 1024 * 1024


class BounceHandler:
    """aiosmtpd handler: VERP recipients only; each message recorded before the 250."""

    def __init__(self, db: Database, announcer: Announcer, return_path: str, spool: Path) -> None:
        self.db = db
        self.announcer = announcer
        self.return_path = return_path
        self.spool = spool

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if public_id_of(self.return_path, address) is None:
            log.info("refused a recipient that is no bounce address", extra={"recipient": address})
            return "550 5.1.1 No such mailbox: this server only takes bounces of Convites"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw: bytes = envelope.original_content or envelope.content
        try:
            for recipient in envelope.rcpt_tos:
                received = await receive(self.db, raw, recipient, self.return_path)
                await self.announcer.announce(received.change)
        except Exception:
            path = self._spool(raw)
            log.exception(
                "could not record a bounce; kept it and asked to retry",
                extra={"spooled": str(path)},
            )
            return "451 4.3.0 Could not record the bounce now; please try again later"
        return "250 2.0.0 Bounce recorded"

    def _spool(self, raw: bytes) -> Path:
        self.spool.mkdir(parents=True, exist_ok=True)
        path = self.spool / f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.eml"
        path.write_bytes(raw)
        return path


async def _beat_forever(redis: Redis, receiver_id: str) -> None:
    while True:
        try:
            await beat(redis, BOUNCE_RECEIVERS, receiver_id)
        except Exception as exc:
            log.warning("bounce receiver heartbeat failed", extra={"error": repr(exc)})
        await asyncio.sleep(BOUNCE_RECEIVER_SECONDS)


@asynccontextmanager
async def bounce_receiver(settings: Settings, spool: Path | None = None) -> AsyncIterator[int]:
    """The receiver listening on ``settings.bounce_listen``; yields the port it listens on.

    ``spool``: where bounces that could not be recorded wait (default ``var/bounces-spool``).
    """
    db = Database(settings.database_url)
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=1, socket_timeout=2)
    announcer = Announcer(redis)
    handler = BounceHandler(db, announcer, settings.return_path, spool or VAR_DIR / "bounces-spool")
    host, port = settings.bounce_listen
    greeting_name = socket.getfqdn()  # once: a DNS lookup per connection would stall the loop
    server = await asyncio.get_running_loop().create_server(
        lambda: SMTP(
            handler,
            data_size_limit=MAX_BOUNCE_BYTES,
            hostname=greeting_name,
            ident="Convites bounce receiver",
        ),
        host,
        port,
    )
    receiver_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    heartbeat = asyncio.create_task(_beat_forever(redis, receiver_id))
    log.info("bounce receiver listening", extra={"listen": f"{host}:{port}"})
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        heartbeat.cancel()
        with suppress(asyncio.CancelledError):
            await heartbeat
        with suppress(Exception):
            await asyncio.wait_for(forget(redis, BOUNCE_RECEIVERS, receiver_id), 2)
        await announcer.close()
        await redis.aclose()
        await db.dispose()
        log.info("bounce receiver stopped")


async def serve_forever(settings: Settings, stop: asyncio.Event) -> None:
    async with bounce_receiver(settings):
        await stop.wait()
