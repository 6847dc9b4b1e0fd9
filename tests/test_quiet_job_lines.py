"""The worker's log says each attempt twice (``sending``, ``attempt finished``), not four times:
arq's own start and finish line of every job are dropped before they are formatted."""

from __future__ import annotations

import json
import logging

import pytest

from app.logs import configure_logging
from tests.test_log_secrets import json_logs

__all__ = ["json_logs"]


def test_arqs_job_lines_are_dropped_and_its_other_lines_kept(
    json_logs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("worker")
    configure_logging("worker")  # idempotent: one filter
    arq = logging.getLogger("arq.worker")
    # arq's own calls (arq/worker.py, run_job and start-up).
    arq.info("%6.2fs → %s(%s)%s", 0.01, "convite:x:1:2:send_invite", "'x', 1", "")
    arq.info("%6.2fs ← %s ● %s", 0.02, "convite:x:1:2:send_invite", "'enviado'")
    arq.info("%6.2fs ↻ %s retrying job in %0.2fs", 0.03, "convite:y:1:3:send_invite", 5.0)
    arq.info("Starting worker for %d functions: %s", 1, "send_invite")
    logging.getLogger("app.sending.worker").info("sending", extra={"invite": "x", "attempt": 1})

    messages = [json.loads(line)["message"] for line in capsys.readouterr().err.splitlines()]
    assert messages == [
        "  0.03s ↻ convite:y:1:3:send_invite retrying job in 5.00s",
        "Starting worker for 1 functions: send_invite",
        "sending",
    ]
    assert sum(1 for f in arq.filters if type(f).__name__ == "QuietJobs") == 1
