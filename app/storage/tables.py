"""The tables, in SQLAlchemy Core: every write is one explicit statement, and the transitions'
conditional UPDATEs have row counts that mean something."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    bindparam,
    func,
    literal_column,
    tuple_,
)

metadata = MetaData()

# SQLite autoincrement wants INTEGER; PostgreSQL gets BIGINT.
Id = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out, on SQLite (which drops the zone) and PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime; use datetime.now(UTC)")
        # A moment a person typed arrives in UTC already (app.invites.validation converts it
        # once in range), so this cannot overflow at the ends of the calendar.
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


#: Many invites sent at once (``app.batches``): who sent them, and how many.
batches = Table(
    "batches",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("public_id", String(32), nullable=False),
    Column("sender_id", String(64), nullable=False),
    Column("size", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("public_id", name="uq_batches_public_id"),
    Index("ix_batches_sender_id", "sender_id", "id"),
)

invites = Table(
    "invites",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("public_id", String(32), nullable=False, unique=True),
    Column("sender_id", String(64), nullable=False),
    Column("email", String(254), nullable=False),
    Column("name", String(200)),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("attempt", Integer, nullable=False),
    # Where the current round of automatic retries began: a resend gets a fresh budget.
    Column("round_first_attempt", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
    Column("next_attempt_at", UTCDateTime),
    Column("lease_expires_at", UTCDateTime),
    Column("correlation_id", String(64), nullable=False),
    # convite (an invitation) or acesso (a sign-in link mail: same pipeline, never listed).
    Column("kind", String(16), nullable=False, server_default="convite"),
    # Who the invitation names, as it was when it was written (empty on anonymous-era rows).
    Column("sender_name", String(100)),
    Column("sender_email", String(254)),
    # The sender's optional Mensagem (plain text, escaped wherever it is shown).
    Column("message", Text),
    # The batch it was sent in (``app.batches``), if any: its row then updates silently.
    Column("batch_id", Id, ForeignKey("batches.id")),
    # The moment the sender asked it to go (``agendado`` until then); kept after it went.
    Column("send_at", UTCDateTime),
    # What the invitation is for (optional): a title, and a moment and a place (plain text).
    Column("occasion_title", String(120)),
    Column("occasion_at", UTCDateTime),
    Column("occasion_place", String(200)),
    # The one reminder (``app.invites.transitions.reminders``): enviando (claimed; if it stays,
    # it is ambiguous and never re-sent on its own) | enviado | falhou, and when it was claimed.
    Column("reminder_status", String(16)),
    Column("reminded_at", UTCDateTime),
    # The sender pressed Lembrar: the worker's sweep claims and sends it.
    Column("reminder_requested_at", UTCDateTime),
    Index("ix_invites_sender_id", "sender_id", "id"),
    Index("ix_invites_status_next_attempt", "status", "next_attempt_at"),
    Index("ix_invites_email_created_at", "email", "created_at"),
    Index("ix_invites_batch_id", "batch_id", "id"),
    # The sweep releases the scheduled invites that are due.
    Index("ix_invites_status_send_at", "status", "send_at"),
    # The sweep looks for sent invites old enough for their reminder.
    Index("ix_invites_status_sent_at", "status", "sent_at"),
)
# A sender's invitations to one mailbox, however its local part was typed (``same_address``):
# the duplicate check (``sending.on_its_way``).
Index("ix_invites_sender_email", invites.c.sender_id, func.lower(invites.c.email))


def unindexed(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """``column`` as an expression no index serves (``column || ''``), for a statement whose
    rows a key finds: SQLite, without statistics, would otherwise scan every row of that status
    (or sender) through this column's index (``tests/test_query_plans.py``)."""
    return column.op("||")(literal_column("''"))


def keyed_in(columns: tuple[Any, ...]) -> list[Any]:
    """``(a, b) IN (…)`` in a form an index serves (SQLite searches none for a row-value ``IN``):
    each column its own ``IN`` too, the lists bound when it runs (``keyed_params``)."""
    per_column = [
        column.in_(bindparam(f"key_{i}", expanding=True)) for i, column in enumerate(columns)
    ]
    return [*per_column, tuple_(*columns).in_(bindparam("key", expanding=True))]


