"""Structured JSON logs, each line carrying the correlation id of the work it is about."""

from __future__ import annotations

import json
import logging
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
    """Drop arq's start/finish lines for the reconciliation cron (every few seconds, forever).

    What a sweep did is logged by the sweep itself when it did anything.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "cron:reconcile" not in record.getMessage()


def configure_logging(process: str, level: int = logging.INFO) -> None:
    """Send every logger's records to stderr as JSON lines (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(process))
    handler.addFilter(QuietSweeps())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("arq", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
