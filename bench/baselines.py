"""Scenario 5: what a user would build instead (``bench.naive_app`` and ``bench.naive_worker``),
measured in the same run as Convites, on the same Redis and SMTP sink.

Accept: wrk at 50 connections, interleaved rounds like scenario 1 (no worker running). Then the
naive worker: accepted→``enviado`` paced at the same rate as scenario 2 after the same warm-up,
and a burst of as many invites as scenario 2's, sent while wrk posts them.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from arq.constants import default_queue_name
from redis import Redis

from bench import procs
from bench.load import Request, run_wrk
from bench.scenarios import INVITE, Sizes, pct
from bench.stack import Stack, parse_db_time, wait_until

#: The naive burst is smaller than scenario 2's: at arq's defaults it sends tens a second.
NAIVE_BURST = 500
NAIVE_BODY = json.dumps(INVITE).replace("__RUN__", "naive")


def _rows(path: Path, query: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def _sent(path: Path, after_id: int) -> tuple[list[float], float, float]:
    rows = _rows(
        path,
        "SELECT created_at, sent_at FROM naive_invites WHERE id > ? AND status = 'enviado'",
        after_id,
    )
    created = [parse_db_time(c) or 0.0 for c, _ in rows]
    sent = [parse_db_time(s) or 0.0 for _, s in rows]
    latencies = [(s - c) * 1000 for c, s in zip(created, sent, strict=True)]
    return latencies, min(created, default=0.0), max(sent, default=0.0)


def _count(path: Path, where: str = "1=1") -> int:
    if not path.exists():
        return 0
    return int(_rows(path, f"SELECT count(*) FROM naive_invites WHERE {where}")[0][0])


async def _paced(base_url: str, request: Request, rate: float, seconds: float, first: int) -> int:
    sent = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        tasks = []
        began = time.monotonic()
        while time.monotonic() - began < seconds:
            body = request.body_for(first + sent)
            tasks.append(asyncio.create_task(http.post(request.path, content=body)))
            sent += 1
            await asyncio.sleep(max(0.0, began + sent / rate - time.monotonic()))
        for response in await asyncio.gather(*tasks):
            if response.status_code != 202:
                raise RuntimeError(f"naive POST got {response.status_code}")
    return sent


def _web(folder: Path, env: dict[str, str], port: int) -> procs.Proc:
    args = [sys.executable, "-m", "uvicorn", "bench.naive_app:app"]
    args += ["--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http", "httptools"]
    args += ["--no-access-log", "--backlog", "2048", "--timeout-graceful-shutdown", "3"]
    return procs.Proc("naive web", args, procs._pythonpath(dict(env)), folder / "naive-web.log")


async def naive(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    env, _ = stack.fresh_database("naive")
    folder = stack.folder / "naive"
    database = folder / "naive.db"
    env["NAIVE_DATABASE_URL"] = f"sqlite+aiosqlite:///{database}"
    port = procs.free_port()
    base_url = f"http://127.0.0.1:{port}"
    request = Request("POST", "/convites", {"Content-Type": "application/json"}, NAIVE_BODY)
    web = _web(folder, env, port).start()
    result: dict[str, Any] = {}
    try:
        web.wait_ready(port=port)
        run_wrk(base_url, request, seconds=1, server_pid=web.pid)  # warm-up
        rounds = [
            run_wrk(base_url, request, seconds=sizes.accept_seconds, server_pid=web.pid)
            for _ in range(sizes.accept_rounds)
        ]
        result["accept"] = {
            "rps": [r.rps for r in rounds],
            "p99_ms": [r.p99_ms for r in rounds],
            "errors": sum(r.errors + r.non_2xx_3xx for r in rounds),
        }
        _forget_accepted(database, stack.redis_url)
        worker = procs.worker(folder, env, "bench.naive_worker.WorkerSettings").start()
        try:
            worker.wait_ready(text="Starting worker")
            result.update(await _sending(base_url, request, database, sizes))
        finally:
            worker.stop()
    finally:
        web.stop()
    return result


def _forget_accepted(database: Path, redis_url: str) -> None:
    """The accept rounds' invites are not part of the sending figures: no job, no row to send."""
    Redis.from_url(redis_url).delete(default_queue_name)
    conn = sqlite3.connect(database, timeout=30)
    try:
        conn.execute("UPDATE naive_invites SET status = 'medido' WHERE status = 'pendente'")
        conn.commit()
    finally:
        conn.close()


