"""Scenario 5 (issue #14): review and accept a 1,000-row batch, then its page while it drains.

Each round is a new sender (a full batch is a sender's day), signed in like a person, who
pastes ``batch_rows`` new addresses, presses **Revisar** (timed), then **Enviar N convites**
(timed: one transaction for every invite, event and outbox row). Then the worker starts and the
batch page is fetched over and over while it drains: the page must stay responsive.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
import uuid
from typing import Any
from urllib.parse import urlencode

from bench.stack import Stack, db_rows, wait_until

ROUNDS = 3
_KEPT = re.compile(r'name="linhas" value="([^"]*)"')


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if values else 0.0


async def _one_batch(http: Any, session: Any, rows: int) -> tuple[float, float, str]:
    tag = uuid.uuid4().hex[:8]
    text = "\n".join(f"Pessoa {n} <lote-{tag}-{n}@exemplo.com>" for n in range(rows))
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    body = urlencode({"csrf_token": session.token or "", "enderecos": text})
    began = time.perf_counter()
    review = await http.post("/lotes/revisar", content=body, headers=session.headers(**form))
    reviewed = time.perf_counter() - began
    if review.status_code != 200 or f"Enviar {rows} convites" not in review.text:
        raise RuntimeError(f"review got {review.status_code}: {review.text[:300]}")
    kept = _KEPT.search(review.text)
    assert kept is not None
    body = urlencode({"csrf_token": session.token or "", "linhas": html.unescape(kept.group(1))})
    began = time.perf_counter()
    sent = await http.post("/lotes", content=body, headers=session.headers(**form))
    accepted = time.perf_counter() - began
    if sent.status_code != 303:
        raise RuntimeError(f"send got {sent.status_code}: {sent.text[:300]}")
    return reviewed, accepted, sent.headers["location"].split("?")[0]


async def _watch(http: Any, session: Any, location: str, stop: asyncio.Event) -> list[float]:
    latencies = []
    while not stop.is_set():
        began = time.perf_counter()
        page = await http.get(location, headers=session.headers(Accept="text/html"))
        latencies.append((time.perf_counter() - began) * 1000)
        if page.status_code != 200:
            raise RuntimeError(f"batch page got {page.status_code}")
        await asyncio.sleep(0.2)
    return latencies


async def batch(stack: Stack, sizes: Any) -> dict[str, Any]:
    rows = sizes.batch_rows
    env, settings = stack.fresh_database("batch")
    reviews, accepts, locations = [], [], []
    with stack.web(env, "batch") as web:
        senders = await web.sessions(ROUNDS)
        async with web.http() as http:
            for session in senders:
                reviewed, accepted, location = await _one_batch(http, session, rows)
                reviews.append(reviewed)
                accepts.append(accepted)
                locations.append(location)
            [(written,)] = db_rows(
                settings, "SELECT count(*) FROM invites WHERE batch_id IS NOT NULL"
            )
            stop = asyncio.Event()
            watcher = asyncio.create_task(_watch(http, senders[-1], locations[-1], stop))
            with stack.worker(env, "batch"):
                began = time.monotonic()
                drained = await asyncio.to_thread(
                    wait_until,
                    lambda: (
                        db_rows(settings, "SELECT count(*) FROM invites WHERE status != 'enviado'")[
                            0
                        ][0]
                        == 0
                    ),
                    sizes.timeout,
                )
                seconds = time.monotonic() - began
            stop.set()
            page = await watcher
    return {
        "rows": rows,
        "rounds": ROUNDS,
        "review_s": reviews,
        "accept_s": accepts,
        "written": written,
        "drained": drained,
        "drain_rate": ROUNDS * rows / seconds if seconds else 0.0,
        "page_ms": {"gets": len(page), "p50": _pct(page, 50), "p99": _pct(page, 99)},
    }


def batch_section(data: dict[str, Any]) -> list[str]:
    rows = data["rows"]
    review, accept = sorted(data["review_s"]), sorted(data["accept_s"])
    median = lambda values: values[len(values) // 2]  # noqa: E731
    page = data["page_ms"]
    return [
        f"## 5. Batch: review and accept of a {rows:,}-row batch (issue #14)",
        "",
        f"{data['rounds']} rounds, each a new sender pasting {rows:,} new addresses "
        "(`Nome <email>`) into **Revisar**, then **Enviar N convites** "
        "(one transaction for every row).",
        "",
        "| step | median | min | max |",
        "|---|---|---|---|",
        f"| review (`POST /lotes/revisar`) | {median(review):.3f} s | {review[0]:.3f} s "
        f"| {review[-1]:.3f} s |",
        f"| accept (`POST /lotes`) | {median(accept):.3f} s | {accept[0]:.3f} s "
        f"| {accept[-1]:.3f} s |",
        "",
        f"- **target review < 1 s: {'met' if median(review) < 1 else 'missed'}**; "
        f"**target accept < 1 s: {'met' if median(accept) < 1 else 'missed'}** (medians).",
        f"- rows written: {data['written']:,}; drained by one worker at "
        f"{data['drain_rate']:.0f} invites/s ({'complete' if data['drained'] else 'incomplete'}).",
        f"- the batch page while the worker drains: {page['gets']} GETs, p50 {page['p50']:.0f} ms, "
        f"p99 {page['p99']:.0f} ms.",
        "",
    ]
