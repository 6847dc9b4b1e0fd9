"""``/conta/webhooks`` and ``/api/v1/webhooks``: an account's webhooks (``app.webhooks``).

One handler per action serves both: the page (cookie session and CSRF token, like every
``/conta`` form) and the API (``app.web.api.api_endpoint``: bearer key, JSON). A new webhook's
secret is in the creation's answer only. The page lists each webhook with its recent deliveries
(state, the receiver's status code and a snippet, attempts, next try) and **Reenviar** on a
failed one; a webhook disabled after ``WEBHOOK_MAX_FAILURES`` failed deliveries says so (spoken
once, in the page's status region, the first time this browser shows that disabling; its owner
is also mailed once, by ``app.webhooks.deliver``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.web.common import db_of, error_response, render, settings_of, wants_json
from app.web.forms import BadBody, read_body
from app.web.identity import signed_in
from app.webhooks import addresses, store

NOT_FOUND = "Este webhook não foi encontrado: talvez já tenha sido excluído."
DELIVERY_NOT_FOUND = "Esta entrega não foi encontrada ou não está com falha."
REMOVED = "Webhook excluído. Nenhum evento será mais enviado para ele."
RESENT = "Entrega enviada de novo para a fila. Acompanhe o resultado abaixo."
DISABLED = (
    "Um webhook foi desativado depois de entregas seguidas com falha. Confira o servidor que "
    "recebe os eventos e use Reenviar numa entrega com falha para reativá-lo."
)
TOO_MANY = (
    f"Esta conta já tem {store.MAX_PER_ACCOUNT} webhooks, o máximo. Exclua um que não usa mais "
    "para cadastrar outro."
)
SAME_URL = (
    "Esta conta já tem um webhook para este endereço: cada mudança chegaria duas vezes. "
    "O segredo dele aparece só quando é criado; se o perdeu, exclua o webhook e cadastre de novo."
)
NOTICES = {"excluido": REMOVED, "reenviada": RESENT}


def _notice(request: Request) -> str | None:
    for name, text in NOTICES.items():
        if request.query_params.get(name) == "1":
            return text
    return None


async def _page(
    request: Request,
    *,
    created: tuple[store.Webhook, str] | None = None,
    error: str | None = None,
    url: str = "",
    status_code: int = 200,
) -> Response:
    db = db_of(request)
    hooks = await store.of_account(db, request.state.account.id)
    deliveries = await store.recent_deliveries(db, [hook.id for hook in hooks])
    context: dict[str, Any] = {
        "webhooks": hooks,
        "deliveries": deliveries,
        "created": created,
        "error": error,
        "url": url,
        "notice": _notice(request),
        "disabled_notice": DISABLED if any(hook.disabled_at for hook in hooks) else None,
        "disabled_key": _disabled_key(hooks),
    }
    response = render(request, "conta_webhooks.html", context, status_code=status_code)
    if created is not None:
        # The page itself carries the secret: never a redirect, whose URL or history could keep
        # it, and no cache.
        response.headers["Cache-Control"] = "no-store"
    return response


def _disabled_key(hooks: list[store.Webhook]) -> str:
    """Names this set of disablings (which webhook, at which moment): the page speaks the notice
    the first time a browser shows a given key (``static/app.js``), so a reload is silent and a
    new disabling is heard again."""
    return " ".join(
        f"{hook.public_id}@{hook.disabled_at.isoformat()}" for hook in hooks if hook.disabled_at
    )


def webhook_json(hook: store.Webhook) -> dict[str, Any]:
    return {
        "id": hook.public_id,
        "url": hook.url,
        "criado_em": hook.created_at.isoformat(),
        "ativo": hook.disabled_at is None,
        "desativado_em": hook.disabled_at.isoformat() if hook.disabled_at else None,
    }


@signed_in
async def show(request: Request) -> Response:
    """GET /conta/webhooks (and GET /api/v1/webhooks): the account's webhooks."""
    if wants_json(request):
        hooks = await store.of_account(db_of(request), request.state.account.id)
        return JSONResponse({"webhooks": [webhook_json(hook) for hook in hooks]})
    return await _page(request)


