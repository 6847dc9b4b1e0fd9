"""``python -m bench [--quick] [--db postgresql]``: run the scenarios of issue #7 and write
docs/benchmarks.md; on PostgreSQL, accept, end to end and live with two web processes and two
workers, written to docs/benchmarks-postgresql.md."""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench import baselines, batch, load, paced_accept, pg_report, report, scaling, scenarios
from bench.procs import ROOT, tool_version
from bench.stack import Stack

SCENARIOS = {
    "accept": scenarios.accept,
    "e2e": scenarios.end_to_end,
    "live": scenarios.live,
    "backlog": scenarios.backlog,
    "batch": batch.batch,
    "naive": baselines.naive,
    "workers": scaling.workers,
    "paced": paced_accept.paced,
}
#: What ``--db postgresql`` runs (the scaled-out path: two web processes, two workers).
POSTGRESQL = ("accept", "e2e", "live")


def machine() -> dict[str, str]:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    memory = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores (shared with other work: see load)",
        "memory": f"{int(memory) / 1024 / 1024:.1f} GiB",
        "load average at start (1/5/15 min)": " / ".join(f"{v:.2f}" for v in os.getloadavg()),
        "os": platform.platform(),
    }


def versions(database: dict[str, str]) -> dict[str, str]:
    """Every tool's version, the database's (``Stack.versions``) after Python's."""
    found = {"python": platform.python_version(), **database}
    found["redis-server"] = tool_version(["redis-server", "--version"])
    found["wrk"] = tool_version(["wrk", "--version"])
    for package in (
        "uvicorn",
        "uvloop",
        "httptools",
        "starlette",
        "sqlalchemy",
        "aiosqlite" if "sqlite" in database else "asyncpg",
        "arq",
        "redis",
        "aiosmtplib",
    ):
        try:
            found[package] = version(package)
        except Exception:
            found[package] = "missing"
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = {"full": scenarios.FULL, "quick": scenarios.QUICK, "tiny": scenarios.TINY}[args.mode]
    folder = args.folder / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    postgresql = args.db == "postgresql"
    stack = Stack(folder)
    if postgresql:
        from bench.postgres import PgStack  # it needs the tests' PostgresServer

        stack = PgStack(folder)
    results: dict[str, Any] = {}
    began = time.monotonic()
    machine_at_start = machine()
    try:
        stack.start()
        database = stack.versions()
        for name in args.only or (POSTGRESQL if postgresql else SCENARIOS):
            print(f"[bench] {name}…", file=sys.stderr, flush=True)
            try:
                results[name] = await SCENARIOS[name](stack, sizes)
            except Exception:
                results[f"{name}_error"] = traceback.format_exc(limit=8)
                print(results[f"{name}_error"], file=sys.stderr)
    finally:
        stack.stop()
    meta = {
        "mode": args.mode,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": time.monotonic() - began,
        "machine": {
            **machine_at_start,
            "load average at end": " / ".join(f"{v:.2f}" for v in os.getloadavg()),
        },
        "versions": versions(database),
        "chart": args.chart.name,
    }
    report.chart(args.out.parent / args.chart.name, results, goals=not postgresql)
    (pg_report if postgresql else report).write(args.out, meta, results, stack)
    return {"meta": meta, "results": results, "startups": stack.startups, "rss": stack.rss}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick",
        dest="mode",
        action="store_const",
        const="quick",
        default="full",
        help="a run of about one minute with smaller counts",
    )
    parser.add_argument(
        "--tiny",
        dest="mode",
        action="store_const",
        const="tiny",
        help="seconds, for the smoke test: proves the harness, measures nothing",
    )
    parser.add_argument("--only", nargs="*", choices=list(SCENARIOS), help="run only these")
    parser.add_argument(
        "--db",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="postgresql: a private cluster, two web processes and two workers; "
        f"runs {', '.join(POSTGRESQL)}",
    )
    parser.add_argument("--out", type=Path, help="default: docs/benchmarks[-postgresql].md")
    parser.add_argument("--chart", type=Path, help="default: benchmarks[-postgresql].png")
    parser.add_argument("--folder", type=Path, default=ROOT / "var" / "bench")
    args = parser.parse_args(argv)
    suffix = "-postgresql" if args.db == "postgresql" else ""
    if args.db == "postgresql" and set(args.only or ()) - set(POSTGRESQL):
        parser.error(f"--db postgresql runs only {', '.join(POSTGRESQL)}")
    args.out = args.out or ROOT / "docs" / f"benchmarks{suffix}.md"
    args.chart = args.chart or Path(f"benchmarks{suffix}.png")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not load.wrk_available():
        print("wrk is missing: run ./scripts/install-system-deps.sh", file=sys.stderr)
        return 2
    outcome = asyncio.run(run(args))
    print(f"[bench] wrote {args.out}", file=sys.stderr)
    return 1 if any(key.endswith("_error") for key in outcome["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
