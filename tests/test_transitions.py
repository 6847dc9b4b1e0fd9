"""The state machine itself, driven directly on the real database (SQLite, or PostgreSQL with
TEST_DATABASE=postgresql): every transition, and each race it must lose."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text, update

from app.batches.store import Conflict, NewBatch, write_batch
from app.clock import utcnow
from app.config import Settings
from app.invites import transitions
from app.invites.queries import invite_history
from app.invites.records import Change, Duplicate, Invite, NewInvite
from app.invites.status import FailureClass, Status
from app.invites.transitions import core
from app.invites.transitions.core import transition_each
from app.sending.sweep import LEASE_EXPIRED_REASON
from app.storage.database import Database
from app.storage.tables import invite_events, invites, outbox
from tests.fixtures import BACKEND
from tests.helpers import invite_row
from tests.waiting import eventually

LEASE = 60.0


async def new_invite(db: Database, email: str = "ana@exemplo.com", sender: str = "s1") -> Invite:
    change = await transitions.create_invite(
        db, sender_id=sender, email=email, name=None, correlation_id="c-1"
    )
    return change.invite


async def claimed(db: Database, invite: Invite) -> Invite:
    claim = await transitions.claim_with_link(db, invite.public_id, invite.attempt, LEASE)
    assert claim is not None
    return claim.change.invite


async def outbox_rows(db: Database, invite: Invite) -> list[int]:
    async with db.read() as conn:
        rows = await conn.execute(
            select(outbox.c.attempt).where(outbox.c.invite_id == invite.id).order_by(outbox.c.id)
        )
        return [int(attempt) for attempt in rows.scalars()]


async def history(db: Database, invite: Invite) -> list[tuple[str, int]]:
    return [(event.status.value, event.attempt) for event in await invite_history(db, invite.id)]


async def expire_lease_of(db: Database, invite: Invite) -> None:
    async with db.write() as conn:
        await conn.execute(
            update(invites)
            .where(invites.c.id == invite.id)
            .values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )


async def test_a_new_invite_is_pendente_with_its_event_and_one_outbox_row(db: Database) -> None:
    change = await transitions.create_invite(
        db, sender_id="s1", email="ana@exemplo.com", name="Ana", correlation_id="c-1"
    )

    assert change.invite.status == Status.PENDENTE and change.invite.attempt == 1
    assert change.outbox_id is not None
    assert await history(db, change.invite) == [("pendente", 1)]
    assert await outbox_rows(db, change.invite) == [1]


async def test_claim_turns_pendente_into_enviando_with_a_lease(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))

    assert invite.status == Status.ENVIANDO
    assert invite.lease_expires_at is not None and invite.lease_expires_at > utcnow()


async def test_of_two_claims_of_one_attempt_exactly_one_wins(db: Database) -> None:
    invite = await new_invite(db)

    results = await asyncio.gather(
        *(transitions.claim_with_link(db, invite.public_id, 1, LEASE) for _ in range(2))
    )

    assert sorted(result is None for result in results) == [False, True]
    assert await history(db, invite) == [("pendente", 1), ("enviando", 1)]


async def test_two_claims_from_separate_processes_race_and_one_loses(
    db: Database, settings: Settings
) -> None:
    other = Database(settings.database_url)  # its own engine and group commit, like a 2nd worker
    try:
        invite = await new_invite(db)
        first, second = await asyncio.gather(
            transitions.claim_with_link(db, invite.public_id, 1, LEASE),
            transitions.claim_with_link(other, invite.public_id, 1, LEASE),
        )
    finally:
        await other.dispose()

    assert (first is None) != (second is None)


async def test_a_claim_for_an_old_attempt_loses(db: Database) -> None:
    invite = await new_invite(db)

    assert await transitions.claim_with_link(db, invite.public_id, 2, LEASE) is None
    assert (await invite_row(db, invite.public_id)).status == Status.PENDENTE


async def test_claims_in_one_statement_match_their_own_attempt_not_another_keys(
    db: Database,
) -> None:
    # A at attempt 2, B at attempt 1: claims for (A, 1) and (B, 2) name both ids and both
    # attempts, and must still both lose; (A, 2) and (B, 1) in one statement both win.
    a = await claimed(db, await new_invite(db, "a@exemplo.com"))
    retried = await transitions.schedule_retry(db, a, "421 try later", delay=0)
    assert retried is not None
    b = await new_invite(db, "b@exemplo.com")
    keys = (invites.c.public_id, invites.c.attempt)
    values = {"status": Status.ENVIANDO.value}

    async with db.write() as conn:
        stale = await conn.run_sync(
            transition_each, [(a.public_id, 1), (b.public_id, 2)], keys, Status.PENDENTE, values
        )
        untouched = (
            await conn.execute(select(invites.c.status).where(invites.c.id.in_([a.id, b.id])))
        ).scalars()
        assert set(untouched) == {Status.PENDENTE.value}
        fresh = await conn.run_sync(
            transition_each, [(a.public_id, 2), (b.public_id, 1)], keys, Status.PENDENTE, values
        )

    assert stale == [None, None]
    assert [(c.invite.public_id, c.invite.attempt) for c in fresh if c] == [
        (a.public_id, 2),
        (b.public_id, 1),
    ]


async def test_a_claim_after_the_lease_expired_loses_and_the_row_stays_incerto(
    db: Database,
) -> None:
    invite = await claimed(db, await new_invite(db))
    await expire_lease_of(db, invite)
    assert len(await transitions.expire_leases(db, LEASE_EXPIRED_REASON)) == 1

    again = await transitions.claim_with_link(db, invite.public_id, invite.attempt, LEASE)

    assert again is None
    assert (await invite_row(db, invite.public_id)).status == Status.INCERTO


async def test_mark_sent_turns_enviando_into_enviado(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))

    change = await transitions.mark_sent(db, invite)

    assert change is not None and change.invite.status == Status.ENVIADO
    assert change.invite.sent_at is not None and change.invite.lease_expires_at is None


async def test_a_verdict_after_the_lease_expired_loses_to_incerto(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))
    await expire_lease_of(db, invite)
    expired = await transitions.expire_leases(db, LEASE_EXPIRED_REASON)

    assert [change.invite.status for change in expired] == [Status.INCERTO]
    assert await transitions.mark_sent(db, invite) is None
    assert await transitions.mark_failed(db, invite, "550") is None
    assert await transitions.schedule_retry(db, invite, "421", 1) is None
    assert (await invite_row(db, invite.public_id)).status == Status.INCERTO


async def test_expire_leases_leaves_a_live_lease_alone(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))

    assert await transitions.expire_leases(db, LEASE_EXPIRED_REASON) == []
    assert (await invite_row(db, invite.public_id)).status == Status.ENVIANDO


async def test_a_second_verdict_for_the_same_claim_loses(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))

    assert await transitions.mark_sent(db, invite) is not None
    assert await transitions.mark_failed(db, invite, "550 no such user") is None
    assert await transitions.mark_sent(db, invite) is None


async def test_schedule_retry_makes_the_next_attempt_pendente_due_later_with_its_job(
    db: Database,
) -> None:
    invite = await claimed(db, await new_invite(db))

    change = await transitions.schedule_retry(db, invite, "421 try later", delay=30)

    assert change is not None and change.outbox_id is not None
    retried = change.invite
    assert (retried.status, retried.attempt, retried.error) == (Status.PENDENTE, 2, "421 try later")
    assert retried.next_attempt_at is not None
    assert retried.next_attempt_at > utcnow() + timedelta(seconds=25)
    assert await outbox_rows(db, invite) == [1, 2]


async def test_each_event_and_job_row_is_its_invite_as_the_transition_left_it(
    db: Database,
) -> None:
    invite = await claimed(db, await new_invite(db))
    retry = await transitions.schedule_retry(db, invite, "421 try later", delay=30)
    assert retry is not None and retry.outbox_id is not None
    again = await claimed(db, retry.invite)
    failed = await transitions.mark_failed(db, again, "550 no such user")
    assert failed is not None

    async with db.read() as conn:
        events = (
            await conn.execute(select(invite_events).where(invite_events.c.invite_id == invite.id))
        ).all()
        job = (await conn.execute(select(outbox).where(outbox.c.id == retry.outbox_id))).one()
    by_id = {event.id: event for event in events}
    for change in (retry, failed):
        event = by_id[change.event_id]
        state = change.invite
        assert (event.status, event.attempt, event.error, event.sender_id) == (
            state.status.value,
            state.attempt,
            state.error,
            state.sender_id,
        )
        assert event.created_at == state.updated_at
        # Only an event that schedules an attempt says when it is due.
        due = state.next_attempt_at if state.status == Status.PENDENTE else None
        assert event.next_attempt_at == due
    assert by_id[retry.event_id].next_attempt_at is not None
    assert all(e.next_attempt_at is None for e in events if e.status != Status.PENDENTE.value)
    assert by_id[failed.event_id].failure_class == FailureClass.PERMANENT.value
    assert by_id[retry.event_id].failure_class is None
    assert (job.invite_id, job.attempt) == (invite.id, 2)
    assert job.available_at == retry.invite.next_attempt_at


async def test_a_transition_of_more_rows_than_one_statement_binds_records_each_of_them(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core, "IDS_PER_STATEMENT", 2)  # five invites: three statements
    emails = [f"p{n}@exemplo.com" for n in range(5)]
    created = [await new_invite(db, email) for email in emails]
    for invite in created:
        await claimed(db, invite)
        await expire_lease_of(db, invite)

    changes = await transitions.expire_leases(db, LEASE_EXPIRED_REASON)

    assert sorted(change.invite.id for change in changes) == sorted(i.id for i in created)
    async with db.read() as conn:
        events = dict(
            (await conn.execute(select(invite_events.c.id, invite_events.c.invite_id))).all()
        )
    assert [events[change.event_id] for change in changes] == [c.invite.id for c in changes]
    assert all(change.invite.status == Status.INCERTO for change in changes)


async def test_mark_failed_records_why_for_the_metrics(db: Database) -> None:
    first = await claimed(db, await new_invite(db, "a@exemplo.com"))
    second = await claimed(db, await new_invite(db, "b@exemplo.com"))

    await transitions.mark_failed(db, first, "550 no such user")
    await transitions.mark_failed(db, second, "Depois de 4 tentativas.", exhausted=True)

    async with db.read() as conn:
        classes = (
            await conn.execute(
                select(invite_events.c.failure_class)
                .where(invite_events.c.status == Status.FALHOU.value)
                .order_by(invite_events.c.id)
            )
        ).scalars()
        assert list(classes) == [FailureClass.PERMANENT, FailureClass.TRANSIENT_EXHAUSTED]


async def test_release_claim_puts_the_same_attempt_back_with_a_new_job(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))

    change = await transitions.release_claim(db, invite, "stopping")

    assert change is not None and change.outbox_id is not None
    assert (change.invite.status, change.invite.attempt) == (Status.PENDENTE, 1)
    assert await outbox_rows(db, invite) == [1, 1]


async def test_mark_uncertain_is_never_followed_by_a_claim_of_its_own(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))

    change = await transitions.mark_uncertain(db, invite, "broke during DATA")

    assert change is not None and change.invite.status == Status.INCERTO
    assert change.outbox_id is None and await outbox_rows(db, invite) == [1]


@pytest.mark.parametrize("end", [Status.FALHOU, Status.INCERTO])
async def test_resend_from_falhou_or_incerto_starts_a_fresh_round(
    db: Database, end: Status
) -> None:
    invite = await claimed(db, await new_invite(db))
    if end == Status.FALHOU:
        await transitions.mark_failed(db, invite, "550")
    else:
        await transitions.mark_uncertain(db, invite, "broke")

    change = await transitions.request_resend(db, "s1", invite.public_id)

    assert change is not None and change.outbox_id is not None
    again = change.invite
    assert (again.status, again.attempt, again.round_first_attempt) == (Status.PENDENTE, 2, 2)
    assert again.error is None


async def test_of_two_resends_of_one_failure_exactly_one_wins(db: Database) -> None:
    invite = await claimed(db, await new_invite(db))
    await transitions.mark_failed(db, invite, "550")

    results = await asyncio.gather(
        *(transitions.request_resend(db, "s1", invite.public_id) for _ in range(2))
    )

    assert sorted(result is None for result in results) == [False, True]
    assert await outbox_rows(db, invite) == [1, 2]


@pytest.mark.parametrize("state", ["pendente", "enviando", "enviado"])
async def test_resend_loses_unless_the_invite_failed_or_is_uncertain(
    db: Database, state: str
) -> None:
    invite = await new_invite(db)
    if state != "pendente":
        invite = await claimed(db, invite)
    if state == "enviado":
        await transitions.mark_sent(db, invite)

    assert await transitions.request_resend(db, "s1", invite.public_id) is None
    assert (await invite_row(db, invite.public_id)).status == Status(state)


async def test_resend_of_someone_elses_invite_loses(db: Database) -> None:
    invite = await claimed(db, await new_invite(db, sender="s1"))
    await transitions.mark_failed(db, invite, "550")

    assert await transitions.request_resend(db, "s2", invite.public_id) is None


async def cancelled(db: Database, email: str = "ana@exemplo.com", sender: str = "s1") -> Invite:
    invite = await new_invite(db, email, sender)
    assert await transitions.cancel(db, sender, invite.public_id)
    return invite


async def test_resend_loses_while_its_sender_has_another_invite_on_its_way_there(
    db: Database,
) -> None:
    first = await cancelled(db)
    second = await new_invite(db)  # invited again after cancelling: the creation let it

    result = await transitions.request_resend(db, "s1", first.public_id)

    assert isinstance(result, Duplicate) and result.invite.id == second.id
    row = await invite_row(db, first.public_id)
    assert (row.status, row.attempt) == (Status.CANCELADO, 1)
    assert await outbox_rows(db, first) == [1]
    assert await history(db, first) == [("pendente", 1), ("cancelado", 1)]


async def test_one_mailbox_however_its_local_part_is_typed_is_one_duplicate(
    db: Database,
) -> None:
    """Mail providers treat ``Ana@`` and ``ana@`` as one mailbox, as our limits do: a second
    invitation to it, new or sent again, is a duplicate."""
    stopped = await cancelled(db, "ana@exemplo.com")
    first = await new_invite(db, "Ana@exemplo.com")

    again = await transitions.create_invite(
        db, sender_id="s1", email="ANA@exemplo.com", name=None, correlation_id="c-2"
    )
    resent = await transitions.request_resend(db, "s1", stopped.public_id)

    assert isinstance(again, Duplicate) and again.invite.id == first.id
    assert isinstance(resent, Duplicate) and resent.invite.id == first.id
    # The address is kept as typed: it is the mail's To.
    assert (await invite_row(db, first.public_id)).email == "Ana@exemplo.com"
    # Two spellings in one group (a double click, say) are one invitation too.
    twice = [
        NewInvite("s2", email, None, "c-3") for email in ("caio@exemplo.com", "Caio@exemplo.com")
    ]
    async with db.write() as conn:
        made = await conn.run_sync(transitions.create_invites, twice)
    assert [type(result).__name__ for result in made] == ["Change", "Duplicate"]


async def test_another_senders_invite_to_the_address_does_not_hold_a_resend_back(
    db: Database,
) -> None:
    first = await cancelled(db, sender="s1")
    await new_invite(db, sender="s2")

    result = await transitions.request_resend(db, "s1", first.public_id)

    assert isinstance(result, Change) and result.invite.status == Status.PENDENTE


async def test_of_two_resends_of_two_stopped_invites_to_one_address_exactly_one_wins(
    db: Database,
) -> None:
    stopped = [await cancelled(db) for _ in range(2)]

    results = await asyncio.gather(
        *(transitions.request_resend(db, "s1", invite.public_id) for invite in stopped)
    )

    assert sorted(type(result).__name__ for result in results) == ["Change", "Duplicate"]
    rows = [await invite_row(db, invite.public_id) for invite in stopped]
    assert sorted(row.status.value for row in rows) == ["cancelado", "pendente"]


async def waits_for_a_sender(db: Database, work: asyncio.Task[object]) -> bool:
    """Until ``work`` ended or waits for a sender's lock; whether it waits."""

    async def settled() -> bool:
        async with db.read() as conn:
            waiting = await conn.execute(
                text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            )
            return work.done() or bool(waiting.scalar_one())

    await eventually(settled, what="the second write waiting for the sender, or done")
    return not work.done()


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite's one writer runs them in turn")
@pytest.mark.parametrize("second", ["new invite", "resend"])
async def test_a_write_to_an_address_waits_for_a_new_invite_to_it_in_flight_then_loses(
    db: Database, second: str
) -> None:
    """Under READ COMMITTED a check sees only what committed before it began: a second new
    invite, or a resend, to an address whose new invite is still being written waits for it
    (the sender's lock), then finds it and loses."""
    stopped = await cancelled(db)
    first = await db.writer.connect()
    writing = await first.begin()
    request = NewInvite("s1", "ana@exemplo.com", None, "c-1")
    [made] = await first.run_sync(transitions.create_invites, [request])
    assert isinstance(made, Change)
    if second == "new invite":
        other = asyncio.create_task(
            transitions.create_invite(
                db, sender_id="s1", email="ana@exemplo.com", name=None, correlation_id="c-2"
            )
        )
    else:
        other = asyncio.create_task(transitions.request_resend(db, "s1", stopped.public_id))

    assert await waits_for_a_sender(db, other)
    await writing.commit()
    await first.close()

    assert isinstance(await other, Duplicate)
    assert (await invite_row(db, stopped.public_id)).status == Status.CANCELADO


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite's one writer runs them in turn")
async def test_a_batch_waits_for_a_new_invite_in_flight_to_one_of_its_addresses_then_conflicts(
    db: Database,
) -> None:
    """A batch holds its sender before its own check, so an invite being written meanwhile is
    a plain ``Conflict`` (409, the review again), not a duplicate found halfway through."""
    first = await db.writer.connect()
    writing = await first.begin()
    request = NewInvite("s1", "ana@exemplo.com", None, "c-1")
    [made] = await first.run_sync(transitions.create_invites, [request])
    assert isinstance(made, Change)
    emails = ("bia@exemplo.com", "Ana@exemplo.com")
    asked = NewBatch("s1", tuple(NewInvite("s1", email, None, "c-2") for email in emails))
    batch = asyncio.create_task(write_batch(db, asked))

    assert await waits_for_a_sender(db, batch)
    await writing.commit()
    await first.close()

    written = await batch
    assert isinstance(written, Conflict) and [i.email for i in written.existing] == [
        "ana@exemplo.com"
    ]


