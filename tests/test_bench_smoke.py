"""The benchmark harness still runs end to end (tiny counts; no timing is asserted here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import BACKEND

ROOT = Path(__file__).resolve().parent.parent

# The bench builds its own stack on SQLite whatever the suite's database is: running it again in
# the PostgreSQL pass would test the same thing twice and cost CI a minute.
pytestmark = pytest.mark.skipif(
    BACKEND == "postgresql", reason="the bench runs on SQLite; the SQLite pass covers it"
)


def test_the_tiny_benchmark_writes_every_section_and_the_chart(tmp_path: Path) -> None:
    report = tmp_path / "docs" / "benchmarks.md"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--tiny", "--out", str(report), "--folder", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
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
