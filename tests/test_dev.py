"""`python -m app dev`: everything for one person, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.fixtures import BACKEND
from tests.services import free_port, port_open
from tests.signing_in import sign_in_through_the_dev_mailbox
from tests.waiting import until

# `python -m app dev` always runs its own embedded SQLite (the environment's DATABASE_URL is
# dropped): the PostgreSQL pass would only repeat these.
pytestmark = pytest.mark.skipif(BACKEND == "postgresql", reason="dev runs its own SQLite")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _wait_until_serving(dev: subprocess.Popen[str], port: int, log: Path) -> None:
    """The web answers on ``port``; a dev that exits or stalls fails with what it said."""
    until(
        lambda: dev.poll() is not None or port_open(port),
        60,  # four processes starting on a busy 2-core machine
        lambda: f"dev serving on {port}:\n{log.read_text()[-3000:]}",
    )
    if dev.poll() is not None:
        raise AssertionError(f"dev exited with {dev.returncode}:\n{log.read_text()}")


def _read_until(dev: subprocess.Popen[str], end: str) -> str:
    """What dev printed, up to the line holding ``end`` (or until it exits)."""
    assert dev.stdout is not None
    lines = []
    for line in dev.stdout:
        lines.append(line)
        if end in line:
            break
    return "".join(lines)


def _wait_for_status(http: httpx.Client, location: str, status: str) -> None:
    until(
        lambda: (
            http.get(location, headers={"Accept": "application/json"}).json()["status"] == status
        ),
        what=f"the invite {status}",
    )


def test_dev_runs_every_part_and_ctrl_c_stops_them_all(tmp_path: Path) -> None:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "SMTP_URL"))
    }
    log = tmp_path / "dev.log"
    children: list[int] = []
    with log.open("w") as errors:
        dev = subprocess.Popen(
            [sys.executable, "-m", "app", "dev", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            start_new_session=True,  # its own group: the cleanup below reaches every child
        )
    try:
        _wait_until_serving(dev, port, log)
        children = _children_of(dev.pid)
        assert len(children) == 5  # redis-server, mailbox, bounce receiver, web, worker
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            sign_in_through_the_dev_mailbox(http, tmp_path / "var" / "caixa")
            token = http.get("/convites", headers={"Accept": "application/json"}).json()
            created = http.post(
                "/convites",
                json={"email": "dev@exemplo.com"},
                headers={"Accept": "application/json", "X-CSRF-Token": token["csrf_token"]},
            )
            assert created.status_code == 202
            _wait_for_status(http, created.headers["location"], "enviado")
            inbox = http.get("/caixa")
            assert "dev@exemplo.com" in inbox.text
            [kept] = (tmp_path / "var" / "caixa").glob("*.eml")
            # Simular devolução: a real report through the real receiver turns it devolvido.
            simulated = http.post(
                f"/caixa/{kept.stem}/devolver", headers={"X-CSRF-Token": token["csrf_token"]}
            )
            assert simulated.status_code == 303, simulated.text
            _wait_for_status(http, created.headers["location"], "devolvido")

            # The mailbox answers by address, so QA reaches every state with dev alone.
            def invite(email: str) -> str:
                sent = http.post(
                    "/convites",
                    json={"email": email},
                    headers={"Accept": "application/json", "X-CSRF-Token": token["csrf_token"]},
                )
                assert sent.status_code == 202, sent.text
                return str(sent.headers["location"])

            refused, unstable, stalled = (
                invite(email)
                for email in ("recusa@exemplo.com", "instavel@exemplo.com", "lento@exemplo.com")
            )
            _wait_for_status(http, refused, "falhou")
            _wait_for_status(http, unstable, "enviado")
            assert (
                http.get(unstable, headers={"Accept": "application/json"}).json()["tentativa"] == 2
            )
            _wait_for_status(http, stalled, "incerto")

            # The operator page opens for the local person with the token dev printed.
            said = _read_until(dev, "Press Ctrl-C")
            [ops_token] = re.findall(r"/operacao  token: (\S+)", said)
            ops = http.get("/operacao", headers={"Authorization": f"Bearer {ops_token}"})
            assert ops.status_code == 200

        # Redis is out of the terminal's process group, so a Ctrl-C reaches it only through
        # dev, last: the worker and the web still talk to it while they stop.
        [redis] = [pid for pid in children if b"redis-server" in _cmdline(pid)]
        assert os.getpgid(redis) != os.getpgid(dev.pid)
        os.killpg(dev.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
        assert dev.wait(40) == 0
        assert "http://127.0.0.1:" in said
        assert [pid for pid in children if _alive(pid)] == []
        assert not list((tmp_path / "var").rglob("*.pid"))
        stopped = log.read_text()
        assert "worker stopped" in stopped
        assert "could not withdraw the heartbeat" not in stopped
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(dev.pid, signal.SIGKILL)  # only if something was left running
        for pid in children:  # Redis has a session of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        dev.wait()
