"""The bounce receiver over real SMTP, fed real-world samples (tests/data/bounces/): what each
bounce does to its invite, and that every bounce is kept, once, whatever it looks like."""

from __future__ import annotations

import logging
from pathlib import Path

import aiosmtplib
import pytest
from sqlalchemy import func, select, text

from app.bounces.history import bounces_of
from app.config import Settings
from app.invites import transitions
from app.invites.queries import invite_history
from app.invites.records import Invite
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import bounces
from tests.helpers import bounce_sample, invite_row, send_bounce

PERMANENT = [
    # sample, the reason the person reads
    (
        "rfc3464_simple.eml",
        "desistiu de entregar a mensagem (4.0.0). Informado por cs.exemplo.com.",
    ),
    ("rfc3464_multi_recipient.eml", "a caixa não existe (5.1.1). Informado por cs.exemplo.com."),
    ("postfix.eml", "a caixa não existe (5.1.1). Informado por mail.exemplo.com."),
    ("postfix_legacy.eml", "a caixa não existe (5.1.1). Informado por relay.exemplo.com."),
    ("exim.eml", "a caixa não existe (5.1.1). Informado por relay.exemplo.com."),
    ("qmail.eml", "devolveu a mensagem. Informado por gate.exemplo.com."),
    ("gmail.eml", "a caixa não existe (5.1.1). Informado por googlemail.com."),
    ("microsoft.eml", "o endereço não existe (5.1.10). Informado por DM6PR00MB0001"),
    ("microsoft_legacy.eml", "devolveu a mensagem. Informado por exemplo.com."),
]


async def sent_invite(db: Database, email: str = "ana@exemplo.com") -> Invite:
    """An invite the mail server accepted (250): ``enviado``."""
    created = await transitions.create_invite(
        db, sender_id="s1", email=email, name=None, correlation_id="c-1"
    )
    claim = await transitions.claim_with_link(db, created.invite.public_id, 1, 60)
    assert claim is not None
    sent = await transitions.mark_sent(db, claim.change.invite)
    assert sent is not None
    return sent.invite


def verp(settings: Settings, invite: Invite) -> str:
    local, _, domain = settings.return_path.rpartition("@")
    return f"{local}+{invite.public_id}@{domain}"


async def bounce(
    settings: Settings, port: int, invite: Invite, sample: str, attempt: int | None = None
) -> None:
    raw = bounce_sample(sample, invite, settings.return_path, attempt)
    await send_bounce(port, raw, verp(settings, invite))


async def kept(db: Database) -> list[tuple[str, str]]:
    async with db.read() as conn:
        rows = await conn.execute(select(bounces.c.kind, bounces.c.outcome).order_by(bounces.c.id))
        return [(kind, outcome) for kind, outcome in rows.all()]


@pytest.mark.parametrize(("sample", "reason"), PERMANENT)
async def test_a_permanent_failure_turns_enviado_into_devolvido_with_its_reason(
    settings: Settings, db: Database, bounce_port: int, sample: str, reason: str
) -> None:
    invite = await sent_invite(db)

    await bounce(settings, bounce_port, invite, sample)

    found = await invite_row(db, invite.public_id)
    assert found.status == Status.DEVOLVIDO
    assert found.error is not None and found.error.startswith("O servidor do destinatário")
    assert reason in found.error
    assert [e.status for e in await invite_history(db, invite.id)][-1] == Status.DEVOLVIDO


