"""Link tokens never reach a log: uvicorn's access log writes every request's path, and a
``/c/{token}`` or ``/entrar/{token}`` in it would let whoever reads the logs answer an
invitation or sign in as someone."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from app.logs import configure_logging, hide_secrets

TOKEN = "6xMHyxBTqKBmRNglAZrkmEdWu5otjloN"


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


def test_other_paths_are_logged_as_they_are() -> None:
    for path in ("/convites/Ab3_-x9KqLmN0pQr", "/c/curto", "/lotes/novo", "/caixa/x.eml"):
        assert hide_secrets(path) == path
