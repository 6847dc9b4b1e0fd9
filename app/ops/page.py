"""``/operacao``: the operator page, behind ``OPS_TOKEN`` (not mounted at all without one).

Two ways in: ``Authorization: Bearer <OPS_TOKEN>`` (scripts) or the login form's signed cookie
(so the browser's EventSource can follow the live panel). The cookie holds a fingerprint of the
token and a session id: changing ``OPS_TOKEN`` signs everyone out, and "Sair" is remembered by
the server. No credentials: 401; a wrong token: 403; too many from one network: 429.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import wraps
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.bounces.history import bounced_by_reason
from app.clock import utcnow
from app.config import Settings
from app.consent import suppression
from app.invites.status import Status
from app.ops import auth as ops_auth
from app.ops.actions import failed_by_reason, retry_in_bulk, skipped_text, uncertain_invites
from app.ops.health import check_health, health_json
from app.ops.metrics import SseConnections
from app.sending.pause import pause_sending, resume_sending
from app.web.common import (
    bearer_token,
    client_network,
    db_of,
    error_response,
    render,
    settings_of,
    templates_of,
    too_many_requests,
    wants_json,
)
from app.web.params import BadParameter, whole_number

log = logging.getLogger(__name__)

COOKIE = "convites_operacao"
COOKIE_MAX_AGE = 12 * 3600
REFRESH_SECONDS = 2.0
TOO_MANY_FAILURES = "Tentativas demais com um token errado. Espere e tente de novo."
Handler = Callable[[Request], Awaitable[Response]]


def _serializer(settings: Settings) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(settings.secret_key, salt="convites-operacao")


def _cookie_session(request: Request) -> dict[str, Any] | None:
    """The operator cookie's content, if it is ours, fresh and well formed."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    try:
        value = _serializer(settings_of(request)).loads(cookie, max_age=COOKIE_MAX_AGE)
    except BadSignature:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("s"), str) else None


async def _verdict(request: Request) -> bool | None:
    """True: let in. False: a wrong token was offered. None: no credentials at all."""
    settings = settings_of(request)
    token = settings.ops_token or ""
    given = bearer_token(request.headers.get("authorization", ""))
    if given is not None:
        return hmac.compare_digest(given.encode(), token.encode())
    value = _cookie_session(request)
    expected = ops_auth.fingerprint(settings.secret_key, token)
    if value is None or not hmac.compare_digest(str(value.get("f")), expected):
        return None
    return None if await ops_auth.logged_out(request.state.redis, value["s"]) else True


def _too_many_failures(request: Request, wait: int) -> Response:
    log.warning("operator token attempts throttled", extra={"retry_after": wait})
    return too_many_requests(request, TOO_MANY_FAILURES, wait)


def _refuse(request: Request, verdict: bool | None) -> Response:
    status, message = (
        (403, "Token de operação incorreto.")
        if verdict is False
        else (401, "Entre com o token de operação.")
    )
    if wants_json(request) or "authorization" in request.headers:
        return JSONResponse(
            {"erro": message},
            status_code=status,
            headers={"WWW-Authenticate": 'Bearer realm="operacao"'},
        )
    return render(request, "ops_login.html", {"message": message}, status_code=status)


def operator_only(handler: Handler) -> Handler:
    @wraps(handler)
    async def guarded(request: Request) -> Response:
        redis, network = request.state.redis, client_network(request)
        verdict = await _verdict(request)
        # Credentials offered while throttled: 429, whether they were right or wrong.
        wait = 0 if verdict is None else await ops_auth.throttled_for(redis, network)
        if wait:
            return _too_many_failures(request, wait)
        if verdict is False:
            await ops_auth.record_failure(redis, network)
        if verdict is not True:
            return _refuse(request, verdict)
        return await handler(request)

    return guarded


async def _panel(request: Request) -> dict[str, Any]:
    settings, db = settings_of(request), db_of(request)
    health = await check_health(settings, db, request.state.redis)
    database_up = health.database is not None
    return {
        "health": health,
        "workers": sorted(health.redis.workers.items()) if health.redis else None,
        "groups": await failed_by_reason(db) if database_up else [],
        "uncertain": await uncertain_invites(db) if database_up else [],
        "bounced": await bounced_by_reason(db) if database_up else [],
        "now": utcnow(),
        "settings": settings,
    }


@operator_only
async def page(request: Request) -> Response:
    """GET /operacao: the panel (JSON: the health summary plus the failure groups)."""
    panel = await _panel(request)
    if wants_json(request):
        body = health_json(panel["health"])
        body["falhas_por_motivo"] = [
            {"motivo": g.reason, "quantidade": g.count, "ultima": g.latest.isoformat()}
            for g in panel["groups"]
        ]
        body["devolvidos_por_motivo"] = [
            {
                "motivo": g.reason,
                "quantidade": g.count,
                "convites": [i.public_id for i in g.invites],
            }
            for g in panel["bounced"]
        ]
        body["supressao"] = [
            {
                "email": entry.email,
                "motivo": entry.reason.value,
                "desde": entry.created_at.isoformat(),
                "detalhe": entry.detail,
            }
            for entry in await suppression.listing(db_of(request))
        ]
        return JSONResponse(body, headers={"Cache-Control": "no-store"})
    try:
        panel["retried"] = whole_number(request.query_params.get("reenviados"), "reenviados")
        skipped = whole_number(request.query_params.get("deixados"), "deixados")
    except BadParameter as exc:
        return error_response(request, 400, exc.message)
    # Outside the live panel: its swaps would close a confirmation step half-way through.
    panel["suppressed"] = await suppression.listing(db_of(request))
    panel["suppression_labels"] = suppression.LABELS
    panel["lifted"] = request.query_params.get("retirado") == "1"
    panel["skipped"] = skipped_text(skipped) if skipped else None
    return render(request, "operacao.html", panel, headers={"Cache-Control": "no-store"})


