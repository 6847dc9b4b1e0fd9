"""The sender's invites as a spreadsheet (``app.consent.export``): "Meus convites" with its
filter, and one batch. Someone else's batch is a 404, like its page."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from app.batches import store
from app.consent.export import export_csv, sender_filter
from app.storage.tables import invites
from app.web.batches import status_filter
from app.web.common import db_of, error_response, sender_id
from app.web.identity import signed_in
from app.web.summary import chosen_filter

MEDIA_TYPE = "text/csv; charset=utf-8"


def _download(body: AsyncIterator[str], filename: str) -> StreamingResponse:
    return StreamingResponse(
        body,
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@signed_in
async def my_invites(request: Request) -> Response:
    """GET /convites.csv: the sender's invites (the list's ``?estado=`` applied), newest first."""
    where = sender_filter(sender_id(request), chosen_filter(request).statuses)
    return _download(export_csv(db_of(request), where, newest_first=True), "convites.csv")


@signed_in
async def batch(request: Request) -> Response:
    """GET /lotes/{id}.csv: one of the sender's batches (its page's ``?estado=`` applied), in
    the order it was sent."""
    db = db_of(request)
    found = await store.get_batch(db, sender_id(request), request.path_params["public_id"])
    if found is None:
        return error_response(request, 404, "Lote não encontrado.")
    where = [invites.c.batch_id == found.id]
    status = status_filter(request)
    if status is not None:
        where.append(invites.c.status == status.value)
    body = export_csv(db, where, newest_first=False)
    return _download(body, f"lote-{found.public_id}.csv")
