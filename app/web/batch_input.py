"""What a batch request sent: the pasted list, a spreadsheet or the reviewed rows handed back
(``linhas``), the **Mensagem** and the fields every invite of the batch shares. The list itself
is read off the event loop (``app.batches.isolation``)."""

from __future__ import annotations

import json
from datetime import datetime

from starlette.datastructures import UploadFile
from starlette.requests import Request

from app.batches.isolation import Source, read_rows
from app.batches.parse import Bounds, Row, TooManyRows
from app.invites.records import Occasion
from app.invites.validation import check_message
from app.web.common import settings_of
from app.web.forms import BadBody, typed_values
from app.web.invites import when_and_occasion

#: The fields every invite of a batch shares besides the Mensagem: "Enviar em" and the
#: occasion, named as on the single form (the same checks, the same words).
SHARED_FIELDS = ("enviar_em", "ocasiao", "ocasiao_em", "ocasiao_local")
JSON_FIELDS = ("enderecos", "mensagem", *SHARED_FIELDS)


class Given:
    """What the person sent: the rows, the pasted text, the **Mensagem**, "Enviar em" and the
    occasion (checked, and as typed)."""

    def __init__(
        self,
        request: Request,
        rows: list[Row],
        text: str,
        message: object,
        shared: dict[str, object],
        *,
        reviewed: bool,
    ) -> None:
        self.rows, self.text = rows, text
        self.reviewed = reviewed  # Sent.reviewed: the review page's rows, handed back
        self.raw_message = message if isinstance(message, str) else ""
        self.message, self.message_error = check_message(message)
        self.shared = shared
        self.typed = typed_values(shared, *SHARED_FIELDS)
        # The single form's own checks: one parser for "Enviar em" and one for the occasion.
        self.send_at: datetime | None
        self.occasion: Occasion | None
        self.send_at, self.occasion, self.errors = when_and_occasion(request, shared)

    def as_typed(self) -> str:
        """The list to correct: the pasted text as it was, or a file's rows as lines one could
        have pasted (a file input cannot be filled again)."""
        if self.text.strip():
            return self.text
        return "\n".join(
            f"{row.name} <{row.email}>" if row.name else row.email for row in self.rows
        )


class Sent:
    """The request as sent, before any list is read: a ``Source`` to read (pasted text or a
    file) or the reviewed rows handed back (``linhas``), the pasted text, the Mensagem and the
    shared fields as sent (``SHARED_FIELDS``)."""

    def __init__(
        self, list_: Source | str, text: str, message: object, shared: dict[str, object]
    ) -> None:
        self.list, self.text, self.message, self.shared = list_, text, message, shared

    @property
    def from_file(self) -> bool:
        """A spreadsheet was chosen (``planilha``): what is wrong with the list is its."""
        return isinstance(self.list, Source) and self.list.data is not None

    @property
    def reviewed(self) -> bool:
        """The rows are the review page's, handed back (``linhas``)."""
        return isinstance(self.list, str)


def _is_json(request: Request) -> bool:
    return request.headers.get("content-type", "").startswith("application/json")


async def read_sent(request: Request) -> Sent:
    """Takes the body apart; the list itself is read later, off the event loop."""
    if _is_json(request):
        try:
            data = json.loads(await request.body())
        except (ValueError, RecursionError):
            raise BadBody("O corpo da requisição não é um JSON válido.") from None
        text = data.get("enderecos") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise BadBody('Envie um objeto JSON com "enderecos", um texto.')
        unknown = sorted(set(data) - set(JSON_FIELDS))
        if unknown:  # a typo ("mensgem") would otherwise send every row without it
            raise BadBody(
                f"Campo desconhecido: {', '.join(unknown)}. Os campos de um lote são: "
                f"{', '.join(JSON_FIELDS)}."
            )
        shared = {key: data.get(key) for key in SHARED_FIELDS}
        return Sent(Source(text=text), text, data.get("mensagem"), shared)
    async with request.form(max_part_size=settings_of(request).batch_max_bytes) as form:
        text = form.get("enderecos")
        text = text if isinstance(text, str) else ""
        message = form.get("mensagem")
        shared = {key: form.get(key) for key in SHARED_FIELDS}
        upload = form.get("planilha")
        if isinstance(upload, UploadFile) and upload.filename:
            source = Source(filename=upload.filename, data=await upload.read())
            return Sent(source, text, message, shared)
        kept = form.get("linhas")
        if isinstance(kept, str) and kept:
            return Sent(kept, text, message, shared)
    return Sent(Source(text=text), text, message, shared)


async def rows_of(request: Request, sent: Sent) -> list[Row]:
    bounds = Bounds.of(settings_of(request))
    if isinstance(sent.list, str):
        return _kept_rows(sent.list, bounds.rows)
    if sent.list.data is None and not sent.list.text.strip():
        return []  # nothing pasted: no child to start
    return await read_rows(sent.list, bounds, request.state.batch_readers)


def _kept_rows(kept: str, max_rows: int) -> list[Row]:
    """The ok rows the review page handed back (JSON ``[[email, name], …]``)."""
    try:
        pairs = json.loads(kept)
    except (ValueError, RecursionError):
        raise BadBody("A lista revisada chegou danificada. Revise de novo.") from None
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs
    ):
        raise BadBody("A lista revisada chegou danificada. Revise de novo.")
    if len(pairs) > max_rows:
        raise TooManyRows(max_rows, max_rows + 1)
    return [Row(n, p[0], p[1] if isinstance(p[1], str) else None) for n, p in enumerate(pairs, 1)]