async def login(request: Request) -> Response:
    """POST /operacao/entrar: the token from the form buys a signed cookie."""
    settings = settings_of(request)
    redis, network = request.state.redis, client_network(request)
    wait = await ops_auth.throttled_for(redis, network)
    if wait:
        return _too_many_failures(request, wait)
    token = (await request.form()).get("token")
    if not isinstance(token, str) or not hmac.compare_digest(
        token.strip().encode(), (settings.ops_token or "").encode()
    ):
        log.warning("operator login refused")
        await ops_auth.record_failure(redis, network)
        return render(
            request, "ops_login.html", {"message": "Token de operação incorreto."}, status_code=403
        )
    response = RedirectResponse("/operacao", status_code=303)
    response.set_cookie(
        COOKIE,
        _serializer(settings).dumps(
            {
                "f": ops_auth.fingerprint(settings.secret_key, settings.ops_token or ""),
                "s": ops_auth.new_session_id(),
            }
        ),
        max_age=COOKIE_MAX_AGE,
        path="/operacao",
        httponly=True,
        samesite="strict",
        secure=settings.https_only_cookies or request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    """POST /operacao/sair: the server remembers this session is over, not only the browser."""
    value = _cookie_session(request)
    if value is not None:
        await ops_auth.remember_logout(request.state.redis, value["s"], COOKIE_MAX_AGE)
    response = RedirectResponse("/operacao", status_code=303)
    response.delete_cookie(COOKIE, path="/operacao")
    return response


@operator_only
async def retry(request: Request) -> Response:
    """POST /operacao/tentar-de-novo: every ``falhou`` invite with the chosen reason, again."""
    reason = (await request.form()).get("motivo")
    if not isinstance(reason, str) or not reason:
        return error_response(request, 400, "Escolha um motivo.")
    done = await retry_in_bulk(
        db_of(request),
        request.state.publisher,
        request.state.announcer,
        Status.FALHOU,
        reason=reason,
    )
    if wants_json(request):
        return JSONResponse({"reenviados": len(done.changes), "deixados": done.skipped})
    left_out = f"&deixados={done.skipped}" if done.skipped else ""
    return RedirectResponse(f"/operacao?reenviados={len(done.changes)}{left_out}", status_code=303)


@operator_only
async def stream(request: Request) -> Response:
    """GET /operacao/eventos: the panel again whenever it changes (checked every 2 s)."""
    sse: SseConnections = request.state.sse
    template = templates_of(request).get_template("_ops_panel.html")

    async def panels() -> AsyncIterator[dict[str, str]]:
        with sse.track():
            last = ""
            while True:
                # With the request, so the panel's forms carry the CSRF token.
                html = template.render({**await _panel(request), "request": request})
                if html != last:
                    yield {"event": "painel", "data": html}
                    last = html
                await asyncio.sleep(REFRESH_SECONDS)

    return EventSourceResponse(panels(), ping=15, headers={"Cache-Control": "no-store"})


@operator_only
async def pause(request: Request) -> Response:
    """POST /operacao/pausar: pause sending on purpose (``app.sending.pause``)."""
    reason = (await request.form()).get("motivo")
    reason = reason.strip()[:200] if isinstance(reason, str) else ""
    paused = await pause_sending(db_of(request), "operacao", reason)
    log.warning("sending paused from /operacao", extra={"reason": reason})
    if wants_json(request):
        return JSONResponse({"pausado": True, "desde": paused.since.isoformat()})
    return RedirectResponse("/operacao", status_code=303)


@operator_only
async def resume(request: Request) -> Response:
    """POST /operacao/retomar: sending resumes."""
    await resume_sending(db_of(request))
    log.warning("sending resumed from /operacao")
    if wants_json(request):
        return JSONResponse({"pausado": False})
    return RedirectResponse("/operacao", status_code=303)


@operator_only
async def lift_suppression(request: Request) -> Response:
    """POST /operacao/supressao/retirar: an address may be invited again, after the
    confirmation step; who and why are required, and logged (``app.consent.suppression``)."""
    form = await request.form()
    key, who, why = (form.get(name) for name in ("endereco", "quem", "motivo"))
    if not all(isinstance(value, str) and value.strip() for value in (key, who, why)):
        return error_response(request, 400, "Diga quem está retirando o endereço e por quê.")
    assert isinstance(key, str) and isinstance(who, str) and isinstance(why, str)
    lifted = await suppression.lift_hash(
        db_of(request), key, by=f"operacao: {who.strip()[:100]}", why=why.strip()[:300]
    )
    if lifted is None:
        return error_response(request, 404, "Este endereço não está mais na lista.")
    if wants_json(request):
        return JSONResponse({"retirado": True})
    return RedirectResponse("/operacao?retirado=1", status_code=303)
