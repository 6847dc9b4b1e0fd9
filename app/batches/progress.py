"""What a batch's page says: its counters, and the few sentences a screen reader hears.

Every sentence is computed from the database (the counts per status), never from what one tab
happened to see, so a reload or a second tab arrives at the same words and the same ``key``;
the page script speaks a key once (``static/app.js``). A stream sends progress at most every
``BATCH_ANNOUNCE_SECONDS`` (``Throttle``); the end of the batch is said at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from app import clock
from app.invites.status import LABELS, Status

#: Still to be decided: while any invite is here, the batch is not finished.
IN_FLIGHT = frozenset({Status.PENDENTE, Status.ENVIANDO})
#: Reached the invitee's mail server (and, after answers exist, what follows from that).
DELIVERED = frozenset(s for s in Status if s.value in ("enviado", "aceito", "recusado", "expirado"))


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def received_text(size: int) -> str:
    """What the person hears once, when the batch is accepted."""
    return f"Recebemos {_plural(size, 'convite', 'convites')}, enviando…"


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

    @property
    def key(self) -> str:
        """The same for the same counts, whoever computes it (tabs, reloads)."""
        return ("fim:" if self.finished else "") + "-".join(str(n) for _, n in self.counts)

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
        """For the status region: progress ("40 de 120 enviados"), or the end summary."""
        if not self.finished:
            return f"{self.delivered} de {self.size} enviados"
        parts = [_plural(self.delivered, "enviado", "enviados")]
        if self.failed:
            parts.append(_plural(self.failed, "falhou", "falharam"))
        others = {s: n for s, n in self.counts if n and s not in DELIVERED and s != Status.FALHOU}
        parts += [_plural(n, s.value, s.value + "s") for s, n in others.items()]
        return ", ".join(parts) + "."

    @property
    def alert(self) -> str:
        """For the alert region, while sending: the failures so far, summed up."""
        if self.finished or not self.failed:
            return ""
        return f"{_plural(self.failed, 'falhou', 'falharam')}: veja a lista"


def summarize(size: int, found: dict[Status, int]) -> Summary:
    """The summary of a batch of ``size`` invites with these counts per status."""
    counts = [(status, found.get(status, 0)) for status in Status]
    return Summary(
        size=size,
        counts=counts,
        delivered=sum(n for s, n in counts if s in DELIVERED),
        failed=found.get(Status.FALHOU, 0),
        finished=not any(found.get(s, 0) for s in IN_FLIGHT),
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
