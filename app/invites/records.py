"""What the rest of the app sees of the tables: plain frozen records, built one way."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.engine import Row

from app.invites.status import Status

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R", bound="DataclassInstance")


@cache
def _field_names(cls: type[Any]) -> tuple[str, ...]:
    # dataclasses.fields() walks the class each call; every row read or written comes here.
    return tuple(field.name for field in fields(cls))


def record_from(cls: type[R], row: Row[Any] | Mapping[Any, Any]) -> R:
    """``cls`` built from the columns of a row (extra columns are ignored; ``status`` typed)."""
    mapping: Mapping[Any, Any] = row._mapping if isinstance(row, Row) else row
    values = {name: mapping[name] for name in _field_names(cls)}
    if "status" in values:
        values["status"] = Status(values["status"])
    return cls(**values)


@dataclass(frozen=True)
class Invite:
    """One row of ``invites``."""

    id: int
    public_id: str
    sender_id: str
    email: str
    name: str | None
    status: Status
    error: str | None
    attempt: int
    round_first_attempt: int
    created_at: datetime
    updated_at: datetime
    sent_at: datetime | None
    next_attempt_at: datetime | None
    lease_expires_at: datetime | None
    correlation_id: str
    kind: str  # INVITE, SIGNIN_MAIL or ERASURE_MAIL
    sender_name: str | None  # who the invitation names (None on anonymous-era rows)
    sender_email: str | None
    message: str | None = None  # the sender's optional Mensagem, plain text
    batch_id: int | None = None  # sent in a batch (``app.batches``): the row updates silently
    send_at: datetime | None = None  # scheduled: when it is to go (``agendado`` until then)
    reminder_status: str | None = None  # the reminder: enviando | enviado | falhou
    reminded_at: datetime | None = None  # when the last reminder was claimed
    reminder_requested_at: datetime | None = None  # the sender pressed Lembrar
    occasion_title: str | None = None  # what the invitation is for ("Corrida de sábado")
    occasion_at: datetime | None = None  # when it happens (optional)
    occasion_place: str | None = None  # where (optional)


#: ``Invite.kind``: an invitation, a sign-in link mail, the confirmation link of an erasure
#: the invitee asked for (``app.consent.confirmation``), or the notice to an account that one of
#: its webhooks was disabled (``app.webhooks.deliver``; ``message`` holds the webhook's URL);
#: the mails go through the same pipeline and are never listed.
INVITE = "convite"
SIGNIN_MAIL = "acesso"
ERASURE_MAIL = "apagar"
WEBHOOK_MAIL = "webhook"


@dataclass(frozen=True)
class Account:
    """A sender: a normalised e-mail address and the name its invitations show."""

    id: int
    public_id: str  # the ``sender_id`` of its invites and events
    email: str
    name: str | None
    created_at: datetime


@dataclass(frozen=True)
class Event:
    """One row of ``invite_events``: a transition the person can see in the history."""

    id: int
    invite_id: int
    status: Status
    attempt: int
    error: str | None
    next_attempt_at: datetime | None
    created_at: datetime
    reminder: str | None = None  # a reminder's event: enviado | falhou (the status unchanged)


@dataclass(frozen=True)
class Change:
    """A committed transition: the invite as it now is and the event that recorded it."""

    invite: Invite
    event_id: int
    outbox_id: int | None = None  # set when the transition asks for a job (publish it)


@dataclass(frozen=True)
class Duplicate:
    """A new invitation not written: its sender already has ``invite`` on the way there."""

    invite: Invite


@dataclass(frozen=True)
class OutboxEntry:
    """An attempt that needs an arq job."""

    id: int
    invite_id: int
    public_id: str
    attempt: int
    available_at: datetime
    correlation_id: str


@dataclass(frozen=True)
class NewInvite:
    """What a request asks for; ``app.invites.transitions.create_invites`` makes it a ``pendente``
    row (``agendado`` with ``send_at``)."""

    sender_id: str
    email: str
    name: str | None
    correlation_id: str
    kind: str = INVITE
    sender_name: str | None = None
    sender_email: str | None = None
    message: str | None = None
    batch_id: int | None = None
    send_at: datetime | None = None  # written ``agendado`` when set, ``pendente`` otherwise
    occasion: Occasion | None = None


@dataclass(frozen=True)
class Occasion:
    """What an invitation is for: a title, and optionally when and where."""

    title: str
    at: datetime | None = None
    place: str | None = None


def new_public_id() -> str:
    """A random, URL-safe id: invites are never addressed by row number."""
    return secrets.token_urlsafe(12)
