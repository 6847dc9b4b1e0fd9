"""The hot and the periodic statements read what they ask for, not a whole table or index.

SQLite keeps no statistics here, and its planner then prefers ``status = ?`` (an equality on
``ix_invites_status_next_attempt``) to a key ``IN`` list: every accept batch read every invite
on its way, every claim batch every ``pendente`` row of the backlog (O(backlog) per batch). The
live hub's check read all of ``ix_invite_events_sender_id`` every second for the order of its
GROUP BY, the sweep grouped the whole outbox every two seconds, and each sign-in read every
link ever issued to retire the address's other ones. These tests run those paths
on a real SQLite file and ask SQLite for the plan of each statement they sent
(``EXPLAIN QUERY PLAN``, with the statement's own parameters). ``app.storage.tables.unindexed``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, insert

from app.accounts import sessions, signin
from app.clock import utcnow
from app.invites import queries
from app.invites.records import SIGNIN_MAIL
from app.invites.transitions import claim_with_link, create_invite, mark_sent
from app.sending import sweep
from app.storage.database import Database
from app.storage.tables import accounts

INVITES = 30
Sent = list[tuple[str, Any]]


@contextmanager
def statements_of(db: Database) -> Iterator[Sent]:
    """Every statement that reads rows (SELECT, UPDATE, DELETE) ``db`` sends while inside, with
    its parameters (the first row's, for many)."""
    if not db.is_sqlite:
        pytest.skip("PostgreSQL's planner has statistics; these plans are SQLite's")
    sent: Sent = []

    def capture(
        _conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, many: bool
    ) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
            sent.append((statement, params[0] if many else params))

    engines = [db.reader.sync_engine, db.writer.sync_engine]
    for engine in engines:
        event.listen(engine, "before_cursor_execute", capture)
    try:
        yield sent
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", capture)


def plans(db: Database, sent: Sent) -> dict[str, list[str]]:
    assert db.url.database
    explain = sqlite3.connect(db.url.database)
    try:
        return {
            statement: [
                row[3] for row in explain.execute(f"EXPLAIN QUERY PLAN {statement}", params)
            ]
            for statement, params in sent
        }
    finally:
        explain.close()


def whole_reads(statement: str, plan: list[str]) -> list[str]:
    """Steps that read a whole table or index; for a statement with a key ``IN`` list, also a
    search by status (which reads every row of that status)."""
    tables = ("invites", "invite_events", "outbox", "invite_links", "signin_tokens")
    return [
        step
        for step in plan
        if step.split(" USING")[0] in {f"SCAN {t}" for t in tables}
        or (" IN (" in statement and "ix_invites_status_next_attempt" in step)
    ]


def assert_no_whole_reads(db: Database, sent: Sent) -> dict[str, list[str]]:
    seen = plans(db, sent)
    wrong = {s[:100]: whole_reads(s, plan) for s, plan in seen.items() if whole_reads(s, plan)}
    assert not wrong, wrong
    return seen


async def test_accepts_claims_and_verdicts_search_invites_by_key(db: Database) -> None:
    with statements_of(db) as sent:
        created = await asyncio.gather(
            *(
                create_invite(
                    db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id=f"c{n}"
                )
                for n in range(INVITES)
            )
        )
        claimed = await asyncio.gather(
            *(claim_with_link(db, c.invite.public_id, 1, 60) for c in created)  # type: ignore[union-attr]
        )
        await asyncio.gather(*(mark_sent(db, c.change.invite) for c in claimed if c is not None))
    seen = assert_no_whole_reads(db, sent)
    keyed = [s for s in seen if " IN (" in s and "invites" in s.split("WHERE")[0]]
    assert any(s.startswith("SELECT") for s in keyed), "the accept's duplicate check ran"
    assert sum(s.startswith("UPDATE invites") for s in keyed) >= 2, "claim and verdict ran"


async def test_live_check_and_sweep_read_ranges_and_keys(db: Database) -> None:
    for n in range(3):
        await create_invite(
            db, sender_id=f"s{n}", email="p@exemplo.com", name=None, correlation_id=f"c{n}"
        )
    with statements_of(db) as sent:
        newest = await queries.senders_with_events_after(db, 0)
        overdue = await sweep.overdue_pending(db, utcnow() + timedelta(days=1))
    assert set(newest) == {"s0", "s1", "s2"}
    assert overdue == []  # each one's newest outbox entry is unpublished: the relay's
    assert len(sent) == 2
    assert_no_whole_reads(db, sent)


async def test_signing_in_retires_the_addresss_other_links_by_address(db: Database) -> None:
    mail = await create_invite(
        db, sender_id="s", email="p@exemplo.com", name=None, correlation_id="c", kind=SIGNIN_MAIL
    )
    token = await signin.issue(db, mail.invite, 600)  # type: ignore[union-attr]
    await signin.issue(db, mail.invite, 600)  # type: ignore[union-attr]
    with statements_of(db) as sent:
        assert await signin.redeem(db, token) == "p@exemplo.com"
    assert any(s.startswith("UPDATE signin_tokens") for s, _ in sent)
    assert_no_whole_reads(db, sent)


async def test_the_sessions_of_an_account_are_read_by_account(db: Database) -> None:
    """``/conta``'s list, and "Sair de todos os aparelhos", by ``ix_sessions_account_id``."""
    async with db.write() as conn:
        created = await conn.execute(
            insert(accounts).values(
                public_id="a", email="a@exemplo.com", created_at=utcnow(), updated_at=utcnow()
            )
        )
        account_id = created.inserted_primary_key[0]
    token = await sessions.start(db, account_id, 600, "curl/8", "203.0.113.1")
    with statements_of(db) as sent:
        assert len(await sessions.of_account(db, account_id, token)) == 1
        assert await sessions.end_all(db, account_id) == 1
    assert len(sent) == 2
    assert_no_whole_reads(db, sent)
