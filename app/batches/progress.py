"""What a batch's page says: its counters, and the few sentences a screen reader hears.

Every sentence is computed from the database (the counts per status), never from what one tab
happened to see, so a reload or a second tab arrives at the same words and the same ``key``;
the page script speaks a key once (``static/app.js``). A stream sends progress at most every
``BATCH_ANNOUNCE_SECONDS`` (``Throttle``); the end of the batch is said at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from app import clock
from app.clock import local_moment
from app.invites.status import LABELS, Status

#: Still to be decided: while any invite is here, the batch is not finished (a scheduled one
#: is still to be sent, so a batch written ``agendado`` is not "terminado").
IN_FLIGHT = frozenset({Status.AGENDADO, Status.PENDENTE, Status.ENVIANDO})
#: Of those, the ones on their way now (not waiting for their moment).
MOVING = frozenset({Status.PENDENTE, Status.ENVIANDO})
#: Reached the invitee's mail server (and, after answers exist, what follows from that).
DELIVERED = frozenset(s for s in Status if s.value in ("enviado", "aceito", "recusado", "expirado"))


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def scheduled_text(send_at: datetime) -> str:
    """``Agendado para 12/12 às 9h00``: a scheduled batch, said once for the whole batch."""
    return f"Agendado para {local_moment(send_at)}"


def received_text(size: int, send_at: datetime | None = None) -> str:
    """What the person hears once, when the batch is accepted."""
    invites = _plural(size, "convite", "convites")
    if send_at is not None:
        return f"Recebemos {invites}. {scheduled_text(send_at)}."
    return f"Recebemos {invites}, enviando…"


#: How a batch's reminders are counted in its summary (``invites.reminder_status``, and
#: ``pedido`` for one asked for and not yet claimed), in this order.
REMINDER_WORDS = {
    "enviado": ("lembrete enviado", "lembretes enviados"),
    "falhou": ("lembrete não enviado", "lembretes não enviados"),
    "incerto": ("lembrete sem confirmação", "lembretes sem confirmação"),
}


@dataclass(frozen=True)
class Counter:
    """One counter the page shows: a label of the rows' badges and how many; ``held``: of
    them, ``pendente`` ones, which read "Pausado" while sending is paused."""

    status: Status
    label: str
    count: int
    held: int = 0


@dataclass(frozen=True)
class Summary:
    """A batch's state as the page shows and says it."""

    size: int
    counts: list[tuple[Status, int]]  # every status of ``Status``, in its order
    delivered: int
    failed: int
    finished: bool
    #: How many of its invites' reminders are in each state (``REMINDER_WORDS``, ``pedido``).
    reminders: dict[str, int] = field(default_factory=dict)
    #: When its earliest ``agendado`` invite goes (``None``: none is scheduled).
    send_at: datetime | None = None

    @property
    def scheduled(self) -> int:
        return dict(self.counts).get(Status.AGENDADO, 0)

    @property
    def waiting(self) -> bool:
        """Only scheduled invites are still to go: the batch waits for its moment."""
        found = dict(self.counts)
        return self.scheduled > 0 and not any(found.get(s, 0) for s in MOVING)

    @property
    def key(self) -> str:
        """The same for the same counts, whoever computes it (tabs, reloads)."""
        reminders = "-".join(str(self.reminders.get(s, 0)) for s in REMINDER_WORDS)
        statuses = "-".join(str(n) for _, n in self.counts)
        return ("fim:" if self.finished else "") + statuses + ":" + reminders

    @property
    def reminders_spoken(self) -> str:
        """``3 lembretes enviados, 1 lembrete não enviado``: every reminder of the batch in a
        few words, never one sentence per row."""
        return ", ".join(
            _plural(self.reminders[state], *words)
            for state, words in REMINDER_WORDS.items()
            if self.reminders.get(state, 0)
        )

    @property
    def counters(self) -> list[Counter]:
        """The states that occur, in the rows' words (pendente and enviando are both
        "Enviando", so one counter)."""
        found = dict(self.counts)
        shown = []
        for status, count in self.counts:
            if status == Status.PENDENTE:
                continue
            if status == Status.ENVIANDO:
                held = found.get(Status.PENDENTE, 0)
                count += held
            else:
                held = 0
            if count:
                shown.append(Counter(status, LABELS[status], count, held))
        return shown

    @property
    def spoken(self) -> str:
        """For the status region: progress ("40 de 120 enviados"), the moment a scheduled
        batch waits for, or the end summary (with its reminders, once there are any)."""
        if not self.finished:
            return self._progress()
        parts = [_plural(self.delivered, "enviado", "enviados")]
        if self.failed:
            parts.append(_plural(self.failed, "falhou", "falharam"))
        others = {s: n for s, n in self.counts if n and s not in DELIVERED and s != Status.FALHOU}
        parts += [_plural(n, s.value, s.value + "s") for s, n in others.items()]
        said = ", ".join(parts) + "."
        reminders = self.reminders_spoken
        return f"{said} {reminders[0].upper()}{reminders[1:]}." if reminders else said

    def _progress(self) -> str:
        if not (self.waiting and self.send_at is not None):
            return f"{self.delivered} de {self.size} enviados"
        if not (self.delivered or self.failed):
            return scheduled_text(self.send_at)
        waiting = _plural(self.scheduled, "agendado", "agendados")
        return (
            f"{self.delivered} de {self.size} enviados; {waiting} para {local_moment(self.send_at)}"
        )

    @property
    def alert(self) -> str:
        """For the alert region, while sending: the failures so far, summed up."""
        if self.finished or not self.failed:
            return ""
        return f"{_plural(self.failed, 'falhou', 'falharam')}: veja a lista"


def summarize(
    size: int,
    found: dict[Status, int],
    reminders: dict[str, int] | None = None,
    send_at: datetime | None = None,
) -> Summary:
    """The summary of a batch of ``size`` invites with these counts per status (and of their
    reminders, and the moment its scheduled invites wait for)."""
    counts = [(status, found.get(status, 0)) for status in Status]
    return Summary(
        size=size,
        counts=counts,
        delivered=sum(n for s, n in counts if s in DELIVERED),
        failed=found.get(Status.FALHOU, 0),
        finished=not any(found.get(s, 0) for s in IN_FLIGHT),
        reminders=dict(reminders or {}),
        send_at=send_at,
    )


class Throttle:
    """At most one progress sentence every ``seconds`` (the first after ``seconds``, too:
    the person just heard "Recebemos")."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = clock.monotonic()

    def ready(self) -> bool:
        return clock.monotonic() - self.last >= self.seconds

    def wait(self) -> float:
        """Seconds until the next sentence may go out."""
        return max(0.0, self.last + self.seconds - clock.monotonic())

    def spoke(self) -> None:
        self.last = clock.monotonic()
