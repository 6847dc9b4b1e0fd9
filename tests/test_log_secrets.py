"""Link tokens never reach a log: uvicorn's access log writes every request's path, and a
``/c/{token}`` or ``/entrar/{token}`` in it would let whoever reads the logs answer an
invitation or sign in as someone, and a ``/descadastro/{id}/{signature}`` opt someone out."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.consent.optout import optout_path
from app.logs import configure_logging, hide_secrets
from tests.fixtures import process_env
from tests.helpers import client_for
from tests.services import AppProcess, free_port, wait_for_port

TOKEN = "6xMHyxBTqKBmRNglAZrkmEdWu5otjloN"
REFUSED_LINES = {"request body too large", "request refused: missing or invalid CSRF token"}


@pytest.fixture
def json_logs() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_access_log_line_of_a_link_hides_its_token(
    json_logs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("web")
    access = logging.getLogger("uvicorn.access")

    # uvicorn's own call (uvicorn/protocols/http/h11_impl.py): the path is an argument.
    for path in (f"/c/{TOKEN}", f"/c/{TOKEN}/aceitar", f"/entrar/{TOKEN}"):
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", path, "1.1", 200)
    logging.getLogger("app.web").info(f"opened /c/{TOKEN}")

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert len(lines) == 4
    assert TOKEN not in str(lines)
    assert '"GET /c/<oculto> HTTP/1.1" 200' in lines[0]["message"]
    assert "/c/<oculto>/aceitar" in lines[1]["message"]
    assert "/entrar/<oculto>" in lines[2]["message"]


def test_an_erasure_confirmation_link_is_hidden_whole() -> None:
    token = "Ab3_-x9KqLmN0pQr.c2lnbmF0dXJlLW9mLXRoZS1yZXF1ZXN0LWlk"
    assert hide_secrets(f"POST /apagar/{token} HTTP/1.1") == "POST /apagar/<oculto> HTTP/1.1"


def test_an_opt_out_links_signature_is_hidden(settings: Settings) -> None:
    """The opt-out signature never expires: whoever read it could opt the invitee out."""
    path = optout_path(settings.secret_key, "Ab3_-x9KqLmN0pQr", "ana@exemplo.com")
    signature = path.rsplit("/", 1)[1]

    for shown in (f"POST {path} HTTP/1.1", f"POST {path}/voltar HTTP/1.1"):
        assert signature not in hide_secrets(shown)
    assert hide_secrets(f"GET {path} HTTP/1.1") == (
        "GET /descadastro/Ab3_-x9KqLmN0pQr/<oculto> HTTP/1.1"
    )


def test_other_paths_are_logged_as_they_are() -> None:
    for path in ("/convites/Ab3_-x9KqLmN0pQr", "/c/curto", "/lotes/novo", "/caixa/x.eml"):
        assert hide_secrets(path) == path


def _refused_requests() -> list[tuple[str, dict[str, Any], int]]:
    """Requests to live-looking token paths that the middlewares refuse before any route: no
    CSRF token (403), a body over ``MAX_BODY_BYTES`` (413)."""
    too_big = {"content": b"x" * 20_000, "headers": {"Content-Type": "text/plain"}}
    return [
        (f"/c/{TOKEN}/aceitar", {"data": {"x": "1"}}, 403),
        (f"/entrar/{TOKEN}", {"data": {"x": "1"}}, 403),
        (f"/c/{TOKEN}/aceitar", too_big, 413),
        (f"/entrar/{TOKEN}", too_big, 413),
    ]


async def test_refused_requests_to_token_paths_log_no_token(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with client_for(settings) as http:
        for path, options, status in _refused_requests():
            assert (await http.post(path, **options)).status_code == status

    refusals = [r for r in caplog.records if r.getMessage() in REFUSED_LINES]
    assert len(refusals) == 4
    # caplog's handler has no filter: the app's own lines must already be clean (httpx's lines
    # are this test's client, not the server).
    for record in (r for r in caplog.records if r.name.startswith("app")):
        assert TOKEN not in record.getMessage() and TOKEN not in str(record.__dict__)
    assert {r.__dict__["path"] for r in refusals} == {"/c/<oculto>/aceitar", "/entrar/<oculto>"}


def test_a_token_in_an_extra_is_hidden_in_the_json_line(
    json_logs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("web")

    logging.getLogger("app.web").warning("refused", extra={"path": f"/entrar/{TOKEN}"})

    [line] = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert line["path"] == "/entrar/<oculto>"


async def test_a_real_uvicorns_log_holds_no_token_after_refused_requests(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    with AppProcess.web(process_env(settings), tmp_path / "web.log", port) as web:
        wait_for_port(port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for path, options, status in _refused_requests():
                assert (await http.post(path, **options)).status_code == status
            assert (await http.get(f"/c/{TOKEN}")).status_code == 404
        web.wait_for_log("/c/<oculto> HTTP/1.1")  # the access log line of the last one

    log = web.log()
    assert TOKEN not in log
    assert log.count("request body too large") == 2 and log.count("/entrar/<oculto>") >= 2
