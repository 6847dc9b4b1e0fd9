"""Deleting invites with everything that hangs from them, for retention and erasure alike.

An invite's webhook deliveries, events, links, bounces, outbox rows and sign-in links point at
it (foreign keys, enforced on SQLite too), so they go first, in the same transaction as the
invite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sqlalchemy import Connection, Table, delete

from app.storage.tables import (
    bounces,
    invite_events,
    invite_links,
    invites,
    outbox,
    signin_tokens,
    webhook_deliveries,
)

#: What hangs from an invite, deleted before it (webhook deliveries name its events too).
DEPENDENTS: tuple[Table, ...] = (
    webhook_deliveries,
    invite_events,
    invite_links,
    bounces,
    outbox,
    signin_tokens,
)

#: How each table's rows are named where a person reads the counts (``python -m app esquecer``).
LABELS = {
    "invites": "convites e e-mails de acesso",
    "invite_events": "eventos",
    "invite_links": "links de convite",
    "bounces": "devoluções",
    "outbox": "envios na fila (outbox)",
    "signin_tokens": "links de acesso",
    "accounts": "contas",
    "sessions": "sessões (aparelhos)",
    "batches": "lotes",
    "api_keys": "chaves de API",
    "idempotency_keys": "respostas guardadas da API (Idempotency-Key)",
    "webhooks": "webhooks",
    "webhook_deliveries": "entregas de webhook",
    "webhook_deliveries.email": (
        "entregas de webhook de antes de uma correção (endereço substituído)"
    ),
    "webhook_deliveries.body": "entregas de webhook de outras contas (endereço substituído)",
    "webhook_deliveries.snippet": (
        "respostas de receptores de webhook de outras contas (endereço substituído)"
    ),
    "suppressions": "entradas na lista de supressão",
    "suppressions.email": "descadastro mantido só como hash (sem o endereço)",
    "invites.error": "motivos de outros convites (endereço substituído)",
    "invites.message": "mensagens de outros convites (endereço substituído)",
    "invites.name": "nomes em outros convites (endereço substituído)",
    "invites.occasion_title": "ocasiões de outros convites (endereço substituído)",
    "invites.occasion_place": "locais de ocasião de outros convites (endereço substituído)",
    "invite_events.error": "motivos no histórico de outros convites (endereço substituído)",
    "idempotency_keys.body": "respostas guardadas de outros clientes da API (endereço substituído)",
}


def delete_invites(conn: Connection, invite_ids: Sequence[int]) -> Counter[str]:
    """Delete these invites and their dependents; how many rows of each table went."""
    removed: Counter[str] = Counter()
    if not invite_ids:
        return removed
    ids = list(invite_ids)
    for table in (*DEPENDENTS, invites):
        column = table.c.id if table is invites else table.c.invite_id
        removed[table.name] += conn.execute(delete(table).where(column.in_(ids))).rowcount
    return removed
