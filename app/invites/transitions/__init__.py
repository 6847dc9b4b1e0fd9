"""The invite state machine: every status change lives in this package, and nowhere else.

Each transition is one conditional ``UPDATE … WHERE status = …`` plus one ``invite_events``
row per row it changed, in one transaction (``core``). A transition that finds the row in
another state changes nothing and returns ``None``: that is how two workers, a redelivered job
and a double click never both win.

    pendente → enviando → enviado | pendente (retry) | falhou      (sending)
    enviando → incerto (lease expired, or the send broke mid-DATA)  (sending)
    enviando → pendente (graceful stop before DATA)                 (sending)
    falhou | incerto → pendente (the person, or an operator, asks)  (again)
    expirado | recusado | cancelado → pendente (the person asks)    (again)
    devolvido → pendente (the address corrected)                    (again)
    enviado | incerto → devolvido (a bounce)                        (bounced)
    enviado | incerto | devolvido → aceito | recusado (the link)    (answered)
    pendente | enviado | incerto | falhou | devolvido → cancelado   (answered)
    enviado | incerto → expirado (no answer in INVITE_TTL_SECONDS)  (answered)

No web, no Redis here; callers publish the returned changes (``app.sending.queue.Publisher``) and
announce them (``app.live.wakeups.Announcer``).
"""

from app.invites.transitions.again import correct_and_resend, request_resend, request_resend_many
from app.invites.transitions.answered import accept, cancel, decline, expire_unanswered
from app.invites.transitions.bounced import mark_bounced
from app.invites.transitions.sending import (
    Claimed,
    claim_with_link,
    create_invite,
    create_invites,
    expire_leases,
    mark_failed,
    mark_sent,
    mark_uncertain,
    release_claim,
    schedule_retry,
)

__all__ = [
    "Claimed",
    "accept",
    "cancel",
    "claim_with_link",
    "correct_and_resend",
    "create_invite",
    "create_invites",
    "decline",
    "expire_leases",
    "expire_unanswered",
    "mark_bounced",
    "mark_failed",
    "mark_sent",
    "mark_uncertain",
    "release_claim",
    "request_resend",
    "request_resend_many",
    "schedule_retry",
]
