"""The obvious worker for ``bench.naive_app``: arq's default settings, one transaction to claim,
one SMTP connection per message, one transaction to record ``enviado``."""

from __future__ import annotations

import os
from email.message import EmailMessage
from typing import Any, ClassVar
from urllib.parse import urlsplit

import aiosmtplib
from arq.connections import RedisSettings
from sqlalchemy import select

from bench.naive_app import naive_engine, naive_invites, now


async def startup(ctx: dict[str, Any]) -> None:
    ctx["engine"] = naive_engine()
    smtp = urlsplit(os.environ["SMTP_URL"])
    ctx["smtp"] = (smtp.hostname, smtp.port)


async def shutdown(ctx: dict[str, Any]) -> None:
    await ctx["engine"].dispose()


async def send_invite(ctx: dict[str, Any], invite_id: int) -> None:
    table = naive_invites
    async with ctx["engine"].begin() as conn:
        claimed = await conn.execute(
            table.update()
            .where(table.c.id == invite_id, table.c.status == "pendente")
            .values(status="enviando")
        )
        if claimed.rowcount != 1:
            return
        row = (await conn.execute(select(table).where(table.c.id == invite_id))).one()
    message = EmailMessage()
    message["From"] = "convites@exemplo.com"
    message["To"] = row.email
    message["Subject"] = "Você recebeu um convite"
    message.set_content(f"Olá {row.name or ''}, você foi convidado.")
    hostname, port = ctx["smtp"]
    await aiosmtplib.send(message, hostname=hostname, port=port)
    async with ctx["engine"].begin() as conn:
        await conn.execute(
            table.update().where(table.c.id == invite_id).values(status="enviado", sent_at=now())
        )


class WorkerSettings:
    functions: ClassVar[list[Any]] = [send_invite]
    on_startup = startup
    on_shutdown = shutdown
    redis_settings = RedisSettings.from_dsn(os.environ.get("REDIS_URL", "redis://127.0.0.1"))
