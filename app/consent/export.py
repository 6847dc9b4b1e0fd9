"""A sender's invites as a spreadsheet: CSV the way Brazilian spreadsheets open it.

UTF-8 with a BOM (without it Excel reads the file as Windows-1252 and mangles "ã"), ``;``
between cells (``,`` is the decimal mark in pt-BR), one row per invite: address (as the pages
show it), name, the word its row's badge shows (``app.invites.status.LABELS``), the last change
in the display time zone (``app.web.present.local_minute``), and the reason.

A cell is whatever a person typed (a name, an address) or a mail server answered (a reason):
one starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return would be run as a
formula by the spreadsheet that opens it (``=HYPERLINK(…)`` leaking the sheet, say), so it is
written with a leading ``'``, which spreadsheets show as text (OWASP's "CSV injection" advice).

The rows are read and written in chunks, so an export of many invites never sits whole in memory.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, select

from app.invites.records import INVITE, Invite, record_from
from app.invites.status import LABELS, Status
from app.invites.validation import shown_email
from app.storage.database import Database
from app.storage.tables import invites
from app.web.present import local_minute

HEADER = ("endereço", "nome", "situação", "última mudança", "motivo")
BOM = "\ufeff"
#: What a spreadsheet runs when a cell starts with it.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: Rows read (and written) at a time.
CHUNK = 500


def neutralise(cell: str) -> str:
    """``cell`` as a spreadsheet shows it, never runs it."""
    return "'" + cell if cell.startswith(_FORMULA_STARTS) else cell


def row_of(invite: Invite) -> tuple[str, ...]:
    cells = (
        shown_email(invite.email),  # as the pages show it (the domain in its own letters)
        invite.name or "",
        LABELS[invite.status],  # the word on the row's badge
        local_minute(invite.updated_at),
        invite.error or "",
    )
    return tuple(neutralise(cell) for cell in cells)


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, delimiter=";").writerows(rows)
    return out.getvalue()


def sender_filter(sender_id: str, statuses: Sequence[Status] | None) -> list[ColumnElement[bool]]:
    """The conditions of "Meus convites" (``app.invites.queries.invite_page``), for the export."""
    where = [invites.c.sender_id == sender_id, invites.c.kind == INVITE]
    if statuses is not None:
        where.append(invites.c.status.in_([status.value for status in statuses]))
    return where


async def _chunks(
    db: Database, where: Sequence[ColumnElement[bool]], newest_first: bool
) -> AsyncIterator[list[Invite]]:
    """The invites ``where`` selects, ``CHUNK`` at a time, each chunk in its own short read
    (keyset on the id: an export never holds a snapshot open while the client downloads)."""
    after: int | None = None
    order = invites.c.id.desc() if newest_first else invites.c.id
    while True:
        query: Any = select(invites).where(*where)
        if after is not None:
            query = query.where(invites.c.id < after if newest_first else invites.c.id > after)
        async with db.read() as conn:
            rows = (await conn.execute(query.order_by(order).limit(CHUNK))).all()
        found = [record_from(Invite, row) for row in rows]
        if found:
            yield found
        if len(found) < CHUNK:
            return
        after = found[-1].id


async def export_csv(
    db: Database, where: Sequence[ColumnElement[bool]], *, newest_first: bool
) -> AsyncIterator[str]:
    """The CSV file, in pieces: the BOM and header, then each chunk of rows."""
    yield BOM + csv_text([HEADER])
    async for chunk in _chunks(db, where, newest_first):
        yield csv_text(row_of(invite) for invite in chunk)
