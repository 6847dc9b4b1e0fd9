"""What an invitation is for, in the words every place uses: the mail's subject and body, the
invitee's page, the sender's list ("Corrida de sábado, sábado 12/12 às 7h00, Parque da Cidade")."""

from __future__ import annotations

from app.clock import DISPLAY_TZ, local_moment
from app.invites.records import Invite, Occasion

_WEEKDAYS = ("segunda", "terça", "quarta", "quinta", "sexta", "sábado", "domingo")


def occasion_of(invite: Invite) -> Occasion | None:
    if not invite.occasion_title:
        return None
    return Occasion(invite.occasion_title, invite.occasion_at, invite.occasion_place)


#: After a moment shown to an invitee, who may live in another time zone (a sender's pages say
#: Brasília once, in their fields' labels).
ZONE = " (horário de Brasília)"


def when_and_where(occasion: Occasion, *, zone: bool = False) -> str:
    """``sábado 12/12 às 7h00, Parque da Cidade`` (either part may be missing: ``""``); with
    ``zone``, the moment says its time zone."""
    parts = []
    if occasion.at is not None:
        weekday = _WEEKDAYS[occasion.at.astimezone(DISPLAY_TZ).weekday()]
        parts.append(f"{weekday} {local_moment(occasion.at)}{ZONE if zone else ''}")
    if occasion.place:
        parts.append(occasion.place)
    return ", ".join(parts)


def occasion_words(invite: Invite, *, zone: bool = False) -> str | None:
    """``Corrida de sábado, sábado 12/12 às 7h00, Parque da Cidade``, or ``None``."""
    occasion = occasion_of(invite)
    if occasion is None:
        return None
    rest = when_and_where(occasion, zone=zone)
    return f"{occasion.title}, {rest}" if rest else occasion.title
