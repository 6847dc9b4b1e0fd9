"""Structured JSON logs, each line carrying the correlation id of the work it is about."""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

#: The correlation id of the request or job this task is working on.
correlation_id: ContextVar[str | None] = ContextVar("correlation_id", default=None)

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, correlation id and extras."""

    def __init__(self, process: str) -> None:
        super().__init__()
        self.process_name = process

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "process": self.process_name,
            "logger": record.name,
            "message": record.getMessage(),
        }
        current = correlation_id.get()
        if current:
            entry["correlation_id"] = current
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class QuietSweeps(logging.Filter):
    """Drop arq's start/finish lines for the reconciliation cron (every few seconds, forever):
    the sweep logs what it did when it did anything."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "cron:reconcile" not in record.getMessage()


class QuietJobs(logging.Filter):
    """Drop arq's own start (``→``) and finish (``←``) line of every job before it is formatted:
    the worker's own lines say the same with the invite and attempt, and doubled lines cost the
    worker real time under load. arq's failures, retries, start-up and shutdown lines stay."""

    QUIET = frozenset({"%6.2fs → %s(%s)%s", "%6.2fs ← %s ● %s"})  # arq/worker.py, run_job

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in self.QUIET


#: A link that signs a person in (``/entrar/{token}``), answers an invitation (``/c/{token}``),
#: confirms an erasure (``/apagar/{id}.{tag}``) or opts out (``/descadastro/{id}/{signature}``:
#: its signature never expires, so it is hidden like the rest; the invite's id stays).
_SECRET_PATH = re.compile(
    r"(/(?:c|entrar|apagar)/|/descadastro/[A-Za-z0-9_-]{1,32}/)[A-Za-z0-9_.-]{16,}"
)
HIDDEN = r"\1<oculto>"


def hide_secrets(text: str) -> str:
    """``text`` with every link token replaced: logs are read by more people than the inbox."""
    return _SECRET_PATH.sub(HIDDEN, text)


class SecretPaths(logging.Filter):
    """Hide link tokens in every record: uvicorn's access log writes each request's path as an
    argument, our own lines may carry one in an extra (``path``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = hide_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(
                hide_secrets(arg) if isinstance(arg, str) else arg for arg in record.args
            )
        for key, value in record.__dict__.items():
            if key not in _STANDARD and isinstance(value, str):
                record.__dict__[key] = hide_secrets(value)
        return True


def configure_logging(process: str, level: int = logging.INFO) -> None:
    """Send every logger's records to stderr as JSON lines (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(process))
    handler.addFilter(QuietSweeps())
    handler.addFilter(SecretPaths())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("arq", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    jobs = logging.getLogger("arq.worker")
    if not any(isinstance(f, QuietJobs) for f in jobs.filters):
        jobs.addFilter(QuietJobs())
