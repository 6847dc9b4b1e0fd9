"""``/caixa``: the dev mailbox, to see what was really sent (only when MAILBOX_DIR is set).

Each message has **Simular devolução**: a real bounce report sent to the bounce receiver
(``BOUNCE_LISTEN``), as the recipient's server would send it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import aiosmtplib
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from app.bounces.simulate import CannotSimulate, send_report
from app.dev.mailbox import list_messages, read_message
from app.web.common import error_response, render, settings_of

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[0-9]+-[0-9a-f]{8}$")
#: Links a message's text carries (a sign-in link, an invitation), to click from the mailbox.
_LINK = re.compile(r"https?://[^\s<>\"']+")


def _kept(request: Request, name: str) -> Path | None:
    folder = settings_of(request).mailbox_dir
    assert folder is not None  # routed only when MAILBOX_DIR is set (app.web.routes)
    path = folder / f"{name}.eml"
    return path if _NAME.match(name) and path.exists() else None


async def inbox(request: Request) -> Response:
    """GET /caixa: every message, newest first."""
    folder = settings_of(request).mailbox_dir
    assert folder is not None
    bounced = request.query_params.get("devolvida", "")
    return render(
        request,
        "caixa.html",
        {"messages": list_messages(folder), "bounced": bounced if _NAME.match(bounced) else ""},
    )


async def message(request: Request) -> Response:
    """GET /caixa/{name}: one message, with its links to click."""
    path = _kept(request, request.path_params["name"])
    if path is None:
        return error_response(request, 404, "Mensagem não encontrada.")
    found = read_message(path)
    links = list(dict.fromkeys(_LINK.findall(found.text)))
    return render(request, "caixa_mensagem.html", {"message": found, "links": links})


async def simulate_bounce(request: Request) -> Response:
    """POST /caixa/{name}/devolver: send a bounce report of this message to the receiver."""
    name = request.path_params["name"]
    path = _kept(request, name)
    if path is None:
        return error_response(request, 404, "Mensagem não encontrada.")
    host, port = settings_of(request).bounce_listen
    try:
        await send_report(path.read_bytes(), host, port)
    except CannotSimulate as exc:
        return error_response(request, 409, f"Não dá para simular: {exc}.")
    except (aiosmtplib.SMTPException, OSError) as exc:
        log.warning("simulated bounce not delivered", extra={"error": repr(exc)})
        return error_response(
            request,
            502,
            "O receptor de devoluções não respondeu. Ele está rodando (python -m app bounces)?",
        )
    return RedirectResponse(f"/caixa?devolvida={name}", status_code=303)