async def _sending(base_url: str, request: Request, database: Path, sizes: Sizes) -> dict[str, Any]:
    first = _count(database) + 1
    warm = await _paced(base_url, request, sizes.paced_rate, 1.0, first)
    [(mark,)] = _rows(database, "SELECT coalesce(max(id), 0) FROM naive_invites")
    done = lambda: _count(database, "status = 'pendente' OR status = 'enviando'") == 0  # noqa: E731
    wait_until(done, sizes.timeout)
    posted = await _paced(base_url, request, sizes.paced_rate, sizes.paced_seconds, first + warm)
    wait_until(done, sizes.timeout)
    latencies, _, _ = _sent(database, int(mark))
    [(last_id,)] = _rows(database, "SELECT coalesce(max(id), 0) FROM naive_invites")
    burst = min(sizes.e2e_invites, NAIVE_BURST)
    began = time.monotonic()
    await asyncio.to_thread(
        run_wrk,
        base_url,
        Request(request.method, request.path, request.headers, request.body.replace("@", "b@")),
        seconds=sizes.timeout,
        limit=burst,
        until=lambda: _count(database, f"id > {last_id}") >= burst,
    )
    complete = wait_until(done, max(1.0, sizes.timeout - (time.monotonic() - began)))
    _, first_created, last_sent = _sent(database, int(last_id))
    sent = _count(database, f"id > {last_id} AND status = 'enviado'")
    return {
        "burst_invites": burst,
        "paced": {"posted": posted, "p50_ms": pct(latencies, 50), "p99_ms": pct(latencies, 99)},
        "burst": {
            "sent": sent,
            "complete": complete,
            "rate": sent / (last_sent - first_created) if last_sent > first_created else 0.0,
        },
    }


def _f(value: float | None, digits: int = 0) -> str:
    if value is None or value != value:  # None or NaN
        return "–"
    return f"{value:,.{digits}f}"


def section(results: dict[str, Any]) -> list[str]:
    """The report's section 5: the naive flow next to Convites, with Convites' ratio to it."""
    data = results["naive"]
    accept = results.get("accept", {}).get("runs", {}).get("accept JSON", [])
    ours_accept = sorted(r["rps"] for r in accept)[len(accept) // 2] if accept else None
    e2e = results.get("e2e", {})
    ours_send = e2e.get("burst", {}).get("rate")
    ours_p50 = e2e.get("paced", {}).get("p50_ms")
    theirs_accept = sorted(data["accept"]["rps"])[len(data["accept"]["rps"]) // 2]
    theirs_send, theirs_p50 = data["burst"]["rate"], data["paced"]["p50_ms"]

    def ratio(ours: float | None, theirs: float) -> str:
        return f"{ours / theirs:.2f}" if ours and theirs else "–"

    return [
        "## 6. What a user would build instead",
        "",
        "The same flow the obvious way (`bench/naive_app.py`, `bench/naive_worker.py`): one "
        "SQLAlchemy transaction per request, `enqueue_job` per request, arq's default settings, "
        "one SMTP connection per message; same durability, none of Convites' guards.",
        "",
        "| what | naive | Convites | Convites ÷ naive |",
        "|---|---|---|---|",
        f"| accept req/s (50 connections; Convites: JSON, every guard on) | {_f(theirs_accept)} "
        f"| {_f(ours_accept)} | {ratio(ours_accept, theirs_accept)} |",
        f"| send invites/s (naive: a burst of {data.get('burst_invites', 0):,}; one worker) "
        f"| {_f(theirs_send)} | {_f(ours_send)} | {ratio(ours_send, theirs_send)} |",
        f"| accepted→`enviado` p50, paced (lower is better) | {_f(theirs_p50, 1)} ms "
        f"| {_f(ours_p50, 1)} ms | {ratio(ours_p50, theirs_p50)} |",
        "",
        _floor(ours_accept, theirs_accept, 2.0, "accept"),
        _floor(ours_send, theirs_send, 25.0, "drain"),
        "",
    ]


def _floor(ours: float | None, theirs: float, floor: float, what: str) -> str:
    times = ours / theirs if ours and theirs else 0.0
    met = "met" if times >= floor else "missed"
    return f"- **target {met}** — {what}: {times:.1f}× the naive build (floor: ≥ {floor:g}×)"
