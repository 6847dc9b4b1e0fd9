"""``/caixa``: the dev mailbox, to see what was really sent (only when MAILBOX_DIR is set)."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.mailbox import list_messages, read_message
from app.web.common import error_response, render

_NAME = re.compile(r"^[0-9]+-[0-9a-f]{8}$")
#: Links a message's text carries (a sign-in link, an invitation), to click from the mailbox.
_LINK = re.compile(r"https?://[^\s<>\"']+")


def routes(folder: Path) -> list[Route]:
    async def inbox(request: Request) -> Response:
        return render(request, "caixa.html", {"messages": list_messages(folder)})

    async def message(request: Request) -> Response:
        name = request.path_params["name"]
        path = folder / f"{name}.eml"
        if not _NAME.match(name) or not path.exists():
            return error_response(request, 404, "Mensagem não encontrada.")
        found = read_message(path)
        links = list(dict.fromkeys(_LINK.findall(found.text)))
        return render(request, "caixa_mensagem.html", {"message": found, "links": links})

    return [Route("/caixa", inbox), Route("/caixa/{name}", message)]