async def test_an_incerto_invite_that_bounces_becomes_devolvido(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    created = await transitions.create_invite(
        db, sender_id="s1", email="ana@exemplo.com", name=None, correlation_id="c-1"
    )
    claim = await transitions.claim_with_link(db, created.invite.public_id, 1, 60)
    assert claim is not None
    uncertain = await transitions.mark_uncertain(db, claim.change.invite, "cut off")
    assert uncertain is not None

    await bounce(settings, bounce_port, uncertain.invite, "postfix.eml")

    assert (await invite_row(db, created.invite.public_id)).status == Status.DEVOLVIDO


async def test_a_delay_is_a_history_line_and_no_status_change(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)

    await bounce(settings, bounce_port, invite, "rfc3464_delayed.eml")

    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    [kept_bounce] = await bounces_of(db, invite.id)
    assert (kept_bounce.kind, kept_bounce.outcome) == ("delayed", "history")
    assert kept_bounce.reason == (
        "O servidor do destinatário informou que a caixa está cheia (4.2.2). "
        "Informado por relay.exemplo.com."
    )
    assert kept_bounce.attempt == 1  # from Original-Envelope-Id


async def test_a_bounce_for_an_invite_in_another_state_is_kept_and_changes_nothing(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    created = await transitions.create_invite(
        db, sender_id="s1", email="ana@exemplo.com", name=None, correlation_id="c-1"
    )
    claim = await transitions.claim_with_link(db, created.invite.public_id, 1, 60)
    assert claim is not None
    failed = await transitions.mark_failed(db, claim.change.invite, "550 no")
    assert failed is not None

    await bounce(settings, bounce_port, failed.invite, "postfix.eml")

    assert (await invite_row(db, created.invite.public_id)).status == Status.FALHOU
    assert await kept(db) == [("permanent", "history")]


async def test_a_late_bounce_of_an_earlier_attempt_does_not_mark_the_new_send(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)
    await bounce(settings, bounce_port, invite, "gmail.eml")
    corrected = await transitions.correct_and_resend(
        db, "s1", invite.public_id, "ana.certa@exemplo.com"
    )
    assert corrected is not None
    claim = await transitions.claim_with_link(db, invite.public_id, 2, 60)
    assert claim is not None
    await transitions.mark_sent(db, claim.change.invite)

    # The Postfix copy of the first attempt's failure arrives after the corrected send.
    await bounce(settings, bounce_port, invite, "postfix.eml", attempt=1)

    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    assert await kept(db) == [("permanent", "devolvido"), ("permanent", "stale")]


async def test_the_same_bounce_twice_is_one_event(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)

    await bounce(settings, bounce_port, invite, "rfc3464_simple.eml")
    await bounce(settings, bounce_port, invite, "rfc3464_simple.eml")

    assert len(await bounces_of(db, invite.id)) == 1
    statuses = [e.status for e in await invite_history(db, invite.id)]
    assert statuses.count(Status.DEVOLVIDO) == 1


@pytest.mark.parametrize("sample", ["malformed.eml", "not_a_bounce.eml"])
async def test_a_bounce_it_cannot_read_is_kept_counted_and_logged_with_its_id(
    settings: Settings,
    db: Database,
    bounce_port: int,
    sample: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    invite = await sent_invite(db)
    raw = bounce_sample(sample, invite, settings.return_path)

    with caplog.at_level(logging.WARNING, logger="app.bounces.store"):
        await send_bounce(bounce_port, raw, verp(settings, invite))

    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    [kept_bounce] = await bounces_of(db, invite.id)
    assert kept_bounce.kind == "unreadable" and kept_bounce.problem
    async with db.read() as conn:
        stored = (await conn.execute(select(bounces.c.raw))).scalar_one()
    assert bytes(stored).replace(b"\r\n", b"\n") == raw.replace(b"\r\n", b"\n")
    [record] = [r for r in caplog.records if r.getMessage() == "unreadable bounce kept"]
    assert record.bounce_id == kept_bounce.id  # type: ignore[attr-defined]


async def test_a_bounce_for_an_unknown_id_is_kept_as_unknown(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)
    nobody = Invite(**{**vars(invite), "public_id": "AAAAAAAAAAAAAAAA"})

    await bounce(settings, bounce_port, nobody, "postfix.eml")

    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    assert await kept(db) == [("permanent", "unknown_invite")]


NOT_VERP = [
    "postmaster@convites.exemplo",
    "devolucoes@convites.exemplo",
    "devolucoes+curto@convites.exemplo",
    "devolucoes+AAAAAAAAAAAAAAAA@outro.exemplo",
]


@pytest.mark.parametrize("recipient", NOT_VERP)
async def test_mail_for_anything_but_a_verp_address_gets_550(
    settings: Settings, db: Database, bounce_port: int, recipient: str
) -> None:
    invite = await sent_invite(db)
    raw = bounce_sample("postfix.eml", invite, settings.return_path)

    with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
        await send_bounce(bounce_port, raw, recipient)

    assert refused.value.recipients[0].code == 550
    assert await kept(db) == []


async def test_a_bounce_it_cannot_record_now_is_spooled_and_refused_for_a_retry(
    settings: Settings, db: Database, bounce_port: int, tmp_path: Path
) -> None:
    invite = await sent_invite(db)
    raw = bounce_sample("postfix.eml", invite, settings.return_path)
    async with db.write() as conn:  # the table is gone: every insert fails
        await conn.execute(text("ALTER TABLE bounces RENAME TO bounces_away"))

    with pytest.raises(aiosmtplib.SMTPDataError) as refused:
        await send_bounce(bounce_port, raw, verp(settings, invite))

    assert refused.value.code == 451
    [spooled] = (tmp_path / "bounces-spool").glob("*.eml")
    assert b"Undelivered Mail Returned to Sender" in spooled.read_bytes()
    async with db.write() as conn:
        await conn.execute(text("ALTER TABLE bounces_away RENAME TO bounces"))
    await send_bounce(bounce_port, raw, verp(settings, invite))  # the sender's retry
    async with db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(bounces))).scalar() == 1
    assert (await invite_row(db, invite.public_id)).status == Status.DEVOLVIDO
