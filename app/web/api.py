"""``/api/v1``: the same invites, limits and messages as the pages, for other programs.

Every endpoint is a page handler (``app.web.invites``, ``app.web.cancelling``,
``app.web.batches``) behind ``api_endpoint``: the account comes from ``Authorization: Bearer
<chave>`` only (a session cookie never authenticates here, so no CSRF token is needed either:
``app.web.middleware.csrf``), every answer is JSON (``app.web.common.wants_json``), and a POST
with ``Idempotency-Key`` is done once (``app.api.idempotency``). Whatever the pages check before
they write an invite, the API checks too, because it is the same code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from functools import wraps
from pathlib import Path

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.api import idempotency, keys
from app.clock import utcnow
from app.invites import queries
from app.invites.status import Status
from app.web.common import (
    API_PREFIX,
    bearer_token,
    db_of,
    error_response,
    sender_id,
    settings_of,
)
from app.web.present import invite_json

Handler = Callable[[Request], Awaitable[Response]]
PREFIX = f"{API_PREFIX}v1"
#: Set on every handler ``api_endpoint`` wraps: CSRF lets anything under ``API_PREFIX`` through,
#: so a route there that does not authenticate by API key alone would be open to forgery.
MARK = "api_key_only"
OPENAPI = Path(__file__).resolve().parent.parent / "api" / "openapi.json"

NO_KEY = (
    "Envie sua chave de API no cabeçalho Authorization: Bearer <chave>. Crie uma em /conta/chaves."
)
BAD_KEY = "Chave de API inválida ou revogada."
BAD_IDEMPOTENCY_KEY = (
    f"A Idempotency-Key deve ter de 1 a {idempotency.MAX_KEY_CHARS} caracteres visíveis (ASCII)."
)
OTHER_REQUEST = (
    "Esta Idempotency-Key já foi usada com outro pedido. Use uma chave nova para um pedido novo."
)
IN_PROGRESS = (
    "Um pedido com esta Idempotency-Key ainda está em andamento. Tente de novo em instantes."
)
#: Fields of an answer shown once and never kept: a replay answers without them (a webhook's
#: signing secret must not sit in ``idempotency_keys.body``).
SHOWN_ONCE = frozenset({"secret"})
_VISIBLE_ASCII = re.compile(rf"[\x21-\x7e]{{1,{idempotency.MAX_KEY_CHARS}}}")


def _unauthorized(message: str) -> Response:
    return JSONResponse(
        {"erro": message}, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="api"'}
    )


def _as_api(response: Response) -> Response:
    """A page handler's answer as the API gives it: its Location under ``/api/v1``."""
    location = response.headers.get("location")
    if location is not None and location.startswith(("/convites/", "/lotes/")):
        response.headers["location"] = PREFIX + location
    return response


def api_endpoint(handler: Handler) -> Handler:
    """``handler`` for the account of the request's API key (401 without a live one)."""

    @wraps(handler)
    async def endpoint(request: Request) -> Response:
        given = bearer_token(request.headers.get("authorization", ""))
        if not given:
            return _unauthorized(NO_KEY)
        use = await keys.find(db_of(request), given)
        if use is None:
            return _unauthorized(BAD_KEY)
        # ``app.web.identity.identify`` takes the account found here; the cookie is not read.
        request.state.account = use.account
        idempotency_key = request.headers.get("idempotency-key")
        if request.method == "POST" and idempotency_key is not None:
            return await _once(request, use.key, idempotency_key, handler)
        return _as_api(await handler(request))

    setattr(endpoint, MARK, True)
    return endpoint


def is_api_endpoint(handler: object) -> bool:
    """Whether ``handler`` authenticates by API key alone (it was wrapped by ``api_endpoint``)."""
    return getattr(handler, MARK, False) is True


async def _once(request: Request, key: keys.ApiKey, given: str, handler: Handler) -> Response:
    """The handler run once per (API key, Idempotency-Key); a repeat gets the first answer."""
    if not _VISIBLE_ASCII.fullmatch(given):
        return error_response(request, 400, BAD_IDEMPOTENCY_KEY)
    db = db_of(request)
    request_hash = idempotency.fingerprint(request.method, request.url.path, await request.body())
    outcome = await idempotency.claim(db, key.id, given, request_hash)
    if isinstance(outcome, idempotency.OtherRequest):
        return error_response(request, 422, OTHER_REQUEST)
    if isinstance(outcome, idempotency.InProgress):
        return JSONResponse({"erro": IN_PROGRESS}, status_code=409, headers={"Retry-After": "1"})
    if isinstance(outcome, idempotency.Stored):
        headers = {"Idempotent-Replayed": "true"}
        if outcome.location:
            headers["Location"] = outcome.location
        return Response(
            outcome.body, outcome.status_code, headers=headers, media_type="application/json"
        )
    kept = False
    try:
        response = _as_api(await handler(request))
        # A 5xx or 429 is not an answer to keep: the same request may well succeed later.
        if response.status_code < 500 and response.status_code != 429:
            body = _kept_body(bytes(response.body).decode())
            location = response.headers.get("location")
            # Shielded: once the work is done, a hang-up must not leave its claim unanswered.
            with anyio.CancelScope(shield=True):
                await idempotency.complete(
                    db, outcome.claim_id, response.status_code, location, body
                )
            kept = True
        return response
    finally:
        if not kept:
            # Failed, cancelled (a hang-up, a shutdown) or not worth keeping: give the key back
            # now rather than leave it blocked until its lease runs out.
            with anyio.CancelScope(shield=True):
                await idempotency.release(db, outcome.claim_id)


def _kept_body(body: str) -> str:
    """The answer as it is kept for a replay: without what is shown only once."""
    try:
        answer = json.loads(body)
    except ValueError:
        return body
    if not isinstance(answer, dict) or not SHOWN_ONCE & answer.keys():
        return body
    kept = {name: value for name, value in answer.items() if name not in SHOWN_ONCE}
    return json.dumps(kept, ensure_ascii=False, separators=(",", ":"))


_STATUSES = {status.value: status for status in Status}


@api_endpoint
async def list_invites(request: Request) -> Response:
    """GET /api/v1/convites?status=a,b&depois=<cursor>: newest first, a page at a time."""
    raw_status = request.query_params.get("status", "")
    names = [name for name in raw_status.split(",") if name]
    unknown = [name for name in names if name not in _STATUSES]
    if unknown:
        known = ", ".join(_STATUSES)
        return error_response(request, 422, f"Status desconhecido: {unknown[0]}. Use: {known}.")
    statuses = [_STATUSES[name] for name in names] or None
    raw_after = request.query_params.get("depois")
    if raw_after is not None and not re.fullmatch(r"[0-9]{1,18}", raw_after):
        return error_response(request, 422, "O cursor em depois= não é válido.")
    page = await queries.invite_page(
        db_of(request),
        sender_id(request),
        before=int(raw_after) if raw_after is not None else None,
        statuses=statuses,
    )
    now, slow_after = utcnow(), settings_of(request).slow_after_seconds
    following = None
    if page.next_before is not None:
        following = f"{PREFIX}/convites?depois={page.next_before}"
        if raw_status:
            following += f"&status={raw_status}"
    return JSONResponse(
        {
            "convites": [invite_json(row, now, slow_after) for row in page.invites],
            "proxima_pagina": following,
        }
    )


async def openapi(request: Request) -> Response:
    """GET /api/v1/openapi.json: the API's description (public: it holds no secret)."""
    return JSONResponse(json.loads(OPENAPI.read_text()))
