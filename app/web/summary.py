"""The summary line above "Meus convites" and its filter by state (plain links, no JS needed).

Asked for again after a row changes, silently: the row's own announcement is what is heard.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.invites import queries
from app.invites.status import (
    AWAITING_ANSWER,
    NEEDS_ATTENTION,
    ON_THE_WAY_OUT,
    SCHEDULED,
    Status,
)
from app.web.common import db_of, render, sender_id, wants_json
from app.web.identity import signed_in


@dataclass(frozen=True)
class Filter:
    slug: str  # the ``?estado=`` value
    label: str
    statuses: tuple[Status, ...] | None  # None: every invite


FILTERS = (
    Filter("todos", "Todos", None),
    Filter("aceitos", "Aceitos", (Status.ACEITO,)),
    Filter("agendados", "Agendados", SCHEDULED),
    Filter("enviando", "Enviando", ON_THE_WAY_OUT),
    Filter("aguardando", "Aguardando resposta", AWAITING_ANSWER),
    Filter("atencao", "Precisam de atenção", NEEDS_ATTENTION),
    Filter("encerrados", "Recusados, expirados ou cancelados",
           (Status.RECUSADO, Status.EXPIRADO, Status.CANCELADO)),
)  # fmt: skip
_BY_SLUG = {item.slug: item for item in FILTERS}


def chosen_filter(request: Request) -> Filter:
    """The filter the page asks for (an unknown ``?estado=`` shows everything)."""
    return _BY_SLUG.get(request.query_params.get("estado", ""), FILTERS[0])


@dataclass(frozen=True)
class Summary:
    total: int
    scheduled: int
    accepted: int
    sending: int  # pendente and enviando: each row's badge says "Enviando"…
    pending: int  # …but a pendente one says "Pausado" while sending is paused
    awaiting: int
    attention: int
    closed: int


async def summary_of(request: Request) -> Summary:
    counts = await queries.status_counts(db_of(request), sender_id(request))
    return Summary(
        total=sum(counts.values()),
        scheduled=sum(counts[status] for status in SCHEDULED),
        accepted=counts[Status.ACEITO],
        sending=sum(counts[status] for status in ON_THE_WAY_OUT),
        pending=counts[Status.PENDENTE],
        awaiting=sum(counts[status] for status in AWAITING_ANSWER),
        attention=sum(counts[status] for status in NEEDS_ATTENTION),
        closed=sum(counts[s] for s in (Status.RECUSADO, Status.EXPIRADO, Status.CANCELADO)),
    )


@signed_in
async def show(request: Request) -> Response:
    """GET /convites/resumo: the summary line alone (the page script refreshes it)."""
    summary = await summary_of(request)
    if wants_json(request):
        return JSONResponse(
            {
                "total": summary.total,
                "agendados": summary.scheduled,
                "aceitos": summary.accepted,
                "enviando": summary.sending,
                "aguardando_resposta": summary.awaiting,
                "precisam_de_atencao": summary.attention,
                "encerrados": summary.closed,
            }
        )
    return render(request, "_summary.html", {"summary": summary})
