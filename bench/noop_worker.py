"""The baseline worker: arq running no-op jobs with the app worker's own queue settings and event
loop (``python -m bench.noop_worker``)."""

from __future__ import annotations

from typing import Any

from arq.connections import RedisSettings

from app.config import load_settings
from app.sending.worker import worker_options

QUEUE = "bench:noop"


async def noop(ctx: dict[str, Any], index: int) -> int:
    return index


def _settings_class() -> type:
    options = worker_options(load_settings())
    return type(
        "WorkerSettings",
        (),
        {
            "functions": [noop],
            "queue_name": QUEUE,
            "redis_settings": RedisSettings.from_dsn(load_settings().redis_url),
            "poll_delay": options["poll_delay"],
            "max_jobs": options["max_jobs"],
            "keep_result": 600,
        },
    )


def __getattr__(name: str) -> Any:
    if name == "WorkerSettings":
        return _settings_class()
    raise AttributeError(name)


if __name__ == "__main__":
    import logging

    from arq.worker import Worker, get_kwargs

    from app.sending.supervise import use_uvloop

    logging.basicConfig(level=logging.INFO)  # arq's "Starting worker" line: the bench waits for it
    use_uvloop()
    Worker(**get_kwargs(_settings_class())).run()
