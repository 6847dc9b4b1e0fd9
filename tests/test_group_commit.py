"""Group commit: faster, and every guarantee of one-by-one kept."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, event, text
from sqlalchemy.exc import IntegrityError

from app.config import Settings
from app.invites.transitions import claim_with_link, create_invite
from app.storage.database import Database


def count_commits(db: Database) -> list[int]:
    """Every commit of ``db``'s writer."""
    commits: list[int] = []
    event.listen(db.writer.sync_engine, "commit", lambda _conn: commits.append(1))
    return commits


async def test_concurrent_invites_share_commits_and_each_is_durable_when_it_returns(
    db: Database, settings: Settings
) -> None:
    commits = count_commits(db)
    other = Database(settings.database_url)  # another pool: sees only what is committed

    async def create_and_look(n: int) -> int:
        change = await create_invite(
            db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id=f"c{n}"
        )
        # Another connection must already see the row, its event and its outbox entry.
        async with other.read() as conn:
            seen = await conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM invites WHERE id = :id)"
                    " + (SELECT count(*) FROM invite_events WHERE invite_id = :id)"
                    " + (SELECT count(*) FROM outbox WHERE invite_id = :id)"
                ),
                {"id": change.invite.id},
            )
            return int(seen.scalar_one())

    try:
        seen = await asyncio.gather(*(create_and_look(n) for n in range(30)))
    finally:
        await other.dispose()

    assert seen == [3] * 30
    assert 1 <= len(commits) < 30


async def test_a_failing_caller_fails_alone_not_its_batch(db: Database) -> None:
    def broken(conn: Connection, arguments: Sequence[None]) -> list[None]:
        conn.execute(text("INSERT INTO invites (id) VALUES (NULL)"))  # NOT NULL columns
        return [None] * len(arguments)

    async def good(n: int) -> Any:
        return await create_invite(
            db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id=f"c{n}"
        )

    results = await asyncio.gather(
        *(good(n) for n in range(5)), db.write_many(broken, None), *(good(n) for n in range(5, 10)),
        return_exceptions=True,
    )  # fmt: skip

    assert isinstance(results[5], IntegrityError)
    assert all(not isinstance(r, BaseException) for i, r in enumerate(results) if i != 5)


async def test_two_processes_writing_one_sqlite_file_at_once_both_commit_every_row(
    settings: Settings,
) -> None:
    """SQLite's own lock (``BEGIN IMMEDIATE`` and ``busy_timeout``) is the only coordination
    between processes on one file: two writers at full speed both finish, nothing refused."""
    web, worker = Database(settings.database_url), Database(settings.database_url)

    async def create_many(db: Database, who: str) -> list[Any]:
        return await asyncio.gather(
            *(
                create_invite(
                    db, sender_id=who, email=f"{who}{n}@exemplo.com", name=None, correlation_id="c"
                )
                for n in range(60)
            )
        )

    try:
        created = await asyncio.gather(create_many(web, "web"), create_many(worker, "worker"))
        async with web.read() as conn:
            rows = (await conn.execute(text("SELECT count(*) FROM invites"))).scalar_one()
    finally:
        await web.dispose()
        await worker.dispose()

    assert sum(len(batch) for batch in created) == rows == 120


async def test_a_claim_asked_twice_in_one_batch_is_won_once(db: Database) -> None:
    created = [
        await create_invite(
            db, sender_id="s", email=f"p{n}@exemplo.com", name=None, correlation_id=f"c{n}"
        )
        for n in range(3)
    ]
    ids = [change.invite.public_id for change in created]

    claims = await asyncio.gather(
        *(claim_with_link(db, public_id, 1, 60) for public_id in [*ids, ids[0], ids[0]])
    )

    assert [claim is not None for claim in claims] == [True, True, True, False, False]
    assert {claim.change.invite.public_id for claim in claims if claim} == set(ids)
