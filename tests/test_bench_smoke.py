"""The benchmark harness still runs end to end (tiny counts; no timing is asserted here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import BACKEND

ROOT = Path(__file__).resolve().parent.parent

# The bench builds its own stack whatever the suite's database is (`--db postgresql`: its own
# cluster, two web processes and two workers): both run once, in the SQLite pass.
ONCE = pytest.mark.skipif(BACKEND == "postgresql", reason="the SQLite pass runs both benches")


def _tiny_bench(tmp_path: Path, report: Path, *extra: str) -> None:
    args = [
        sys.executable,
        "-m",
        "bench",
        "--tiny",
        "--out",
        str(report),
        "--folder",
        str(tmp_path),
    ]
    run = subprocess.run(
        [*args, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.long
@ONCE
def test_the_tiny_benchmark_writes_every_section_and_the_chart(tmp_path: Path) -> None:
    report = tmp_path / "docs" / "benchmarks.md"
    _tiny_bench(tmp_path, report)
    text = report.read_text()
    for heading in (
        "## 1. Accept",
        "## 2. End to end",
        "## 3. Live",
        "## 4. Backlog",
        "## 5. Batch",
        "## 6. What a user would build instead",
        "## 7. Backlog drained by one worker process, then by two",
        "## 8. Accept paced at 300 requests/s",
        "## Memory and start-up",
    ):
        assert heading in text
    assert text.count("**target ") >= 4
    assert "| sqlite3 insert |" in text and "arq no-op" in text
    assert "× the bare broadcast" in text and "bare sse-starlette broadcast" in text
    assert (report.parent / "benchmarks.png").stat().st_size > 0


@pytest.mark.long
@ONCE
def test_the_tiny_postgresql_benchmark_runs_the_scaled_out_path(tmp_path: Path) -> None:
    report = tmp_path / "docs" / "benchmarks-postgresql.md"
    _tiny_bench(tmp_path, report, "--db", "postgresql")
    text = report.read_text()
    for heading in (
        "## 1. Accept: `POST /convites`, 50 connections to each of two web processes",
        "## 2. End to end: POST → `enviado`, two web processes and two workers",
        "## 3. Live: SSE subscribers spread over two web processes",
        "## Memory and start-up",
    ):
        assert heading in text
    assert "the scenario failed" not in text
    assert "| postgresql insert |" in text and "arq no-op" in text
    assert "| postgresql | " in text and "fsync on" in text
    assert "× the bare broadcast" in text and "bare sse-starlette broadcast" in text
    # Both web processes and both workers of every scenario started and were measured.
    for process in ("accept/web1", "e2e/web1", "live/web1", "e2e/w1", "live/w1"):
        assert f"{process} after" in text
    assert (report.parent / "benchmarks-postgresql.png").stat().st_size > 0
