"""``/conta``'s list of the person's open sessions, and ending them: one (**Encerrar**) or all
(**Sair de todos os aparelhos**, this one included). A forwarded link or a copied cookie is
something the owner can see (device, when, which network) and stop from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.accounts import sessions
from app.accounts.devices import describe
from app.web.common import db_of, error_response, wants_json
from app.web.identity import forget_session, session_token, signed_in

ENDED = "Sessão encerrada. Quem estava usando aquele aparelho precisa de um novo link para entrar."
NOT_FOUND = "Esta sessão não foi encontrada: talvez já tenha sido encerrada."
SIGNED_OUT_EVERYWHERE = "Você saiu de todos os aparelhos. Para entrar de novo, peça um link."
SIGNED_OUT_HERE = "Você encerrou a sessão deste aparelho."
#: What ``/entrar?saiu=…`` says after the person ended their own session from ``/conta``.
SIGN_OUT_NOTICES = {"todos": SIGNED_OUT_EVERYWHERE, "este": SIGNED_OUT_HERE}


@dataclass(frozen=True)
class SessionView:
    """One open session as ``/conta`` shows it."""

    public_id: str
    device: str
    current: bool
    created_at: datetime
    created_network: str
    last_used_at: datetime
    last_network: str


async def open_sessions(request: Request) -> list[SessionView]:
    """The signed-in account's live sessions, the most recently used first."""
    token = session_token(request)
    assert token is not None, "open_sessions() outside a signed-in endpoint"
    found = await sessions.of_account(db_of(request), request.state.account.id, token)
    return [
        SessionView(
            public_id=each.public_id,
            device=describe(each.user_agent),
            current=each.current,
            created_at=each.created_at,
            created_network=each.created_network or "desconhecida",
            last_used_at=each.last_used_at,
            last_network=each.last_network or "desconhecida",
        )
        for each in found
    ]


def _signed_out(request: Request, why: str) -> Response:
    forget_session(request)
    if wants_json(request):
        return JSONResponse({"saiu": True})
    return RedirectResponse(f"/entrar?saiu={why}", status_code=303)


@signed_in
async def end_one(request: Request) -> Response:
    """POST /conta/sessoes/{id}/encerrar: end one session of this account (404 for any id that
    is not one of its live sessions); ending this browser's own signs it out."""
    public_id = request.path_params["public_id"]
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", public_id) or not await sessions.end_one(
        db_of(request), request.state.account.id, public_id
    ):
        return error_response(request, 404, NOT_FOUND)
    if public_id == request.state.session_id:
        return _signed_out(request, "este")
    if wants_json(request):
        return JSONResponse({"encerrada": public_id})
    return RedirectResponse("/conta?encerrada=1#sessoes", status_code=303)


@signed_in
async def end_all(request: Request) -> Response:
    """POST /conta/sessoes/encerrar-todas: every session of this account ends, this one too."""
    await sessions.end_all(db_of(request), request.state.account.id)
    return _signed_out(request, "todos")
