"""What the bounce receiver puts on the suppression list, over real SMTP: a spam complaint
(real-world ARF reports from tests/data/arf/, byte for byte), a message to the invite's opt-out
address (the List-Unsubscribe mailto), and a bounce that says the mailbox does
not exist or is disabled (5.1.x, 5.2.1); never another 5.x.x, never a 4.x.x, never a report that
is no complaint."""

from __future__ import annotations

import re
from pathlib import Path

import aiosmtplib
import pytest
from sqlalchemy import update

from app.bounces.addresses import opt_out_address
from app.bounces.history import bounces_of
from app.config import Settings
from app.consent import suppression
from app.consent.suppression import ROW_NOTES, Reason
from app.invites import transitions
from app.invites.records import Invite
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import invites
from tests.helpers import bounce_sample, invite_row, send_bounce, verp_address

ARF = Path(__file__).resolve().parent / "data" / "arf"
ANA = "ana@exemplo.com"


async def sent_invite(db: Database, email: str = ANA) -> Invite:
    created = await transitions.create_invite(
        db, sender_id="s1", email=email, name=None, correlation_id="c-1"
    )
    claim = await transitions.claim_with_link(db, created.invite.public_id, 1, 60)
    assert claim is not None
    sent = await transitions.mark_sent(db, claim.change.invite)
    assert sent is not None
    return sent.invite


def real_sample(name: str) -> bytes:
    return re.sub(rb"\r?\n", b"\r\n", (ARF / name).read_bytes())  # SMTP lines end in CRLF


@pytest.mark.parametrize("sample", ["sisimai-arf-02.eml", "sisimai-arf-16.eml"])
async def test_a_real_spam_complaint_suppresses_the_address_and_the_row_says_so(
    settings: Settings, db: Database, bounce_port: int, sample: str
) -> None:
    invite = await sent_invite(db)

    await send_bounce(bounce_port, real_sample(sample), verp_address(settings, invite.public_id))

    entry = await suppression.entry_for(db, ANA)
    assert entry is not None
    assert (entry.reason, entry.detail) == (Reason.COMPLAINED, "Feedback-Type: abuse")
    row = await invite_row(db, invite.public_id)
    assert (row.status, row.error) == (Status.RECUSADO, ROW_NOTES[Reason.COMPLAINED])
    [kept] = await bounces_of(db, invite.id)
    assert (kept.kind, kept.outcome) == ("complaint", "suppressed")


async def test_a_complaint_after_the_invite_expired_still_suppresses(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)
    async with db.write() as conn:  # as the sweep's expiry leaves it
        expired = update(invites).where(invites.c.id == invite.id)
        await conn.execute(expired.values(status=Status.EXPIRADO.value))

    raw = real_sample("sisimai-arf-02.eml")
    await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))

    assert await suppression.reason_for(db, ANA) == Reason.COMPLAINED
    assert (await invite_row(db, invite.public_id)).status == Status.EXPIRADO


async def test_a_feedback_report_that_is_no_complaint_is_kept_and_suppresses_nothing(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)

    raw = real_sample("sisimai-arf-19.eml")  # Feedback-Type: auth-failure (DMARC)
    await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))

    assert await suppression.reason_for(db, ANA) is None
    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    [kept] = await bounces_of(db, invite.id)
    assert (kept.kind, kept.outcome) == ("other", "history")


def postfix_bounce(invite: Invite, settings: Settings, code: str) -> bytes:
    """Postfix's real 5.1.1 bounce, saying ``code`` instead."""
    return bounce_sample("postfix.eml", invite, settings).replace(b"5.1.1", code.encode())


@pytest.mark.parametrize("code", ["5.1.1", "5.1.10", "5.2.1"])
async def test_a_no_such_mailbox_bounce_suppresses_and_the_devolvido_row_says_so(
    settings: Settings, db: Database, bounce_port: int, code: str
) -> None:
    invite = await sent_invite(db)

    # 5.1.10 as Microsoft says it (null MX / recipient not found), the others as Postfix.
    if code == "5.1.10":
        raw = bounce_sample("microsoft.eml", invite, settings)
    else:
        raw = postfix_bounce(invite, settings, code)
    await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))

    entry = await suppression.entry_for(db, ANA)
    assert entry is not None and (entry.reason, entry.detail) == (Reason.BOUNCED, code)
    row = await invite_row(db, invite.public_id)
    assert row.status == Status.DEVOLVIDO
    assert row.error is not None and row.error.endswith(ROW_NOTES[Reason.BOUNCED])


@pytest.mark.parametrize("code", ["5.7.1", "5.7.26", "5.3.0"])
async def test_a_5xx_about_our_mail_not_the_mailbox_turns_devolvido_but_never_suppresses(
    settings: Settings, db: Database, bounce_port: int, code: str
) -> None:
    invite = await sent_invite(db)

    # A policy or spam block (5.7.x), or the receiving system's fault (5.3.x).
    raw = postfix_bounce(invite, settings, code)
    await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))

    assert await suppression.reason_for(db, ANA) is None
    row = await invite_row(db, invite.public_id)
    assert row.status == Status.DEVOLVIDO
    assert row.error is not None and ROW_NOTES[Reason.BOUNCED] not in row.error


@pytest.mark.parametrize("sample", ["rfc3464_simple.eml", "rfc3464_delayed.eml"])
async def test_a_4xx_never_suppresses_even_when_the_server_gave_up(
    settings: Settings, db: Database, bounce_port: int, sample: str
) -> None:
    invite = await sent_invite(db)

    raw = bounce_sample(sample, invite, settings)  # failed 4.0.0, then delayed 4.2.2
    await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))

    assert await suppression.reason_for(db, ANA) is None


async def test_a_message_to_the_opt_out_address_opts_out_and_an_auto_reply_does_not(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)
    return_path = verp_address(settings, invite.public_id)
    auto_reply = (
        f"From: {ANA}\r\nTo: {return_path}\r\nSubject: Auto: Você recebeu um convite\r\n"
        "Auto-Submitted: auto-replied\r\n\r\nEstou de férias.\r\n"
    )
    await send_bounce(bounce_port, auto_reply.encode(), return_path)
    assert await suppression.reason_for(db, ANA) is None

    # What a mail client sends for the List-Unsubscribe mailto:, at any time.
    mailto = opt_out_address(
        settings.return_path, settings.secret_key, invite.public_id, invite.email
    )
    message = f"From: {ANA}\r\nTo: {mailto}\r\nSubject: descadastro\r\n\r\n\r\n"
    await send_bounce(bounce_port, message.encode(), mailto)

    assert await suppression.reason_for(db, ANA) == Reason.OPTED_OUT
    row = await invite_row(db, invite.public_id)
    assert (row.status, row.error) == (Status.RECUSADO, ROW_NOTES[Reason.OPTED_OUT])
    kinds = [(b.kind, b.outcome) for b in await bounces_of(db, invite.id)]
    assert ("unsubscribe", "suppressed") in kinds


async def test_an_opt_out_address_with_a_tag_we_did_not_write_is_refused(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)
    real = opt_out_address(
        settings.return_path, settings.secret_key, invite.public_id, invite.email
    )
    forged = re.sub(r"-[a-z2-7]{16}@", "-aaaaaaaaaaaaaaaa@", real)

    with pytest.raises(aiosmtplib.SMTPRecipientsRefused):
        await send_bounce(bounce_port, b"Subject: descadastro\r\n\r\n\r\n", forged)

    assert await suppression.reason_for(db, ANA) is None
