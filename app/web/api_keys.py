"""``/conta/chaves``: the account's API keys (``app.api.keys``). Listed by name, creation and
last use; created with a name and shown once; revoked after a confirmation page. Cookie forms
like every ``/conta`` form (CSRF token); the keys themselves only work on ``/api/v1``.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.api import keys
from app.invites.validation import check_name
from app.web.common import db_of, error_response, render, wants_json
from app.web.forms import BadBody, read_body
from app.web.identity import signed_in

NAME_REQUIRED = "Dê um nome à chave, por exemplo o do sistema que vai usá-la."
REVOKED = "Chave revogada. Os programas que a usavam não conseguem mais entrar com ela."
NOT_FOUND = "Esta chave não foi encontrada: talvez já tenha sido revogada."
SAME_NAME = (
    "Você já tem uma chave com este nome. Dê outro nome; a chave só aparece quando é criada, "
    "e uma chave perdida se revoga aqui."
)


async def _page(
    request: Request,
    *,
    created: tuple[keys.ApiKey, str] | None = None,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    context: dict[str, Any] = {
        "keys": await keys.of_account(db_of(request), request.state.account.id),
        "created": created,
        "errors": errors or {},
        "values": values or {"nome": ""},
        "notice": REVOKED if request.query_params.get("revogada") == "1" else None,
    }
    return render(request, "conta_chaves.html", context, status_code=status_code)


def _key_json(key: keys.ApiKey) -> dict[str, Any]:
    return {
        "id": key.public_id,
        "nome": key.name,
        "criada_em": key.created_at.isoformat(),
        "ultimo_uso_em": key.last_used_at.isoformat() if key.last_used_at else None,
    }


@signed_in
async def show(request: Request) -> Response:
    """GET /conta/chaves: the live keys and the form for a new one."""
    if wants_json(request):
        found = await keys.of_account(db_of(request), request.state.account.id)
        return JSONResponse({"chaves": [_key_json(key) for key in found]})
    return await _page(request)


@signed_in
async def create(request: Request) -> Response:
    """POST /conta/chaves: a new key, in the answer only (201)."""
    try:
        data = await read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    name, error = check_name(data.get("nome"))
    if name is None:
        errors = {"nome": error or NAME_REQUIRED}
        if wants_json(request):
            return JSONResponse({"erro": "Confira os campos.", "campos": errors}, status_code=422)
        raw = data.get("nome")
        values = {"nome": raw if isinstance(raw, str) else ""}
        return await _page(request, errors=errors, values=values, status_code=422)
    try:
        key, secret = await keys.create(db_of(request), request.state.account.id, name)
    except keys.SameName:
        errors = {"nome": SAME_NAME}
        if wants_json(request):
            return JSONResponse({"erro": "Confira os campos.", "campos": errors}, status_code=422)
        return await _page(request, errors=errors, values={"nome": name}, status_code=422)
    if wants_json(request):
        return JSONResponse({"id": key.public_id, "nome": key.name, "chave": secret}, 201)
    # The page itself carries the key: never a redirect, whose URL or history could keep it.
    response = await _page(request, created=(key, secret), status_code=201)
    response.headers["Cache-Control"] = "no-store"
    return response


def _public_id(request: Request) -> str | None:
    public_id: str = request.path_params["public_id"]
    return public_id if re.fullmatch(r"[A-Za-z0-9_-]{1,32}", public_id) else None


@signed_in
async def confirm_revoke(request: Request) -> Response:
    """GET /conta/chaves/{id}/revogar: "are you sure?", with what revoking does."""
    public_id = _public_id(request)
    key = public_id and await keys.one_of_account(
        db_of(request), request.state.account.id, public_id
    )
    if not key:
        return error_response(request, 404, NOT_FOUND)
    return render(
        request,
        "confirmar.html",
        {
            "question": f"Revogar a chave “{key.name}”?",
            "explanation": "Os programas que usam esta chave deixam de conseguir entrar na hora. "
            "Isso não pode ser desfeito: para voltar a usar a API, crie uma chave nova.",
            "action": f"/conta/chaves/{key.public_id}/revogar",
            "button": "Revogar chave",
            "back": "/conta/chaves",
            "back_text": "Voltar sem revogar",
        },
    )


@signed_in
async def revoke(request: Request) -> Response:
    """POST /conta/chaves/{id}/revogar: the key stops working at once (404: not a live key of
    this account)."""
    public_id = _public_id(request)
    if public_id is None or not await keys.revoke(
        db_of(request), request.state.account.id, public_id
    ):
        return error_response(request, 404, NOT_FOUND)
    if wants_json(request):
        return JSONResponse({"revogada": public_id})
    return RedirectResponse("/conta/chaves?revogada=1", status_code=303)
