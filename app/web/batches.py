"""The batch pages: paste or upload (``/lotes/novo``), review every row (``/lotes/revisar``),
send the ok rows (``POST /lotes``) and follow them (``/lotes/{id}``). Plain HTML forms: all
of it works without JavaScript; the batch page adds live rows and summaries on top.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app import ratelimit
from app.batches import progress, store
from app.batches.parse import OverBound, UnreadableBatch
from app.batches.review import Review, review
from app.clock import local_moment, utcnow
from app.invites.records import NewInvite
from app.invites.status import Status
from app.logs import correlation_id
from app.web.batch_input import SHARED_FIELDS, Given, read_sent, rows_of
from app.web.common import (
    db_of,
    error_response,
    render,
    sender_id,
    settings_of,
    too_many_requests,
    wants_json,
)
from app.web.forms import BadBody, typed_values, wait_text
from app.web.identity import signed_in

log = logging.getLogger(__name__)

NOTHING_GIVEN = "Cole os endereços no campo Endereços ou escolha uma planilha."
#: A pasted list and a file in one request: neither is dropped behind the person's back.
BOTH_GIVEN = (
    "Use uma coisa só: os endereços colados ou a planilha. Os endereços colados continuam "
    "aqui; para enviar a planilha, apague-os e escolha o arquivo de novo."
)
CHANGED = (
    "A lista mudou desde a revisão: algumas linhas não podem mais ser enviadas. "
    "Nada foi enviado; confira a revisão abaixo."
)
NOT_SENDABLE = (
    "Algumas linhas não podem ser enviadas. Nada foi enviado; "
    'o resultado de cada linha está em "linhas".'
)


@signed_in
async def new(request: Request) -> Response:
    """GET /lotes/novo: the text area, the file field, **Revisar**."""
    return render(request, "lotes_novo.html", _form_context(request))


@signed_in
async def reopen(request: Request) -> Response:
    """POST /lotes/novo: **Corrigir a lista** from the review, the form again with the list,
    the Mensagem, "Enviar em" and the occasion as they were sent (nothing typed is lost)."""
    async with request.form() as form:
        data = {key: form.get(key) for key in ("enderecos", "mensagem", *SHARED_FIELDS)}
    typed = typed_values(data, "enderecos", "mensagem", *SHARED_FIELDS)
    context = _form_context(
        request,
        text=typed["enderecos"],
        message=typed["mensagem"],
        values={key: typed[key] for key in SHARED_FIELDS},
    )
    return render(request, "lotes_novo.html", context)


def _form_context(
    request: Request,
    error: str | None = None,
    text: str = "",
    message: str = "",
    values: dict[str, str] | None = None,
    errors: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "error": error,
        "text": text,
        "message": message,
        "values": values or {},
        "errors": errors or {},
        "max_rows": settings_of(request).batch_max_rows,
    }


def _refused_form(
    request: Request,
    status_code: int,
    error: str | None,
    text: str = "",
    message: object = "",
    headers: dict[str, str] | None = None,
    *,
    shared: dict[str, object] | None = None,
    errors: dict[str, str] | None = None,
) -> Response:
    """The form again with what was typed; ``error`` is about the pasted list (Endereços),
    ``errors`` about the other fields (``planilha``, ``SHARED_FIELDS``), each shown at its
    field."""
    if wants_json(request):
        body: dict[str, Any] = {"erro": error or "Confira os campos."}
        if errors:
            body["campos"] = errors
        return JSONResponse(body, status_code=status_code, headers=headers)
    typed = message if isinstance(message, str) else ""
    values = typed_values(shared or {}, *SHARED_FIELDS)
    context = _form_context(request, error, text, typed, values, errors)
    return render(request, "lotes_novo.html", context, status_code=status_code, headers=headers)


REVIEWS_TOO_FAST = (
    "Você revisou muitas listas no último minuto. Espere {wait} e tente de novo; "
    "o que você digitou continua aqui."
)


async def _reviewed(request: Request) -> tuple[Review, Given] | Response:
    """Every row's verdict, or the refusal: a bad body (400), too many reviews (429), a list
    past a bound (413/422, naming it) or unreadable (422). Refusals keep what was typed."""
    try:
        sent = await read_sent(request)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    if sent.from_file and sent.text.strip():
        return _refused_form(request, 422, BOTH_GIVEN, sent.text, sent.message, shared=sent.shared)
    settings = settings_of(request)
    limit = ratelimit.review_limit(settings, sender_id(request))
    refusal = await ratelimit.take(request.state.redis, [limit])
    if refusal is not None:
        wait = wait_text(refusal.retry_after)
        headers = {"Retry-After": str(refusal.retry_after)}
        message = REVIEWS_TOO_FAST.format(wait=wait)
        return _refused_form(
            request, 429, message, sent.text, sent.message, headers, shared=sent.shared
        )
    try:
        rows = await rows_of(request, sent)
    except BadBody as exc:
        return error_response(request, 400, str(exc))
    except (UnreadableBatch, OverBound) as exc:
        # Said at the field it came from: the file's, or Endereços for a pasted list.
        status_code = exc.status if isinstance(exc, OverBound) else 422
        on_file = {"planilha": str(exc)} if sent.from_file else None
        error = None if on_file else str(exc)
        return _refused_form(
            request, status_code, error, sent.text, sent.message, shared=sent.shared, errors=on_file
        )
    given = Given(request, rows, sent.text, sent.message, sent.shared, reviewed=sent.reviewed)
    refused = None
    if given.message_error:
        refused = given.message_error
    elif not given.rows:
        refused = NOTHING_GIVEN
    if refused or given.errors:
        return _refused_form(
            request,
            422,
            refused,
            given.text,
            given.raw_message,
            shared=given.shared,
            errors=given.errors,
        )
    found = await review(db_of(request), sender_id(request), given.rows)
    return found, given


async def _room_today(request: Request) -> int:
    settings = settings_of(request)
    limit = ratelimit.batch_limits(settings, sender_id(request), [])[0]
    [used] = await ratelimit.used(request.state.redis, [limit])
    return max(0, limit.limit - used)


def _review_json(found: Review) -> dict[str, Any]:
    return {
        "linhas": [
            {
                "linha": item.row.line,
                "email": item.email or item.row.email,
                "nome": item.name,
                "resultado": item.verdict.value,
                "mensagem": item.message,
                "convite": f"/convites/{item.existing.public_id}" if item.existing else None,
            }
            for item in found.rows
        ],
        "contagem": {verdict.value: count for verdict, _, count in found.counts},
    }


async def _review_page(
    request: Request,
    found: Review,
    given: Given,
    status_code: int = 200,
    notice: str | None = None,
) -> Response:
    if wants_json(request):
        body = _review_json(found)
        if notice:
            body["erro"] = notice
        return JSONResponse(body, status_code=status_code)
    kept = json.dumps([[item.email, item.name] for item in found.ok_rows], ensure_ascii=False)
    context = {
        "review": found,
        "kept": kept,
        "room": await _room_today(request),
        "notice": notice,
        "message": given.message,
        "typed": given.as_typed(),
        "typed_message": given.raw_message,
        "typed_shared": given.typed,
        "send_at": local_moment(given.send_at) if given.send_at else None,
        "occasion": given.occasion,
    }
    return render(request, "lotes_revisar.html", context, status_code=status_code)


@signed_in
async def check(request: Request) -> Response:
    """POST /lotes/revisar: every row with its verdict; nothing is written."""
    outcome = await _reviewed(request)
    if isinstance(outcome, Response):
        return outcome
    return await _review_page(request, *outcome)


_REFUSALS = {
    "sender_day": (
        "Este lote tem {size} convites, mas hoje ainda cabem {room} no seu limite de {limit} "
        "por dia. Nada foi enviado: envie um lote de até {room} ou tente de novo em {wait}."
    ),
    "recipient_day": (
        "Um dos endereços deste lote já recebeu o máximo de convites por hoje. Nada foi "
        "enviado: tente de novo em {wait}, ou envie os endereços em lotes menores."
    ),
}


async def _over_limits(request: Request, found: Review) -> Response | None:
    emails = [item.email for item in found.ok_rows if item.email is not None]
    limits = ratelimit.batch_limits(settings_of(request), sender_id(request), emails)
    amounts = [len(emails)] + [1] * len(emails)  # the sender's day, then each recipient's
    refusal = await ratelimit.take(request.state.redis, limits, amounts)
    if refusal is None:
        return None
    message = _REFUSALS[refusal.limit.kind].format(
        size=len(emails),
        room=refusal.room,
        limit=refusal.limit.limit,
        wait=wait_text(refusal.retry_after),
    )
    return too_many_requests(request, message, refusal.retry_after)


@signed_in
async def send(request: Request) -> Response:
    """POST /lotes: the reviewed ok rows, re-checked, counted against the limits as a whole,
    and written in one transaction; 202 + Location (JSON), 303 to the batch page (a form)."""
    outcome = await _reviewed(request)
    if isinstance(outcome, Response):
        return outcome
    found, given = outcome
    if found.problems:
        return await _not_sendable(request, found, given)
    refused = await _over_limits(request, found)
    if refused is not None:
        return refused
    account = request.state.account
    requests = tuple(
        NewInvite(
            account.public_id,
            item.email,
            item.name,
            correlation_id.get() or "",
            sender_name=account.name,
            sender_email=account.email,
            message=given.message,
            send_at=given.send_at,
            occasion=given.occasion,
        )
        for item in found.ok_rows
        if item.email is not None
    )
    written = await store.write_batch(db_of(request), store.NewBatch(account.public_id, requests))
    if isinstance(written, store.Conflict):
        again = await _rereview(request, found)
        return await _not_sendable(request, again, given, written_meanwhile=True)
    log.info(
        "batch accepted",
        extra={
            "batch": written.batch.public_id,
            "size": len(requests),
            "scheduled": given.send_at is not None,
        },
    )
    await request.state.publisher.publish_or_leave(written.changes)
    # One wake-up rings the sender's pages; each re-reads every new event from the database.
    await request.state.announcer.announce(written.changes[-1] if written.changes else None)
    location = str(URL(f"/lotes/{written.batch.public_id}"))
    if wants_json(request):
        body = {"id": written.batch.public_id, "tamanho": len(requests), "url": location}
        body["mensagem"] = progress.received_text(len(requests), given.send_at)
        if given.send_at is not None:
            body["enviar_em"] = given.send_at.isoformat()
        return JSONResponse(body, status_code=202, headers={"Location": location})
    return RedirectResponse(f"{location}?novo=1", status_code=303)


async def _not_sendable(
    request: Request, found: Review, given: Given, *, written_meanwhile: bool = False
) -> Response:
    """Nothing is written when a row cannot be sent; the answer gives every row's verdict.
    Rows handed back by the review page were all ready when the person read them: the list
    changed since (409, 422 once no row is ready). A list sent straight (the API's
    ``enderecos``) had no review: its bad rows are a 422, and 409 only when another write
    took a row while this one was being written."""
    if given.reviewed:
        status_code = 409 if written_meanwhile or found.ok_rows else 422
        return await _review_page(request, found, given, status_code, CHANGED)
    status_code = 409 if written_meanwhile else 422
    return await _review_page(request, found, given, status_code, NOT_SENDABLE)


async def _rereview(request: Request, found: Review) -> Review:
    rows = [item.row for item in found.rows]
    return await review(db_of(request), sender_id(request), rows)


@signed_in
async def listing(request: Request) -> Response:
    """GET /lotes: "Meus lotes", the sender's batches, newest first, each with its counters."""
    found = await store.sender_batches(db_of(request), sender_id(request))
    listed = [(batch, progress.summarize(batch.size, counts)) for batch, counts in found]
    if wants_json(request):
        return JSONResponse(
            {
                "lotes": [
                    {
                        "id": batch.public_id,
                        "tamanho": batch.size,
                        "criado_em": batch.created_at.isoformat(),
                        "contagem": {s.value: n for s, n in summary.counts if n},
                        "terminado": summary.finished,
                        "url": f"/lotes/{batch.public_id}",
                    }
                    for batch, summary in listed
                ]
            }
        )
    paused = await request.state.paused.now()  # a pendente counter reads "Pausado" then
    return render(request, "lotes.html", {"listed": listed, "paused": paused})


