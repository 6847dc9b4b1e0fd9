"""What the form endpoints share: reading a body (form or JSON), waiting words, and publishing
a fresh change (enqueue + wake-up) right after its commit."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.invites.records import Change
from app.live.wakeups import Announcer
from app.sending.queue import Publisher
from app.web.common import is_htmx, render, wants_json


class BadBody(ValueError):
    """The request body is not something we can read (malformed JSON, not an object)."""


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


NOT_JSON_TYPED = (
    "Envie o corpo JSON com o cabeçalho Content-Type: application/json (ou envie um formulário)."
)


async def read_body(request: Request) -> dict[str, Any]:
    kind = request.headers.get("content-type", "").lower()
    if kind.startswith("application/json"):
        try:
            data = json.loads(await request.body())
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise BadBody("O corpo da requisição não é um JSON válido.") from None
        if not isinstance(data, dict):
            raise BadBody('Envie um objeto JSON, por exemplo {"email": "ana@exemplo.com"}.')
        return data
    # JSON under another type (text/plain, curl -d's form type, none) would read as an empty
    # form: "informe o e-mail" about a body that has one. No form's body starts with "{".
    if kind and not kind.startswith(FORM_TYPES):
        raise BadBody(NOT_JSON_TYPED)
    if not kind.startswith(FORM_TYPES[1]) and (await request.body()).lstrip().startswith(b"{"):
        raise BadBody(NOT_JSON_TYPED)
    form = await request.form()
    return {key: value for key, value in form.items() if isinstance(value, str)}


async def publish_fast(request: Request, change: Change) -> None:
    """Enqueue right after the commit (if Redis is down the outbox relay does it later) and
    wake the sender's pages, both at once."""
    publisher: Publisher = request.state.publisher
    announcer: Announcer = request.state.announcer
    await asyncio.gather(publisher.publish_or_leave([change]), announcer.announce(change))


def wait_text(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} segundos"
    if seconds < 2 * 3600:
        return f"{-(-seconds // 60)} minutos"
    return f"{-(-seconds // 3600)} horas"


def typed_values(data: dict[str, Any], *fields: str) -> dict[str, str]:
    """What the person typed in ``fields``, to show again in the form (text only)."""
    return {key: value if isinstance(value := data.get(key), str) else "" for key in fields}


def invalid_form(
    request: Request, errors: dict[str, str], values: dict[str, str], form: str, form_id: str
) -> Response | None:
    """422 for JSON and htmx clients (htmx: the ``form`` fragment replaces ``#form_id``, the
    rest of the page stays); ``None`` for a plain form, whose caller renders the whole page."""
    if wants_json(request):
        return JSONResponse({"erro": "Confira os campos.", "campos": errors}, status_code=422)
    if is_htmx(request):
        # The form posts with hx-swap="none" (the row goes to the list); errors replace the form.
        return render(
            request,
            form,
            {"errors": errors, "values": values},
            status_code=422,
            headers={"HX-Retarget": f"#{form_id}", "HX-Reswap": "outerHTML"},
        )
    return None