def keyed_params(keys: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """The values of ``keyed_in``'s parameters for these keys (at least one)."""
    pairs = list(dict.fromkeys(keys))
    params: dict[str, list[Any]] = {
        f"key_{i}": list(dict.fromkeys(column)) for i, column in enumerate(zip(*pairs, strict=True))
    }
    params["key"] = pairs
    return params


invite_events = Table(
    "invite_events",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("invite_id", Id, ForeignKey("invites.id"), nullable=False),
    Column("sender_id", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("error", Text),
    Column("next_attempt_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    # On falhou/incerto events: transient_exhausted | permanent | uncertain (app.invites.status).
    Column("failure_class", String(24)),
    # On a reminder's event (the invite's status unchanged): enviado | falhou.
    Column("reminder", String(16)),
    Index("ix_invite_events_sender_id", "sender_id", "id"),
    Index("ix_invite_events_invite_id", "invite_id", "id"),
    # Health and metrics count events by status and look at the last hour of failures.
    Index("ix_invite_events_status_created_at", "status", "created_at"),
)

outbox = Table(
    "outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("invite_id", Id, ForeignKey("invites.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("available_at", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("published_at", UTCDateTime),
    Column("job_id", String(96)),
    Index(
        "ix_outbox_unpublished",
        "id",
        sqlite_where=Column("published_at").is_(None),
        postgresql_where=Column("published_at").is_(None),
    ),
    Index("ix_outbox_invite_id", "invite_id", "id"),
)

accounts = Table(
    "accounts",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    # The sender id of its invites and events (random: accounts are never addressed by number).
    Column("public_id", String(32), nullable=False),
    Column("email", String(254), nullable=False),  # normalised (app.accounts.store.normalise_email)
    Column("name", String(100)),  # asked at the first sign-in
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("public_id", name="uq_accounts_public_id"),
    UniqueConstraint("email", name="uq_accounts_email"),
)

#: Server-side sessions: the cookie carries a random token, only its hash is here. ``/conta``
#: lists an account's live ones (the device from the User-Agent at sign-in, the client network
#: at sign-in and at the last use) so the person can end any of them.
sessions = Table(
    "sessions",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("public_id", String(32), nullable=False),
    Column("token_hash", String(64), nullable=False),
    Column("account_id", Id, ForeignKey("accounts.id"), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
    Column("user_agent", String(300)),
    Column("created_network", String(64)),
    Column("last_used_at", UTCDateTime, nullable=False),
    Column("last_network", String(64)),
    UniqueConstraint("token_hash", name="uq_sessions_token_hash"),
    UniqueConstraint("public_id", name="uq_sessions_public_id"),
    Index("ix_sessions_account_id", "account_id"),
)

#: Sign-in links: issued by the worker as it sends the mail, single use, hash only.
signin_tokens = Table(
    "signin_tokens",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("token_hash", String(64), nullable=False),
    Column("invite_id", Id, ForeignKey("invites.id"), nullable=False),
    Column("email", String(254), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("used_at", UTCDateTime),
    UniqueConstraint("token_hash", name="uq_signin_tokens_token_hash"),
    Index("ix_signin_tokens_invite_id", "invite_id"),
    Index("ix_signin_tokens_email", "email"),
)

#: The invitee's links (``/c/{token}``): issued by the worker as it sends each attempt, hash only.
#: One live link per invite: issuing one, or re-sending, sets ``replaced_at`` on the others.
invite_links = Table(
    "invite_links",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("token_hash", String(64), nullable=False),
    Column("invite_id", Id, ForeignKey("invites.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("replaced_at", UTCDateTime),
    # The token is an HMAC of this seed under SECRET_KEY, so a reminder can carry the same link
    # while the database alone still cannot rebuild it (empty on links issued before).
    Column("seed", String(64)),
    UniqueConstraint("token_hash", name="uq_invite_links_token_hash"),
    Index("ix_invite_links_invite_id", "invite_id", "id"),
    # One live link per invite, enforced by the database too.
    Index(
        "uq_invite_links_live",
        "invite_id",
        unique=True,
        sqlite_where=Column("replaced_at").is_(None),
        postgresql_where=Column("replaced_at").is_(None),
    ),
)

# Every delivery status notification received, readable or not, matched or not: nothing a
# bounce says is lost. ``dedup_key`` makes the same bounce twice one row (app.bounces.store).
bounces = Table(
    "bounces",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("dedup_key", String(64), nullable=False, unique=True),
    Column("received_at", UTCDateTime, nullable=False),
    Column("envelope_recipient", String(320), nullable=False),
    Column("public_id", String(32)),
    Column("invite_id", Id, ForeignKey("invites.id")),
    # permanent | delayed | other | unreadable (app.bounces.reader.BounceKind)
    Column("kind", String(16), nullable=False),
    # devolvido | history | stale | unknown_invite (app.bounces.store.Outcome)
    Column("outcome", String(16), nullable=False),
    Column("status_code", String(16)),
    Column("reason", Text),
    Column("reporting_host", String(255)),
    Column("diagnostic", Text),
    Column("attempt", Integer),
    Column("problem", Text),
    Column("raw", LargeBinary, nullable=False),
    Index("ix_bounces_invite_id", "invite_id", "id"),
    Index("ix_bounces_kind_outcome", "kind", "outcome"),
)

# Switches the team sets on purpose (``app.sending.pause``): in the database, to survive Redis.
controls = Table(
    "controls",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

#: An account's API keys (``app.api.keys``): ``Authorization: Bearer <chave>`` on ``/api/v1``.
#: The key is shown once, at creation; only its SHA-256 is here.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("public_id", String(32), nullable=False),
    Column("account_id", Id, ForeignKey("accounts.id"), nullable=False),
    Column("name", String(100), nullable=False),
    Column("key_hash", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_used_at", UTCDateTime),
    Column("revoked_at", UTCDateTime),
    UniqueConstraint("public_id", name="uq_api_keys_public_id"),
    UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    Index("ix_api_keys_account_id", "account_id", "id"),
)

#: ``Idempotency-Key`` claims (``app.api.idempotency``): the row is claimed (unique per API key
#: and key) before the work, so two requests with one key do the work once; the first answer is
#: kept to be given again. ``status_code`` is NULL while the first request is still running.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("api_key_id", Id, ForeignKey("api_keys.id"), nullable=False),
    Column("key", String(255), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("status_code", Integer),
    Column("location", String(300)),
    Column("body", Text),
    UniqueConstraint("api_key_id", "key", name="uq_idempotency_keys_api_key_id_key"),
    Index("ix_idempotency_keys_created_at", "created_at"),
)

#: Addresses nobody may invite (``app.consent.suppression``): keyed by the SHA-256 of the
#: normalised address, so an erasure can drop ``email`` and keep only the hash.
suppressions = Table(
    "suppressions",
    metadata,
    Column("address_hash", String(64), primary_key=True),
    Column("email", String(254)),  # shown to operators; NULL once the address was erased
    # descadastro | devolucao | reclamacao (app.consent.suppression.Reason)
    Column("reason", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("detail", String(200)),
    Index("ix_suppressions_created_at", "created_at"),
)

#: An account's webhooks (``app.webhooks``): every status change of its invites is POSTed to
#: ``url``, signed with ``secret`` (Standard Webhooks). The secret is kept as it is, since
#: signing needs it (SECURITY.md, "API and webhooks"); it is shown once, at creation. After
#: ``WEBHOOK_MAX_FAILURES`` failed deliveries in a row the webhook is disabled (``disabled_at``).
webhooks = Table(
    "webhooks",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("public_id", String(32), nullable=False),
    Column("account_id", Id, ForeignKey("accounts.id"), nullable=False),
    Column("url", String(2000), nullable=False),
    Column("secret", String(100), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("failures", Integer, nullable=False),  # deliveries that ended falhou, in a row
    Column("disabled_at", UTCDateTime),
    UniqueConstraint("public_id", name="uq_webhooks_public_id"),
    Index("ix_webhooks_account_id", "account_id", "id"),
)

#: One row per (webhook, invite event): written in the transaction of the status change
#: (``app.invites.transitions.core``), so the change and its deliveries commit together; then
#: pendente → entregue | falhou (``app.webhooks.deliver``). ``public_id`` is the ``webhook-id``
#: of every attempt; ``body`` is frozen at the first attempt, so a retry sends the same bytes.
#: ``queued_until``: a job is on the queue (the sweep publishes again after it); ``leased_until``:
#: a worker holds the row (its claim, a conditional UPDATE).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("public_id", String(40), nullable=False),
    Column("webhook_id", Id, ForeignKey("webhooks.id"), nullable=False),
    Column("event_id", Id, ForeignKey("invite_events.id"), nullable=False),
    Column("invite_id", Id, ForeignKey("invites.id"), nullable=False),
    Column("event_type", String(40), nullable=False),
    # The invite's address when its event was written: a correction later changes the row's,
    # not the one this event was about (NULL in rows written before it: the row's is used).
    Column("email", String(254)),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("available_at", UTCDateTime, nullable=False),
    Column("queued_until", UTCDateTime),
    Column("enqueues", Integer, nullable=False),
    Column("leased_until", UTCDateTime),
    Column("status_code", Integer),
    Column("snippet", String(300)),
    Column("body", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("public_id", name="uq_webhook_deliveries_public_id"),
    Index("ix_webhook_deliveries_webhook_id", "webhook_id", "id"),
    # Retention and erasure delete an invite's deliveries with it (app.consent.removal).
    Index("ix_webhook_deliveries_invite_id", "invite_id", "id"),
    Index(
        "ix_webhook_deliveries_due",
        "available_at",
        sqlite_where=Column("state") == "pendente",
        postgresql_where=Column("state") == "pendente",
    ),
)