@signed_in
async def create(request: Request) -> Response:
    """POST /conta/webhooks (and POST /api/v1/webhooks): a new webhook; its secret, once (201).
    The URL is checked after DNS here, and again at every delivery; an account with
    ``store.MAX_PER_ACCOUNT`` webhooks, or one for that URL already, is refused (422)."""
    try:
        data = await read_body(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    raw = data.get("url")
    given = raw if isinstance(raw, str) else ""
    settings = settings_of(request)
    try:
        # The OS resolver has no timeout of ours: a hung DNS server would hold the request.
        async with asyncio.timeout(settings.webhook_timeout_seconds):
            target = await addresses.resolve(
                given, allow_private=settings.webhook_allow_private_networks
            )
    except (addresses.Refused, TimeoutError) as exc:
        why = str(exc) if isinstance(exc, addresses.Refused) else addresses.UNANSWERED
        if wants_json(request):
            return JSONResponse(
                {"erro": "Confira os campos.", "campos": {"url": why}}, status_code=422
            )
        return await _page(request, error=why, url=given[:2000], status_code=422)
    try:
        hook, secret = await store.create(db_of(request), request.state.account.id, target.url)
    except store.Full:
        if wants_json(request):
            return JSONResponse({"erro": TOO_MANY}, status_code=422)
        return await _page(request, error=TOO_MANY, url=given[:2000], status_code=422)
    except store.SameUrl:
        if wants_json(request):
            return JSONResponse(
                {"erro": "Confira os campos.", "campos": {"url": SAME_URL}}, status_code=422
            )
        return await _page(request, error=SAME_URL, url=given[:2000], status_code=422)
    if wants_json(request):
        return JSONResponse({"id": hook.public_id, "url": hook.url, "secret": secret}, 201)
    return await _page(request, created=(hook, secret), status_code=201)


def _public_id(request: Request) -> str | None:
    public_id: str = request.path_params["public_id"]
    return public_id if re.fullmatch(r"[A-Za-z0-9_-]{1,40}", public_id) else None


@signed_in
async def confirm_remove(request: Request) -> Response:
    """GET /conta/webhooks/{id}/excluir: "are you sure?", with what deleting does."""
    public_id = _public_id(request)
    hook = public_id and await store.one_of_account(
        db_of(request), request.state.account.id, public_id
    )
    if not hook:
        return error_response(request, 404, NOT_FOUND)
    return render(
        request,
        "confirmar.html",
        {
            "question": f"Excluir o webhook “{hook.url}”?",
            "explanation": "Ele deixa de receber as mudanças dos seus convites na hora, e as "
            "entregas dele, com as respostas que o servidor deu, são apagadas. Isso não pode ser "
            "desfeito: para voltar a receber, crie o webhook de novo (com um segredo novo).",
            "action": f"/conta/webhooks/{hook.public_id}/excluir",
            "button": "Excluir webhook",
            "back": "/conta/webhooks",
            "back_text": "Voltar sem excluir",
        },
    )


@signed_in
async def remove(request: Request) -> Response:
    """POST /conta/webhooks/{id}/excluir (and DELETE /api/v1/webhooks/{id}): the webhook and its
    deliveries are gone; nothing more is sent to it (404: no such webhook of this account)."""
    public_id = _public_id(request)
    if public_id is None or not await store.remove(
        db_of(request), request.state.account.id, public_id
    ):
        return error_response(request, 404, NOT_FOUND)
    if wants_json(request):
        return Response(status_code=204)
    return RedirectResponse("/conta/webhooks?excluido=1", status_code=303)


@signed_in
async def resend(request: Request) -> Response:
    """POST /conta/webhooks/entregas/{id}/reenviar: **Reenviar** a failed delivery (same
    ``webhook-id``, same body, a fresh round of attempts); its webhook is enabled again."""
    public_id = _public_id(request)
    if public_id is None or not await store.resend(
        db_of(request), request.state.account.id, public_id
    ):
        return error_response(request, 404, DELIVERY_NOT_FOUND)
    if wants_json(request):
        return JSONResponse({"reenviada": public_id})
    return RedirectResponse("/conta/webhooks?reenviada=1", status_code=303)