def status_filter(request: Request) -> Status | None:
    """The batch page's ``?estado=`` (an unknown one shows every row)."""
    raw = request.query_params.get("estado", "")
    return Status(raw) if raw in {s.value for s in Status} else None


@signed_in
async def show(request: Request) -> Response:
    """GET /lotes/{id}: counters, a filter by status, and every row, live."""
    db = db_of(request)
    batch = await store.get_batch(db, sender_id(request), request.path_params["public_id"])
    if batch is None:
        return error_response(request, 404, "Lote não encontrado.")
    status = status_filter(request)
    rows = await store.batch_rows(db, batch, status)
    tally = await store.tally(db, batch.id)
    summary = progress.summarize(batch.size, tally.counts, tally.reminders, tally.send_at)
    if wants_json(request):
        return JSONResponse(
            {
                "id": batch.public_id,
                "tamanho": batch.size,
                "contagem": {s.value: n for s, n in summary.counts},
                "terminado": summary.finished,
                "resumo": summary.spoken,
                "enviar_em": tally.send_at.isoformat() if tally.send_at else None,
                "lembretes": summary.reminders,
            }
        )
    context = {
        "batch": batch,
        "summary": summary,
        "rows": rows,
        "status": status,
        "fresh": request.query_params.get("novo") == "1",
        "received": progress.received_text(batch.size, tally.send_at),
        "paused": await request.state.paused.now(),
        "now": utcnow(),
        "settings": settings_of(request),
    }
    return render(request, "lotes_lote.html", context)
