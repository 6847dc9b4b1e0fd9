"""Each row's verdict before anything is written: the review a person reads row by row.

The checks are the single form's (``app.invites.validation``), plus what only a list can have: a row
repeated in it, an address this sender already invited (still on its way), and one of this
sender's that bounced before. Every verdict depends on this sender's own invites only: the
review never tells whether *someone else* invited an address (so no per-recipient limit here;
``POST /lotes`` still counts it, see SECURITY.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import func, select

from app.batches.parse import Row
from app.consent.suppression import REFUSALS, Reason, reasons_for
from app.invites.records import INVITE, Invite, record_from
from app.invites.status import ON_ITS_WAY, WHERE_IT_IS, Status
from app.invites.validation import check_email, check_name, same_address
from app.storage.database import Database
from app.storage.tables import invites


class Verdict(StrEnum):
    OK = "ok"
    INVALID = "invalido"
    REPEATED = "repetido"
    ALREADY_INVITED = "ja_convidado"
    BOUNCED = "devolvido_antes"
    SUPPRESSED = "nao_recebe"  # on the suppression list (app.consent.suppression)


#: How each verdict is counted at the top of the review (pt-BR), in this order.
VERDICT_LABELS = {
    Verdict.OK: "Prontos para enviar",
    Verdict.INVALID: "Endereço ou nome inválido",
    Verdict.REPEATED: "Repetidos nesta lista",
    Verdict.ALREADY_INVITED: "Já convidados por você",
    Verdict.BOUNCED: "Devolvidos antes",
    Verdict.SUPPRESSED: "Não recebem convites",
}


@dataclass(frozen=True)
class Reviewed:
    """One row and its verdict; ``email``/``name`` are what would be sent (checked forms)."""

    row: Row
    verdict: Verdict
    message: str
    email: str | None = None
    name: str | None = None
    existing: Invite | None = None  # the invite already on its way, or the one that bounced

    @property
    def ok(self) -> bool:
        return self.verdict == Verdict.OK


@dataclass(frozen=True)
class Review:
    """Every row with its verdict, and the counts the page shows at the top."""

    rows: list[Reviewed]

    @property
    def ok_rows(self) -> list[Reviewed]:
        return [row for row in self.rows if row.ok]

    @property
    def problems(self) -> list[Reviewed]:
        return [row for row in self.rows if not row.ok]

    @property
    def counts(self) -> list[tuple[Verdict, str, int]]:
        found = Counter(row.verdict for row in self.rows)
        return [(v, label, found[v]) for v, label in VERDICT_LABELS.items() if found[v]]


def _checked(row: Row) -> Reviewed:
    email, email_error = check_email(row.email, "Esta linha não tem e-mail.")
    name, name_error = check_name(row.name)
    if email_error or name_error or email is None:
        return Reviewed(row, Verdict.INVALID, " ".join(e for e in (email_error, name_error) if e))
    return Reviewed(row, Verdict.OK, "Pronto para enviar.", email, name)


async def _earlier_invites(
    db: Database, sender_id: str, emails: Sequence[str]
) -> tuple[dict[str, Invite], dict[str, Invite]]:
    """This sender's invites to these mailboxes (by ``same_address``): those on their way, and
    those that bounced."""
    if not emails:
        return {}, {}
    query = select(invites).where(
        invites.c.sender_id == sender_id,
        invites.c.kind == INVITE,
        func.lower(invites.c.email).in_(list({same_address(email) for email in emails})),
        invites.c.status.in_([s.value for s in (*ON_ITS_WAY, Status.DEVOLVIDO)]),
    )
    async with db.read() as conn:
        found = [record_from(Invite, row) for row in (await conn.execute(query)).all()]
    on_the_way = {same_address(i.email): i for i in found if i.status in ON_ITS_WAY}
    bounced = {same_address(i.email): i for i in found if i.status == Status.DEVOLVIDO}
    return on_the_way, bounced


def _repeats(rows: list[Reviewed]) -> list[Reviewed]:
    first_line: dict[str, int] = {}
    out = []
    for item in rows:
        if item.ok and item.email is not None:
            key = same_address(item.email)
            if key in first_line:
                message = f"Repetido nesta lista (já está na linha {first_line[key]})."
                item = Reviewed(item.row, Verdict.REPEATED, message, item.email, item.name)
            else:
                first_line[key] = item.row.line
        out.append(item)
    return out


def _against_history(
    item: Reviewed,
    on_the_way: dict[str, Invite],
    bounced: dict[str, Invite],
    suppressed: dict[str, Reason],
) -> Reviewed:
    if not item.ok or item.email is None:
        return item
    if item.email in suppressed:
        message = REFUSALS[suppressed[item.email]]
        return Reviewed(item.row, Verdict.SUPPRESSED, message, item.email, item.name)
    mailbox = same_address(item.email)
    if mailbox in on_the_way:
        invite = on_the_way[mailbox]
        message = f"Você já convidou este endereço; o convite {WHERE_IT_IS[invite.status]}."
        return Reviewed(item.row, Verdict.ALREADY_INVITED, message, item.email, item.name, invite)
    if mailbox in bounced:
        message = "Um convite seu para este endereço voltou (devolvido). Confira o endereço."
        invite = bounced[mailbox]
        return Reviewed(item.row, Verdict.BOUNCED, message, item.email, item.name, invite)
    return item


async def review(db: Database, sender_id: str, rows: Sequence[Row]) -> Review:
    """Every row's verdict, in the order given (one database read)."""
    checked = _repeats([_checked(row) for row in rows])
    emails = [item.email for item in checked if item.ok and item.email is not None]
    on_the_way, bounced = await _earlier_invites(db, sender_id, emails)
    suppressed = await reasons_for(db, emails)
    return Review([_against_history(item, on_the_way, bounced, suppressed) for item in checked])
