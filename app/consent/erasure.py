"""Erasure (LGPD): an address forgotten everywhere Convites kept it.

``python -m app esquecer EMAIL`` and the invitee's confirmed **Apagar meus dados**
(``app.web.erasure``) both call ``forget``. In one transaction it deletes:

- as invitee: every invite to the address (invitations, sign-in and confirmation mails), with
  their events, links, bounces, outbox rows and sign-in links;
- as account: the account, its sessions (the devices on ``/conta``), its API keys with their
  kept ``Idempotency-Key`` answers, its webhooks and their deliveries, and what only it could
  see: the invites and batches it sent (their rows name the account's address as the sender);
- any other bounce whose report mentions the address (one that named no invite, or an invite
  since corrected to another address);
- the address in the texts of other invites (a name, a reason quoting it, a Mensagem or an
  occasion naming it), in other API clients' kept answers and in other accounts' webhook
  deliveries (the frozen payload, and the receiver's reply, which may echo it), replaced by
  ``[endereço apagado]``. A text names the address only where it stands alone: erasing
  ana@exemplo.com leaves diana@exemplo.com and ana@exemplo.com.br (and their bounces) alone;
- its entry on the suppression list, except an opt-out, which stays as the address's hash
  alone (``forget_suppression``).

Then, on SQLite, the write-ahead log is checkpointed and truncated: with ``secure_delete`` on
every connection (``app.storage.database``) the deleted bytes are overwritten in the database
file, and the log that still held the old pages is emptied, so the address is in no file.

The address is made one form first (``address_to_forget``): stripped and checked as a new
invite's address is (the domain in IDNA, as every stored address has it), then lower-cased
(``same_address``), as accounts, duplicates and limits match it; every table, the suppression
list too, is searched for that one form, and something that is no address touches nothing.
What lives outside the database is not touched here: Redis rate-limit keys hold the address
for at most a day, and the mail server's and the logs' own retention apply.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

from sqlalchemy import Connection, LargeBinary, Text, cast, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.consent import suppression
from app.consent.removal import LABELS, delete_invites
from app.invites.validation import check_email, same_address, shown_email
from app.storage.database import Database
from app.storage.tables import (
    accounts,
    api_keys,
    batches,
    bounces,
    idempotency_keys,
    invite_events,
    invites,
    sessions,
    signin_tokens,
    webhook_deliveries,
    webhooks,
)

log = logging.getLogger(__name__)

ERASED = "[endereço apagado]"


class NotAnAddress(ValueError):
    """What was given to erase is no e-mail address; the message is pt-BR, for the operator."""


def address_to_forget(raw: str) -> str:
    """The one form an erasure searches every table for, or ``NotAnAddress`` before anything is
    touched. A stray space or a Unicode domain would otherwise match no invite (stored stripped,
    the domain in IDNA) while the suppression list's hash (which strips) still found its entry;
    and an empty address is contained in every text."""
    email, error = check_email(raw, "Informe o e-mail a apagar.")
    if email is None:
        raise NotAnAddress(error)
    return same_address(email)


async def forget_suppression(conn: AsyncConnection, email: str) -> Counter[str]:
    """The suppression list's part of an erasure (``app.consent.suppression.erase``, its one
    home): an opt-out stays as its hash alone, so the person is still never invited; any other
    entry (a bounce, a complaint) is deleted."""
    reason = await suppression.erase(conn, email)
    if reason is None:
        return Counter()
    if reason == suppression.Reason.OPTED_OUT:
        return Counter({"suppressions.email": 1})
    return Counter({"suppressions": 1})


def _invite_ids(conn: Connection, *where: Any) -> list[int]:
    return list(conn.execute(select(invites.c.id).where(*where)).scalars())


def _as_account(conn: Connection, address: str) -> Counter[str]:
    removed: Counter[str] = Counter()
    account = conn.execute(select(accounts).where(accounts.c.email == address)).first()
    if account is None:
        return removed
    removed += delete_invites(conn, _invite_ids(conn, invites.c.sender_id == account.public_id))
    keys = select(api_keys.c.id).where(api_keys.c.account_id == account.id).scalar_subquery()
    hooks = select(webhooks.c.id).where(webhooks.c.account_id == account.id).scalar_subquery()
    for table, where in (
        (batches, batches.c.sender_id == account.public_id),
        (idempotency_keys, idempotency_keys.c.api_key_id.in_(keys)),
        (api_keys, api_keys.c.account_id == account.id),
        (webhook_deliveries, webhook_deliveries.c.webhook_id.in_(hooks)),
        (webhooks, webhooks.c.account_id == account.id),
        (sessions, sessions.c.account_id == account.id),
        (accounts, accounts.c.id == account.id),
    ):
        removed[table.name] += conn.execute(delete(table).where(where)).rowcount
    return removed


def _searchable(conn: Connection, column: Any) -> Any:
    """``column`` lower-cased as text this database can search; a bounce's raw bytes too (an
    address is ASCII; other bytes stay, or are escaped on PostgreSQL, and match nothing)."""
    if not isinstance(column.type, LargeBinary):
        return func.lower(column)
    if conn.dialect.name == "sqlite":
        return func.lower(cast(column, Text))
    return func.lower(func.encode(column, "escape"))


def _spellings(address: str) -> list[str]:
    """The address as stored (IDNA) and, for an international domain, as pages and the API's
    sentences show it (``mensagem``): kept answers and webhook payloads may hold either."""
    return list(dict.fromkeys([address, shown_email(address).lower()]))


def _standing_alone(address: str) -> re.Pattern[str]:
    """The address (either spelling) as a whole address in a text, in any letter case: not the
    tail of another (erasing ana@exemplo.com leaves diana@exemplo.com alone) nor the head of a
    longer domain (nor ana@exemplo.com.br); a full stop after it still ends it. Erasure errs
    towards erasing: after an escape (JSON's ``\\n``, quoted-printable's ``=3C``, a URL's
    ``%3C``) it counts as standing alone, and so after a quote, ``=`` or ``/``."""
    before = r"(?:(?<![\w.+-])|(?<=\\[nrtf])|(?<==[0-9A-Fa-f]{2})|(?<=%[0-9A-Fa-f]{2}))"
    after = r"(?![\w-]|\.[\w-])"
    spelled = "|".join(re.escape(each) for each in _spellings(address))
    return re.compile(f"{before}(?:{spelled}){after}", re.IGNORECASE)


def _naming(conn: Connection, table: Any, columns: list[Any], address: str) -> list[Any]:
    """The rows of ``table`` in which one of ``columns`` names ``address`` standing alone, locked
    until the erasure commits (on PostgreSQL a worker could otherwise change one between this
    read and the write that follows): the database finds every text that contains it, and the
    pattern keeps those that name it."""
    alone = _standing_alone(address)
    found = conn.execute(
        select(table.c.id, *columns)
        .where(
            or_(
                *(
                    _searchable(conn, c).contains(spelling, autoescape=True)
                    for c in columns
                    for spelling in _spellings(address)
                )
            )
        )
        .with_for_update()
    ).all()
    return [row for row in found if any(alone.search(_text(value)) for value in row[1:])]


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value or ""


def _replace_in(conn: Connection, table: Any, column: Any, address: str) -> int:
    """``address`` replaced by ``ERASED`` in ``column`` wherever it stands alone; rows changed.
    The rest of each text stays as written."""
    alone = _standing_alone(address)
    length = getattr(column.type, "length", None)
    rows = _naming(conn, table, [column], address)
    for row in rows:
        # The placeholder can be longer than a short address, and PostgreSQL refuses a value
        # over the column's length: the text is cut rather than kept.
        replaced = alone.sub(ERASED, row[1])[:length]
        conn.execute(update(table).where(table.c.id == row.id).values({column.name: replaced}))
    return len(rows)


def _in_texts(conn: Connection, address: str) -> Counter[str]:
    removed: Counter[str] = Counter()
    reports = [bounces.c.raw, bounces.c.diagnostic, bounces.c.reason, bounces.c.problem]
    mentioned = [row.id for row in _naming(conn, bounces, reports, address)]
    if mentioned:
        gone = conn.execute(delete(bounces).where(bounces.c.id.in_(mentioned)))
        removed["bounces"] += gone.rowcount
    for table, column in (
        (invites, invites.c.name),  # an invitee's name typed as their address
        (invites, invites.c.error),
        (invites, invites.c.message),
        (invites, invites.c.occasion_title),
        (invites, invites.c.occasion_place),
        (invite_events, invite_events.c.error),
        (idempotency_keys, idempotency_keys.c.body),  # another API client's kept answer
        (webhook_deliveries, webhook_deliveries.c.body),  # another account's frozen payload
        (webhook_deliveries, webhook_deliveries.c.snippet),  # a receiver's reply echoing it
    ):
        removed[f"{table.name}.{column.name}"] += _replace_in(conn, table, column, address)
    # A delivery keeps the address its event was about, which a correction since may have
    # changed on the invite: that column holds one address, so only an equal one is replaced.
    before_correction = (
        update(webhook_deliveries)
        .where(func.lower(webhook_deliveries.c.email) == address)
        .values(email=ERASED)
    )
    removed["webhook_deliveries.email"] += conn.execute(before_correction).rowcount
    return removed


def forget_in(conn: Connection, address: str) -> Counter[str]:
    """Everything ``forget`` deletes in the tables of invites and accounts, in the caller's
    transaction; rows per table. ``address`` as ``address_to_forget`` made it."""
    removed = delete_invites(conn, _invite_ids(conn, func.lower(invites.c.email) == address))
    removed += _as_account(conn, address)
    leftover = delete(signin_tokens).where(func.lower(signin_tokens.c.email) == address)
    removed["signin_tokens"] += conn.execute(leftover).rowcount
    removed += _in_texts(conn, address)
    return +removed


async def checkpoint(db: Database) -> None:
    """SQLite: copy the write-ahead log into the database file and truncate it, so the pages
    that held erased rows are nowhere but overwritten. A reader in the middle of a snapshot
    (another process) can hold the log back; the next checkpoint then finishes the job."""
    if not db.is_sqlite:
        return
    async with db.writer.connect() as conn:
        # The driver's own connection: SQLAlchemy would open a transaction around the pragma,
        # and a checkpoint cannot empty the log from inside one.
        sqlite = (await conn.get_raw_connection()).driver_connection
        assert sqlite is not None
        cursor = await sqlite.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, _, _ = await cursor.fetchone()
        await cursor.close()
    if busy:
        log.warning("erasure: the write-ahead log is in use; it is emptied at a later checkpoint")


async def forget(db: Database, email: str) -> Counter[str]:
    """Erase ``email`` everywhere (see the module); rows removed or changed, per table.
    ``NotAnAddress`` when it is none, before anything is touched."""
    address = address_to_forget(email)
    async with db.write() as conn:
        removed = await conn.run_sync(forget_in, address)
        removed += await forget_suppression(conn, address)
    await checkpoint(db)
    # No address in the log line: it would outlive the erasure in the log's own retention.
    log.info("address erased", extra={f"removed_{k}": v for k, v in removed.items()})
    return removed


def report(email: str, removed: Counter[str]) -> str:
    """What ``python -m app esquecer`` prints (pt-BR, like the other operator commands)."""
    if not removed:
        return f"Nada encontrado para {email}: nenhum dado a apagar."
    lines = [f"Apagado tudo o que havia de {email}:"]
    labelled = sorted((LABELS.get(name, name), count) for name, count in removed.items())
    lines += [f"  {label}: {count}" for label, count in labelled]
    return "\n".join(lines)