async def failed_with(db: Database, email: str, reason: str) -> Invite:
    invite = await claimed(db, await new_invite(db, email))
    change = await transitions.mark_failed(db, invite, reason)
    assert change is not None
    return change.invite


async def test_bulk_resend_takes_only_the_chosen_reason_each_with_its_own_job(
    db: Database,
) -> None:
    blocked = [await failed_with(db, f"p{n}@exemplo.com", "550 Blocked") for n in range(3)]
    other = await failed_with(db, "q@exemplo.com", "554 Spam")

    done = await transitions.request_resend_many(db, Status.FALHOU, reason="550 Blocked")

    changes = done.changes
    assert [change.invite.id for change in changes] == [invite.id for invite in blocked]
    assert all(isinstance(change, Change) and change.outbox_id for change in changes)
    assert len({change.event_id for change in changes}) == 3
    assert (await invite_row(db, other.public_id)).status == Status.FALHOU


async def test_bulk_resend_matches_a_reason_fragment_literally_and_respects_its_limit(
    db: Database,
) -> None:
    await failed_with(db, "a@exemplo.com", "100% cheia")
    await failed_with(db, "b@exemplo.com", "100 cheia")
    await failed_with(db, "c@exemplo.com", "100% cheia de novo")

    done = await transitions.request_resend_many(db, Status.FALHOU, reason_contains="100%", limit=1)

    assert [change.invite.email for change in done.changes] == ["a@exemplo.com"]


