"""After the 250: a bounce says the message did not arrive.

enviado | incerto → devolvido
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from app.invites.records import Change
from app.invites.status import BOUNCEABLE, Status
from app.invites.transitions.core import transition_all
from app.storage.tables import invites


async def mark_bounced(
    conn: AsyncConnection, invite_id: int, attempt: int | None, reason: str
) -> Change | None:
    """``enviado | incerto → devolvido``: a delivery status notification said it failed for good.

    In the caller's transaction. A bounce naming its attempt turns only that attempt (a late
    bounce must not mark the corrected send); ``None``: another state, the bounce is history.
    """
    where = [invites.c.id == invite_id, invites.c.status.in_([s.value for s in BOUNCEABLE])]
    if attempt is not None:
        where.append(invites.c.attempt == attempt)
    changes = await conn.run_sync(
        transition_all,
        where,
        {
            "status": Status.DEVOLVIDO.value,
            "error": reason,
            "lease_expires_at": None,
            "next_attempt_at": None,
        },
    )
    return changes[0] if changes else None
