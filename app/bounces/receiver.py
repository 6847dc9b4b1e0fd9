"""``python -m app bounces``: the SMTP server bounces come back to (aiosmtpd, ``BOUNCE_LISTEN``).

It takes mail only for return paths it issued and that still matter, decided at RCPT time,
before a byte of the message is read:
- the address must be one of ``RETURN_PATH``'s signed VERP addresses (``app.bounces.addresses``)
  with a tag we wrote: anything else is a 550;
- it must name an invite we have, at its current attempt, in a state whose mail may be in a
  mailbox (``app.invites.status.REPORTABLE``: ``enviado | incerto``, which a bounce changes,
  and the answered, expired and cancelled ones, which only a spam complaint or a mailed opt-out
  changes): a return path of an earlier attempt, or of an invite that failed, is being sent
  again or is already devolvido, is a 550 (a mail server never bounces a bounce, so refusing
  one loses nothing that could still change the invite). An invite still ``enviando`` for
  that attempt gets a 451: its worker has not recorded the 250 yet, and the sending server
  will try again;
- an invite's opt-out address (the ``mailto:`` of ``List-Unsubscribe``) needs only an invite
  we have: an opt-out is good at any time;
- one bounce address per message: a bounce is about one of our messages, and each of those has
  its own return path. Any further recipient gets a 452 (RFC 5321 4.5.3.1.10: the client sends
  it in another message), and past ``MAX_RECIPIENTS`` RCPT commands every one does. So a
  message is stored once and read once;
- at most ``MAX_BOUNCE_BYTES``: aiosmtpd refuses a larger ``SIZE=`` at MAIL FROM with a 552, and a
  DATA that runs past it with a 552 at its end, keeping none of it.
Every refusal is counted (``convites_bounces_refused_total``) and logged, never with the
address's tag.

Each message is handed to ``app.bounces.store.receive``. A bounce it cannot record right now
(the database is down) is written to a spool folder and refused with a 451, so the sending
server tries again: never lost, never a crash. While it runs it beats in Redis, so ``/saude``
can tell a receiver that died from one that was never started.
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
from enum import StrEnum
from pathlib import Path
from typing import Any, AnyStr
from weakref import WeakKeyDictionary

from aiosmtpd.smtp import SMTP, Envelope
from redis.asyncio import Redis

from app.bounces.addresses import Forged, ReturnPath, opt_out_is_ours, read_address
from app.bounces.store import invite_of, receive
from app.config import VAR_DIR, Settings
from app.invites.queries import current_address_since
from app.invites.status import REPORTABLE, Status
from app.live.wakeups import Announcer
from app.ops.metrics import count_refused_bounce
from app.sending.heartbeat import BOUNCE_RECEIVER_SECONDS, BOUNCE_RECEIVERS, beat, forget
from app.storage.database import Database

log = logging.getLogger(__name__)

#: A report of one of our messages (a few KB, the original's headers or the whole of it) with
#: room for a verbose server's HTML; anything larger is no bounce of ours.
MAX_BOUNCE_BYTES = 256 * 1024
#: RCPT commands one message may carry, accepted or refused.
MAX_RECIPIENTS = 10


class Refusal(StrEnum):
    """Why the receiver refused (the ``reason`` of ``convites_bounces_refused_total``)."""

    NOT_OURS = "not_ours"  # not a VERP address of RETURN_PATH
    FORGED = "forged"  # the shape of one, with a tag we did not write
    UNKNOWN_INVITE = "unknown_invite"  # signed, but no such invite
    STALE_ATTEMPT = "stale_attempt"  # the invite has been sent again since
    SETTLED = "settled"  # the invite is in a state no bounce can change
    NOT_YET = "not_yet"  # enviando: the 250 is not recorded yet (451, tried again)
    TOO_MANY_RECIPIENTS = "too_many_recipients"  # a second bounce address, or past the cap
    OVERSIZE = "oversize"  # over MAX_BOUNCE_BYTES (552)


class BounceHandler:
    """aiosmtpd handler: signed return paths that still matter; each message recorded once,
    before the 250."""

    def __init__(
        self,
        db: Database,
        redis: Redis,
        announcer: Announcer,
        settings: Settings,
        spool: Path,
    ) -> None:
        self.db = db
        self.redis = redis
        self.announcer = announcer
        self.return_path = settings.return_path
        self.secret_key = settings.secret_key
        self.spool = spool
        self._rcpt_commands: WeakKeyDictionary[Envelope, int] = WeakKeyDictionary()

    async def refuse(self, reason: Refusal, reply: str, peer: Any, **extra: object) -> str:
        """Count and log one refusal; the reply for the client."""
        await count_refused_bounce(self.redis, reason.value)
        log.info(
            "refused a bounce",
            extra={"reason": reason.value, "peer": str(peer), "reply": reply[:3], **extra},
        )
        return reply

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        seen = self._rcpt_commands.get(envelope, 0) + 1
        self._rcpt_commands[envelope] = seen
        too_many = "452 4.5.3 Too many recipients: one bounce address per message"
        if seen > MAX_RECIPIENTS:
            return await self.refuse(Refusal.TOO_MANY_RECIPIENTS, too_many, session.peer)
        try:
            target = read_address(self.return_path, self.secret_key, address)
        except Forged:
            return await self.refuse(
                Refusal.FORGED, "550 5.7.1 This return path was not issued here", session.peer
            )
        if target is None:
            return await self.refuse(
                Refusal.NOT_OURS,
                "550 5.1.1 No such mailbox: this server only takes bounces of Convites",
                session.peer,
            )
        if envelope.rcpt_tos:
            return await self.refuse(Refusal.TOO_MANY_RECIPIENTS, too_many, session.peer)
        refused = await self._check(target, session.peer)
        if refused is not None:
            return refused
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 OK"

    async def _check(self, target: ReturnPath, peer: Any) -> str | None:
        """The refusal for a signed return path that no longer matters (``None``: take it)."""
        named = {"invite": target.public_id, "attempt": target.attempt}
        try:
            invite = await invite_of(self.db, target.public_id)
            corrected = (
                invite is not None
                and target.opt_out
                and await current_address_since(self.db, invite.id) > 1
            )
        except Exception as exc:  # a 5xx here would lose a real bounce: ask for it again
            log.warning("could not check a bounce address", extra={**named, "error": repr(exc)})
            return "451 4.3.0 Could not check this address now; please try again later"
        if invite is not None and target.opt_out:
            # The invite's opt-out address: taken whatever its state, if it is the address's.
            if opt_out_is_ours(self.secret_key, target, invite.email, corrected=corrected):
                return None
            return await self.refuse(
                Refusal.FORGED, "550 5.7.1 This return path was not issued here", peer
            )
        if invite is None or target.attempt > invite.attempt:
            return await self.refuse(
                Refusal.UNKNOWN_INVITE, "550 5.1.1 No such invite", peer, **named
            )
        if target.attempt < invite.attempt:
            return await self.refuse(
                Refusal.STALE_ATTEMPT,
                "550 5.1.1 This invite has been sent again since; this bounce changes nothing",
                peer,
                **named,
            )
        if invite.status == Status.ENVIANDO:
            return await self.refuse(
                Refusal.NOT_YET,
                "451 4.3.0 Not ready for this bounce; try again later",
                peer,
                **named,
            )
        if invite.status not in REPORTABLE:
            return await self.refuse(
                Refusal.SETTLED,
                "550 5.1.1 This invite is past what a bounce can change",
                peer,
                **named,
            )
        return None

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        [recipient] = envelope.rcpt_tos  # handle_RCPT takes one
        target = read_address(self.return_path, self.secret_key, recipient)
        assert target is not None
        try:
            received = await receive(self.db, raw, recipient, target)
            await self.announcer.announce_all([received.change, *received.called_off])
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


class BounceSMTP(SMTP):
    """aiosmtpd's server, counting the 552s it answers on its own for ``data_size_limit``: a
    ``SIZE=`` over it at MAIL FROM, or a DATA that ran past it (those never reach a hook)."""

    def __init__(self, handler: BounceHandler, **options: Any) -> None:
        super().__init__(handler, data_size_limit=MAX_BOUNCE_BYTES, **options)
        self.bounce_handler = handler

    async def push(self, status: AnyStr) -> None:
        text = status.decode("ascii", "replace") if isinstance(status, bytes) else status
        if text.startswith("552"):
            peer = self.session.peer if self.session else None
            await self.bounce_handler.refuse(Refusal.OVERSIZE, text, peer)
        await super().push(status)


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
    handler = BounceHandler(db, redis, announcer, settings, spool or VAR_DIR / "bounces-spool")
    host, port = settings.bounce_listen
    greeting_name = socket.getfqdn()  # once: a DNS lookup per connection would stall the loop
    server = await asyncio.get_running_loop().create_server(
        lambda: BounceSMTP(handler, hostname=greeting_name, ident="Convites bounce receiver"),
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
        await redis.aclose()
        await db.dispose()
        log.info("bounce receiver stopped")


async def serve_forever(settings: Settings, stop: asyncio.Event) -> None:
    async with bounce_receiver(settings):
        await stop.wait()
