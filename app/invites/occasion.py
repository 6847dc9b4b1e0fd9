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


def when_and_where(occasion: Occasion) -> str:
    """``sábado 12/12 às 7h00, Parque da Cidade`` (either part may be missing: ``""``)."""
    parts = []
    if occasion.at is not None:
        weekday = _WEEKDAYS[occasion.at.astimezone(DISPLAY_TZ).weekday()]
        parts.append(f"{weekday} {local_moment(occasion.at)}")
    if occasion.place:
        parts.append(occasion.place)
    return ", ".join(parts)


def occasion_words(invite: Invite) -> str | None:
    """``Corrida de sábado, sábado 12/12 às 7h00, Parque da Cidade``, or ``None``."""
    occasion = occasion_of(invite)
    if occasion is None:
        return None
    rest = when_and_where(occasion)
    return f"{occasion.title}, {rest}" if rest else occasion.title
