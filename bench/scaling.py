"""Scenario 6: the same backlog drained by one worker process, then by two on the same SQLite
file (fresh database each), to see what a second worker buys (``WriterTurns`` keeps the two
processes' writes fair; each process still group-commits its own jobs).

The rate counts from the moment every worker of the round is ready (a worker that starts early
drains on its own meanwhile, so the invites it sent then are left out of the rate).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from typing import Any

from bench.load import run_wrk
from bench.scenarios import INVITE, Sizes
from bench.stack import Stack, db_rows

ROUNDS = (1, 2)


def _count(settings: Any, where: str) -> int:
    [(value,)] = db_rows(
        settings, f"SELECT count(*) FROM invites WHERE kind = 'convite' AND {where}"
    )
    return int(value)  # type: ignore[call-overload]


async def workers(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    rates: dict[str, Any] = {}
    for count in ROUNDS:
        name = f"workers-{count}"
        env, settings = stack.fresh_database(name)
        with stack.web(env, name) as web:
            bulk = await web.session()
            await asyncio.to_thread(
                run_wrk,
                web.base_url,
                bulk.post_json("/convites", INVITE),
                seconds=sizes.timeout,
                limit=sizes.backlog_invites,
                server_pid=web.proc.pid,
                until=lambda: _count(settings, "1=1") >= sizes.backlog_invites,  # noqa: B023
            )
        total = _count(settings, "1=1")
        with ExitStack() as running:
            for index in range(count):
                (stack.folder / name / f"w{index}").mkdir(parents=True, exist_ok=True)
                running.enter_context(stack.worker(env, f"{name}/w{index}"))
            began, sent_before = time.monotonic(), _count(settings, "status = 'enviado'")
            deadline = began + sizes.timeout
            while _count(settings, "status = 'enviado'") < total and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            elapsed = time.monotonic() - began
            sent = _count(settings, "status = 'enviado'")
        rates[str(count)] = {
            "invites": total,
            "sent": sent,
            "complete": sent >= total,
            "rate": (sent - sent_before) / elapsed if elapsed > 0 else 0.0,
        }
    return rates


def section(data: dict[str, Any]) -> list[str]:
    one, two = data["1"], data["2"]
    ratio = two["rate"] / one["rate"] if one["rate"] else 0.0
    lines = [
        "## 7. Backlog drained by one worker process, then by two (same SQLite file)",
        "",
        "| workers | backlog | sent | drain rate |",
        "|---|---|---|---|",
        *[
            f"| {count} | {data[count]['invites']:,} | {data[count]['sent']:,} "
            f"| {data[count]['rate']:,.0f} invites/s |"
            for count in ("1", "2")
        ],
        "",
        f"- two workers drain {ratio:.2f}× as fast as one (reported without a target: PostgreSQL "
        "is the scale-out path)" + ("" if two["complete"] else "; the run did not finish"),
        "",
    ]
    return lines
