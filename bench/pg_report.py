"""docs/benchmarks-postgresql.md, from one ``python -m bench --db postgresql`` run: the style,
markers and tables of ``bench.report`` (what stands outside the markers is kept), with the
sections of the scaled-out path: two web processes and two workers on one PostgreSQL."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import report

INTRO = (
    "Every figure is a median of this run; ratios are to baselines measured in the same run, "
    "because absolute numbers drift on a shared machine. Each scenario gets a fresh database on "
    "one private PostgreSQL cluster (fsync on, as SQLite's `synchronous=FULL` in "
    "[the SQLite run](benchmarks.md)), migrated by the app's own migrations, and two web "
    "processes (uvicorn, one port each) and two arq workers. Regenerate with "
    "`make bench DB=postgresql` (`python -m bench --db postgresql --quick` for a quick run)."
)


def _rps(runs: dict[str, list[dict[str, Any]]], name: str) -> float:
    return statistics.median(r["rps"] for r in runs[name])


def _accept_table(data: dict[str, Any]) -> list[str]:
    runs = data["runs"]
    plain, hello = _rps(runs, report.plain_name(data)), _rps(runs, "hello")
    return [
        *report.accept_table(data),
        *[
            f"- {name}: {_rps(runs, name):,.0f} req/s, {_rps(runs, name) / plain:.2f}× the plain "
            f"PostgreSQL INSERT, {_rps(runs, name) / hello:.2f}× hello"
            for name in ("accept JSON", "accept form")
        ],
        "",
    ]


def _section(
    heading: str, note: str, table: Callable[[dict[str, Any]], list[str]]
) -> Callable[[dict[str, Any]], list[str]]:
    return lambda data: [heading, "", note, "", *table(data)]


SECTIONS: report.Sections = {
    "accept": _section(
        "## 1. Accept: `POST /convites`, 50 connections to each of two web processes",
        "One wrk per web process, both at once: req/s, requests and errors are their sums, web "
        "CPU the sum of both processes' shares of one core, wrk CPU that of both wrk processes, "
        "p50 and p99 the slower process's. The plain INSERT endpoint (`/bench/insert`) is one "
        "INSERT per request through an asyncpg pool of at most 10 connections per process, each "
        "its own committed transaction, in the same database.",
        _accept_table,
    ),
    "e2e": _section(
        "## 2. End to end: POST → `enviado`, two web processes and two workers",
        "The burst is wrk against both web processes at once; the paced POSTs go to each in "
        "turn; the arq no-op baseline runs on two worker processes too, its jobs queued once "
        "both are ready.",
        report.e2e_table,
    ),
    "live": _section(
        "## 3. Live: SSE subscribers spread over two web processes",
        "Stream i opens web process i mod 2 (a sender's tabs land on both); the POSTs that cause "
        "the changes go to each process in turn, so a stream's changes come from both web "
        "processes and both workers, through Redis. Memory per stream is the growth of both "
        "processes' RSS over all streams. The bare broadcast is one process holding every stream.",
        report.live_table,
    ),
}


def write(path: Path, meta: dict[str, Any], results: dict[str, Any], stack: Any) -> None:
    report.write(
        path,
        meta,
        results,
        stack,
        title="Benchmarks on PostgreSQL",
        intro=INTRO,
        sections=SECTIONS,
    )