async def test_of_two_bulk_resends_each_row_is_sent_again_once(db: Database) -> None:
    for n in range(4):
        await failed_with(db, f"p{n}@exemplo.com", "550 Blocked")

    first, second = await asyncio.gather(
        transitions.request_resend_many(db, Status.FALHOU, reason="550 Blocked"),
        transitions.request_resend_many(db, Status.FALHOU, reason="550 Blocked"),
    )

    assert len(first.changes) + len(second.changes) == 4
    async with db.read() as conn:
        jobs = (await conn.execute(select(func.count()).select_from(outbox))).scalar()
    assert jobs == 8  # four first attempts, four resends


async def test_bulk_resend_leaves_out_an_address_its_sender_has_another_invite_on_its_way_to(
    db: Database,
) -> None:
    # One mailbox however typed (``same_address``), as a new invite's check.
    stopped = await failed_with(db, "ana@exemplo.com", "550 Blocked")
    on_its_way = await new_invite(db, "Ana@exemplo.com")
    older, newer = [
        await failed_with(db, email, "550 Blocked")
        for email in ("bia@exemplo.com", "Bia@exemplo.com")
    ]
    elsewhere = await failed_with(db, "caio@exemplo.com", "550 Blocked")

    done = await transitions.request_resend_many(db, Status.FALHOU, reason="550 Blocked")

    # bia's two stopped invites: only the older goes, or she would get two in one retry.
    assert [change.invite.id for change in done.changes] == [older.id, elsewhere.id]
    assert done.skipped == 2
    for left in (stopped, newer):
        row = await invite_row(db, left.public_id)
        assert (row.status, row.attempt) == (Status.FALHOU, 1)
        assert await outbox_rows(db, left) == [1]
    assert (await invite_row(db, on_its_way.public_id)).status == Status.PENDENTE


async def test_bulk_resend_refuses_a_status_that_cannot_be_sent_again(db: Database) -> None:
    with pytest.raises(ValueError, match="falhou"):
        await transitions.request_resend_many(db, Status.ENVIADO)
