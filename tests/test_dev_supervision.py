"""`python -m app dev` keeps the app up: a stopped worker stays stopped (and sending is
paused), a crashed child comes back, and Ctrl-C still stops everything."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.fixtures import BACKEND
from tests.helpers import sync_api_headers
from tests.services import free_port
from tests.signing_in import sign_in_through_the_dev_mailbox
from tests.test_dev import _alive, _children_of, _wait_until_serving
from tests.waiting import until

# `python -m app dev` always runs its own embedded SQLite (the environment's DATABASE_URL is
# dropped): the PostgreSQL pass would only repeat these.
pytestmark = pytest.mark.skipif(BACKEND == "postgresql", reason="dev runs its own SQLite")


@dataclass
class Dev:
    process: subprocess.Popen[str]
    out: Path
    url: str

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def child(self, marker: str) -> int | None:
        """The pid of dev's child whose command line contains ``marker``."""
        for pid in _children_of(self.process.pid):
            with contextlib.suppress(OSError):
                if (
                    marker
                    in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                ):
                    return pid
        return None

    def wait_for(self, what: Callable[[], object], timeout: float, why: str) -> None:
        until(
            lambda: what() or self.process.poll() is not None,
            timeout,
            lambda: f"{why}:\n{self.output()[-4000:]}",
        )
        assert self.process.poll() is None, f"dev exited:\n{self.output()}"

    def said(self, text: str, timeout: float = 30) -> None:
        self.wait_for(lambda: text in self.output(), timeout, f"dev did not say {text!r}")


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "SMTP_URL"))
    }
    out = tmp_path / "dev.out"
    with out.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "dev", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        _wait_until_serving(process, port, out)
        yield Dev(process, out, f"http://127.0.0.1:{port}")
    finally:
        for pid in _children_of(process.pid):  # Redis has a session of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # only if something was left running
        process.wait()


def status_of(http: httpx.Client, location: str) -> str:
    status: str = http.get(location, headers={"Accept": "application/json"}).json()["status"]
    return status


def post(http: httpx.Client, email: str) -> str:
    response = http.post("/convites", json={"email": email}, headers=sync_api_headers(http))
    assert response.status_code == 202, response.text
    return response.headers["location"]


def test_a_stopped_worker_stays_stopped_until_asked_and_a_crashed_one_comes_back(
    dev: Dev,
) -> None:
    worker = dev.child("app worker")
    assert worker is not None
    with httpx.Client(base_url=dev.url, timeout=10) as http:
        sign_in_through_the_dev_mailbox(http, dev.out.parent / "var" / "caixa")
        os.kill(worker, signal.SIGTERM)
        dev.said("worker was stopped")
        assert f"kill -USR1 {dev.process.pid}" in dev.output()
        waiting = post(http, "parado@exemplo.com")
        time.sleep(2)
        assert dev.child("app worker") is None  # still stopped: not restarted behind QA's back
        assert status_of(http, waiting) == "pendente"
        assert http.get("/").status_code == 200

        os.kill(dev.process.pid, signal.SIGUSR1)
        dev.said("worker started again")
        dev.wait_for(lambda: status_of(http, waiting) == "enviado", 40, "the invite went")

        crashed = dev.child("app worker")
        assert crashed is not None
        os.kill(crashed, signal.SIGKILL)
        dev.said("worker crashed (signal SIGKILL); restarting it")
        dev.said("worker restarted")
        dev.wait_for(lambda: dev.child("app worker") not in (None, crashed), 30, "a new worker")


def test_redis_and_the_web_are_restarted_when_they_crash_and_ctrl_c_stops_all(dev: Dev) -> None:
    redis = dev.child("redis-server")
    web = dev.child("uvicorn")
    assert redis is not None and web is not None
    os.kill(redis, signal.SIGKILL)
    dev.said("redis-server crashed")
    dev.said("redis-server restarted")
    os.kill(web, signal.SIGKILL)
    dev.said("web crashed")
    dev.said("web restarted")

    with httpx.Client(base_url=dev.url, timeout=10) as http:
        dev.wait_for(lambda: _serves(http), 60, "the web serves again")
        sign_in_through_the_dev_mailbox(http, dev.out.parent / "var" / "caixa")
        sent = post(http, "depois@exemplo.com")
        dev.wait_for(lambda: status_of(http, sent) == "enviado", 60, "an invite goes after it")

    children = _children_of(dev.process.pid)
    dev.process.send_signal(signal.SIGINT)
    assert dev.process.wait(60) == 0
    assert [pid for pid in children if _alive(pid)] == []
    assert "crashed" not in dev.output().split("web restarted", 1)[1]  # Ctrl-C is no crash


def _serves(http: httpx.Client) -> bool:
    try:
        return http.get("/").status_code == 200
    except httpx.HTTPError:
        return False
