"""The invite state machine: every status change lives in this package, and nowhere else.

Each transition is one conditional ``UPDATE … WHERE status = …`` plus an event row per row it
changed, in one transaction (``core``); a row found in another state changes nothing (``None``),
so two workers, a redelivered job and a double click never both win. Each module lists its
arrows. No web, no Redis here: callers publish and announce the returned changes.
"""

from app.invites.transitions.again import correct_and_resend, request_resend, request_resend_many
from app.invites.transitions.answered import (
    accept,
    cancel,
    decline,
    expire_unanswered,
    mark_unwanted,
)
from app.invites.transitions.bounced import mark_bounced
from app.invites.transitions.scheduled import (
    call_off_for,
    release_due,
    reschedule,
    restore_called_off,
)
from app.invites.transitions.sending import (
    Claimed,
    cancel_claim,
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
    "call_off_for",
    "cancel",
    "cancel_claim",
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
    "mark_unwanted",
    "release_claim",
    "release_due",
    "request_resend",
    "request_resend_many",
    "reschedule",
    "restore_called_off",
    "schedule_retry",
]
