"""The four scenarios of issue #7, each against real processes and a fresh database."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from arq.connections import ArqRedis
from arq.constants import job_key_prefix, result_key_prefix
from arq.jobs import deserialize_result, serialize_job

from bench import procs
from bench.load import Request, WrkResult
from bench.noop_worker import QUEUE as NOOP_QUEUE
from bench.stack import Stack, db_rows, parse_db_time, wait_until


@dataclass(frozen=True)
class Sizes:
    """How much work each scenario does: the full run and ``--quick`` differ only here."""

    accept_seconds: float
    accept_rounds: int
    e2e_invites: int
    paced_rate: float
    paced_seconds: float
    backlog_invites: int
    live_streams: int
    live_tabs: int
    timeout: float
    batch_rows: int = 1000  # bench.batch: the rows of each reviewed and accepted batch


FULL = Sizes(5, 3, 5000, 20, 10, 10_000, 1000, 100, 240)
QUICK = Sizes(1, 2, 500, 20, 3, 1000, 100, 10, 40)
TINY = Sizes(1, 1, 40, 20, 1, 60, 6, 2, 30, 50)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values) if values else float("nan"),
        "min": min(values) if values else float("nan"),
        "max": max(values) if values else float("nan"),
    }


# A new address for every request (bench.load.NUMBER), in every run (bench.client.RUN).
INVITE = {"email": "b__RUN__-__N__@exemplo.com", "nome": "Ana"}


# --- 1. accept ------------------------------------------------------------------------------


async def accept(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    env, settings = stack.fresh_database("accept")
    with stack.web(env, "accept") as web:
        session = await web.session()
        requests = {
            "hello": Request("GET", "/bench/hello", session.headers()),
            stack.plain_insert: session.post_json("/bench/insert", INVITE),
            "accept JSON": session.post_json("/convites", INVITE),
            "accept form": session.post_form("/convites", INVITE),
        }
        web.wrk(requests["hello"], seconds=1)  # warm-up
        runs: dict[str, list[WrkResult]] = {name: [] for name in requests}
        for _ in range(sizes.accept_rounds):
            # Interleaved, so drift on a shared machine hits every endpoint alike.
            for name, request in requests.items():
                result = await asyncio.to_thread(web.wrk, request, seconds=sizes.accept_seconds)
                runs[name].append(result)
    accepted = sum(
        r.requests - r.non_2xx_3xx - r.errors
        for n in ("accept JSON", "accept form")
        for r in runs[n]
    )
    [(rows,)] = db_rows(settings, "SELECT count(*) FROM invites")
    [(outbox_rows,)] = db_rows(settings, "SELECT count(*) FROM outbox")
    return {
        "plain": stack.plain_insert,
        "runs": {name: [asdict(r) for r in results] for name, results in runs.items()},
        "accepted_responses": accepted,
        "invite_rows": rows,
        "outbox_rows": outbox_rows,
    }


# --- 2. end to end --------------------------------------------------------------------------


async def _paced_posts(web: Any, session: Any, rate: float, seconds: float) -> int:
    """POST at a steady ``rate`` (no backlog builds): the latency a person sees."""
    request = session.post_json("/convites", INVITE)
    sent = 0
    async with web.http() as http:
        tasks = []
        began = time.monotonic()
        while time.monotonic() - began < seconds:
            tasks.append(
                asyncio.create_task(
                    http.post(request.path, content=request.body_for(sent), headers=request.headers)
                )
            )
            sent += 1
            await asyncio.sleep(max(0.0, began + sent / rate - time.monotonic()))
        for response in await asyncio.gather(*tasks):
            if response.status_code != 202:
                raise RuntimeError(f"paced POST got {response.status_code}: {response.text[:200]}")
    return sent


def _sent_latencies(settings: Any, after_id: int = 0) -> tuple[list[float], float, float, int]:
    rows = db_rows(
        settings,
        "SELECT created_at, sent_at FROM invites WHERE id > ? AND status = 'enviado'",
        after_id,
    )
    created = [parse_db_time(c) or 0.0 for c, _ in rows]
    sent = [parse_db_time(s) or 0.0 for _, s in rows]
    latencies = [(s - c) * 1000 for c, s in zip(created, sent, strict=True)]
    return latencies, min(created, default=0.0), max(sent, default=0.0), len(rows)


def _accept_rate(settings: Any, after_id: int) -> float:
    [(first, last, count)] = db_rows(
        settings,
        "SELECT min(created_at), max(created_at), count(*) FROM invites WHERE id > ?",
        after_id,
    )
    began, ended = parse_db_time(first), parse_db_time(last)  # type: ignore[arg-type]
    return float(count) / (ended - began) if began and ended and ended > began else 0.0  # type: ignore[arg-type]


def _count(settings: Any, where: str = "1=1") -> int:
    [(value,)] = db_rows(settings, f"SELECT count(*) FROM invites WHERE {where}")
    return int(value)  # type: ignore[call-overload]


def _settled(settings: Any, where: str) -> int:
    """The count once the requests wrk left in flight when it stopped have landed."""
    count = -1
    while count != (count := _count(settings, where)):
        time.sleep(0.3)
    return count


async def end_to_end(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    env, settings = stack.fresh_database("e2e")
    result: dict[str, Any] = {}
    with stack.web(env, "e2e") as web, stack.worker(env, "e2e") as worker:
        session = await web.session()
        rss_before = procs.rss_mb(worker.pid)
        # Warm-up (first connections, statement caches), then the steady state is measured.
        warm = await _paced_posts(web, session, sizes.paced_rate, 1.0)
        wait_until(lambda: _count(settings, "status = 'enviado'") >= warm, sizes.timeout)
        posted = await _paced_posts(web, session, sizes.paced_rate, sizes.paced_seconds)
        wait_until(lambda: _count(settings, "status = 'enviado'") >= warm + posted, sizes.timeout)
        latencies, *_ = _sent_latencies(settings, warm)
        result["paced"] = {
            "rate": sizes.paced_rate,
            "posted": posted,
            "sent": len(latencies),
            "p50_ms": pct(latencies, 50),
            "p99_ms": pct(latencies, 99),
        }
        [(last_id,)] = db_rows(settings, "SELECT coalesce(max(id), 0) FROM invites")
        began = time.monotonic()
        load = await asyncio.to_thread(
            web.wrk,
            session.post_json("/convites", INVITE),
            seconds=sizes.timeout,
            limit=sizes.e2e_invites,
            until=lambda: _count(settings, f"id > {last_id}") >= sizes.e2e_invites,
        )
        total = _settled(settings, f"id > {last_id}")
        done = wait_until(
            lambda: _count(settings, f"id > {last_id} AND status = 'enviado'") >= total,
            max(1.0, sizes.timeout - (time.monotonic() - began)),
        )
        latencies, first_created, last_sent, sent = _sent_latencies(settings, int(last_id))  # type: ignore[call-overload]
        result["burst"] = {
            "invites": total,
            "sent": sent,
            "complete": done,
            "rate": sent / (last_sent - first_created) if last_sent > first_created else 0.0,
            "p50_ms": pct(latencies, 50),
            "p99_ms": pct(latencies, 99),
            "accept_rps": _accept_rate(settings, int(last_id)),  # type: ignore[call-overload]
            "wrk_errors": load.errors + load.non_2xx_3xx,
        }
        result["worker_rss_mb"] = {"before": rss_before, "after": procs.rss_mb(worker.pid)}
    result["noop"] = await _noop_baseline(stack, env, sizes.e2e_invites, sizes.timeout)
    return result


async def _noop_baseline(
    stack: Stack, env: dict[str, str], count: int, timeout: float
) -> dict[str, Any]:
    """arq no-op jobs on the same Redis with the app worker's queue settings, queued once every
    worker process is ready (as many as the scenario's, so each gets its share)."""
    redis = ArqRedis.from_url(stack.redis_url)
    try:
        keys = [result_key_prefix + f"noop:{i}" for i in range(count)]
        with stack.worker(env, "e2e", "bench.noop_worker.WorkerSettings"):
            now_ms = int(time.time() * 1000)
            async with redis.pipeline(transaction=False) as pipe:
                for index in range(count):
                    job_id = f"noop:{index}"
                    pipe.psetex(
                        job_key_prefix + job_id,
                        3_600_000,
                        serialize_job("noop", (index,), {}, None, now_ms),
                    )
                    pipe.zadd(NOOP_QUEUE, {job_id: now_ms})
                await pipe.execute()
            deadline = time.monotonic() + timeout
            while await redis.exists(*keys) < count and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        raw = await redis.mget(keys)
    finally:
        await redis.aclose()
    results = [deserialize_result(value) for value in raw if value]
    if not results:
        return {"jobs": 0, "rate": 0.0}
    first = min(r.start_time for r in results).timestamp()
    last = max(r.finish_time for r in results).timestamp()
    return {"jobs": len(results), "rate": len(results) / (last - first) if last > first else 0.0}


# --- 3. live ---------------------------------------------------------------------------------

EVENTS_PATH = "/convites/eventos"


async def _events_endpoint(web: Any, session: Any) -> str | None:
    """``None`` when the SSE endpoint answers with a stream; otherwise why it is not available."""
    async with web.http() as http:
        try:
            async with http.stream(
                "GET", EVENTS_PATH, headers=session.headers(Accept="text/event-stream")
            ) as response:
                kind = response.headers.get("content-type", "")
                if response.status_code == 200 and kind.startswith("text/event-stream"):
                    return None
                return f"GET {EVENTS_PATH} answered {response.status_code} {kind or ''}".strip()
        except httpx.HTTPError as exc:
            return f"GET {EVENTS_PATH} failed: {exc}"


async def live(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    env, settings = stack.fresh_database("live")
    with stack.web(env, "live") as web:
        probe = await web.session()
        missing = await _events_endpoint(web, probe)
        if missing is not None:
            return {"available": False, "reason": missing}
        with stack.worker(env, "live"):
            warmed = await _warm_up(web, probe, settings, sizes)
            result = await _live_streams(stack, web, settings, sizes, warmed)
    from bench.live_bench import broadcast_baseline  # it imports this module

    result["baseline"] = await broadcast_baseline(stack, sizes.live_streams, sizes.timeout)
    return result


#: Invites the probe sender sends before the live scenario's streams open (no stream of its own).
LIVE_WARM_UP = 50


async def _warm_up(web: Any, probe: Any, settings: Any, sizes: Sizes) -> int:
    """Send ``LIVE_WARM_UP`` invites (fewer in a run with fewer streams) through the fresh web
    and worker, as the e2e scenario warms up before it measures: a new process's first group
    commits compile their statements (the first 18 rows of the burst waited 200 ms for that),
    which is start-up, not the live path."""
    async with web.http() as http:
        request = probe.post_json("/convites", INVITE)

        async def post(number: int) -> int:
            body = request.body_for(number)
            return (
                await http.post(request.path, content=body, headers=request.headers)
            ).status_code

        count = min(LIVE_WARM_UP, sizes.live_streams)
        refused = [code for code in await asyncio.gather(*map(post, range(count))) if code != 202]
        if refused:
            raise RuntimeError(f"live warm-up: {len(refused)} invites refused ({refused[0]})")
    wait_until(lambda: _count(settings, LIVE_SENT) >= count, sizes.timeout)
    return count


LIVE_SENT = "status = 'enviado' AND kind = 'convite'"  # not the senders' sign-in mails


async def _live_streams(
    stack: Stack, web: Any, settings: Any, sizes: Sizes, warmed: int
) -> dict[str, Any]:
    senders = await web.sessions(sizes.live_streams - sizes.live_tabs + 1)
    streams = [senders[0]] * sizes.live_tabs + senders[1:]
    plan = stack.folder / "live" / "streams.json"
    plan.write_text(json.dumps([s.headers(Accept="text/event-stream") for s in streams]))
    out = stack.folder / "live" / "received.json"
    rss_idle = web.rss_mb()
    client = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.sse_clients",
            # As the page opens its stream: from the cursor it was rendered with, here 0 (each
            # sender is new). A stream without one first reads and sends a snapshot of the
            # rows; 1,000 of those opened at once took seconds to be listening.
            ",".join(f"{url}{EVENTS_PATH}?depois=0" for url in web.base_urls),
            str(plan),
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=procs.ROOT,
        env=procs._pythonpath(dict(stack.env("live"))),
    )
    try:
        assert client.stdout is not None
        ready_line = await asyncio.wait_for(
            asyncio.to_thread(client.stdout.readline), sizes.timeout
        )
        rss_open = web.rss_mb()
        async with web.http() as http:
            gate = asyncio.Semaphore(50)

            async def post(session: Any) -> None:
                request = session.post_json("/convites", INVITE)
                async with gate:
                    await http.post(
                        request.path, content=request.body_for(0), headers=request.headers
                    )

            await asyncio.gather(*(post(s) for s in senders))
        wait_until(lambda: _count(settings, LIVE_SENT) >= warmed + len(senders), sizes.timeout)
        await asyncio.sleep(1.0)
    finally:
        client.terminate()
        client.wait(30)
    received = json.loads(out.read_text()) if out.exists() else []
    created = {
        int(i): parse_db_time(c) or 0.0
        for i, c in db_rows(settings, "SELECT id, created_at FROM invite_events")
    }
    per_event: dict[int, float] = {}
    latencies = []
    for _stream, event_id, at in received:
        if event_id in created:
            delay = (at - created[event_id]) * 1000
            latencies.append(delay)
            per_event[event_id] = max(per_event.get(event_id, 0.0), delay)
    last = list(per_event.values())
    return {
        "available": True,
        "streams": len(streams),
        "connected": ready_line.strip(),
        "deliveries": len(latencies),
        "p50_ms": pct(latencies, 50),
        "p99_ms": pct(latencies, 99),
        "last_subscriber_p50_ms": pct(last, 50),
        "last_subscriber_p99_ms": pct(last, 99),
        "kb_per_stream": max(0.0, rss_open - rss_idle) * 1024 / len(streams),
    }


# --- 4. backlog -------------------------------------------------------------------------------

ORDER = {"pendente": 0, "enviando": 1, "enviado": 2}
WAITING = 20  # the waiting sender's invites: exactly one page of "Meus convites"


async def _watch_page(web: Any, session: Any, ids: set[str], stop: asyncio.Event) -> dict[str, Any]:
    """The waiting sender reloads "Meus convites" while the backlog drains; is it right, fast?"""
    latencies: list[float] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    headers = session.headers(Accept="application/json")
    async with web.http() as http:
        while not stop.is_set():
            began = time.perf_counter()
            response = await http.get("/convites", headers=headers)
            latencies.append((time.perf_counter() - began) * 1000)
            problems += _page_problems(response, ids, seen)
            await asyncio.sleep(0.1)
        problems += _page_problems(await http.get("/convites", headers=headers), ids, seen)
    return {
        "gets": len(latencies),
        "p50_ms": pct(latencies, 50),
        "p99_ms": pct(latencies, 99),
        "max_ms": max(latencies, default=0.0),
        "problems": problems[:5],
        "final": dict(seen),
    }


def _page_problems(response: httpx.Response, ids: set[str], seen: dict[str, int]) -> list[str]:
    if response.status_code != 200:
        return [f"status {response.status_code}"]
    rows = response.json()["convites"]
    problems = []
    if {row["id"] for row in rows} != ids:
        problems.append("the page does not list exactly the sender's invites")
    for row in rows:
        rank = ORDER.get(row["status"])
        if rank is None:
            problems.append(f"unexpected status {row['status']}")
        elif rank < seen.get(row["id"], 0):
            problems.append(f"{row['id']} went back to {row['status']}")
        else:
            seen[row["id"]] = rank
    return problems


async def backlog(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    env, settings = stack.fresh_database("backlog")
    with stack.web(env, "backlog") as web:
        bulk, waiting = await web.sessions(2)
        await asyncio.to_thread(
            web.wrk,
            bulk.post_json("/convites", INVITE),
            seconds=sizes.timeout,
            limit=sizes.backlog_invites,
            until=lambda: _count(settings) >= sizes.backlog_invites,
        )
        ids = set()
        async with web.http() as http:
            request = waiting.post_json("/convites", INVITE)
            for number in range(WAITING):
                response = await http.post(
                    request.path, content=request.body_for(number), headers=request.headers
                )
                ids.add(response.json()["id"])
        total = _count(settings)
        stop = asyncio.Event()
        watcher = asyncio.create_task(_watch_page(web, waiting, ids, stop))
        with stack.worker(env, "backlog") as worker:
            began, cpu_before = time.time(), procs.cpu_seconds(worker.pid)
            rss_before = procs.rss_mb(worker.pid)
            deadline = time.monotonic() + sizes.timeout
            while _count(settings, "status = 'enviado'") < total and time.monotonic() < deadline:
                await asyncio.sleep(0.25)
            rss_after = procs.rss_mb(worker.pid)
            worker_cpu = (procs.cpu_seconds(worker.pid) - cpu_before) / (time.time() - began)
        stop.set()
        page = await watcher
    _, _, last_sent, sent = _sent_latencies(settings)
    return {
        "invites": total,
        "sent": sent,
        "complete": sent >= total,
        "rate": sent / (last_sent - began) if last_sent > began else 0.0,
        "page": page,
        "waiting_all_sent": all(v == 2 for v in page["final"].values())
        and len(page["final"]) == WAITING,
        "worker_rss_mb": {"before": rss_before, "after": rss_after},
        "worker_cpu": worker_cpu,
    }
