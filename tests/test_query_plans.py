"""The hot statements find their rows by key, not by status.

SQLite keeps no statistics here, and its planner then prefers ``status = ?`` (an equality on
``ix_invites_status_next_attempt``) to a key ``IN`` list: every accept batch read every invite
on its way, every claim batch every ``pendente`` row of the backlog (O(backlog) per batch). These
tests run the hot paths on a real SQLite file and ask SQLite for the plan of each statement they
sent (``EXPLAIN QUERY PLAN``, with the statement's own parameters).
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest
from sqlalchemy import event

from app.db import Database
from app.transitions import claim_with_link, create_invite, mark_sent

INVITES = 30


def _plans(db: Database, statements: list[tuple[str, Any]]) -> dict[str, list[str]]:
    assert db.url.database
    explain = sqlite3.connect(db.url.database)
    try:
        return {
            statement: [
                row[3] for row in explain.execute(f"EXPLAIN QUERY PLAN {statement}", params)
            ]
            for statement, params in statements
        }
    finally:
        explain.close()


def _by_status_or_scan(plan: list[str]) -> list[str]:
    return [
        step
        for step in plan
        if "ix_invites_status_next_attempt" in step or step.startswith("SCAN invites")
    ]


async def test_accepts_claims_and_verdicts_search_invites_by_key(db: Database) -> None:
    if not db.is_sqlite or db.write_lane is None:
        pytest.skip("PostgreSQL's planner has statistics; this is SQLite's")
    sent: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "invites" in statement.split("WHERE")[0] and " IN " in statement:
            sent.append((statement, params))

    event.listen(db.write_lane.engine, "before_cursor_execute", capture)
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

    plans = _plans(db, sent)
    assert any(s.startswith("SELECT") for s in plans), "the accept's duplicate check ran"
    assert sum(s.startswith("UPDATE invites") for s in plans) >= 2, "claim and verdict ran"
    wrong = {
        s[:90]: _by_status_or_scan(plan) for s, plan in plans.items() if _by_status_or_scan(plan)
    }
    assert not wrong, wrong
