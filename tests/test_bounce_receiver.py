"""The bounce receiver over real SMTP, fed real-world samples (tests/data/bounces/): what each
bounce does to its invite, that every bounce taken is kept, once, whatever it looks like, and
that only return paths we issued and that still matter are taken at all."""

from __future__ import annotations

import asyncio
import logging
import smtplib
from pathlib import Path

import aiosmtplib
import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select, text

from app.bounces.addresses import bounce_address
from app.bounces.history import bounces_of
from app.bounces.receiver import MAX_BOUNCE_BYTES, MAX_RECIPIENTS
from app.config import Settings
from app.invites import transitions
from app.invites.queries import invite_history
from app.invites.records import Invite
from app.invites.status import Status
from app.ops.metrics import refused_bounces
from app.storage.database import Database
from app.storage.tables import bounces
from tests.helpers import bounce_sample, invite_row, send_bounce, verp_address

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


def verp(settings: Settings, invite: Invite, attempt: int | None = None) -> str:
    return verp_address(settings, invite.public_id, attempt or invite.attempt)


async def bounce(
    settings: Settings, port: int, invite: Invite, sample: str, attempt: int | None = None
) -> None:
    raw = bounce_sample(sample, invite, settings, attempt)
    await send_bounce(port, raw, verp(settings, invite, attempt))


async def refused_at_rcpt(settings: Settings, port: int, invite: Invite, to: str) -> int:
    """Send a bounce of ``invite`` to ``to``; the code the RCPT was refused with."""
    raw = bounce_sample("postfix.eml", invite, settings)
    with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
        await send_bounce(port, raw, to)
    return refused.value.recipients[0].code


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


async def test_a_bounce_for_an_invite_past_what_a_bounce_can_change_is_refused_at_rcpt(
    settings: Settings, db: Database, bounce_port: int, redis: Redis
) -> None:
    created = await transitions.create_invite(
        db, sender_id="s1", email="ana@exemplo.com", name=None, correlation_id="c-1"
    )
    claim = await transitions.claim_with_link(db, created.invite.public_id, 1, 60)
    assert claim is not None
    failed = await transitions.mark_failed(db, claim.change.invite, "550 no")
    assert failed is not None

    to = verp(settings, failed.invite)
    assert await refused_at_rcpt(settings, bounce_port, failed.invite, to) == 550

    assert (await invite_row(db, created.invite.public_id)).status == Status.FALHOU
    assert await kept(db) == []
    assert await refused_bounces(redis) == {"settled": 1}


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

    # The Postfix copy of the first attempt's failure arrives after the corrected send: the
    # first attempt's return path is refused, before its message is read.
    first = verp(settings, invite, attempt=1)
    assert await refused_at_rcpt(settings, bounce_port, invite, first) == 550

    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    assert await kept(db) == [("permanent", "devolvido")]


async def test_the_same_bounce_twice_is_one_event(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)

    await bounce(settings, bounce_port, invite, "rfc3464_simple.eml")
    # Now devolvido: the second copy changes nothing, so its return path is refused.
    to = verp(settings, invite)
    assert await refused_at_rcpt(settings, bounce_port, invite, to) == 550

    assert len(await bounces_of(db, invite.id)) == 1
    statuses = [e.status for e in await invite_history(db, invite.id)]
    assert statuses.count(Status.DEVOLVIDO) == 1


async def test_the_same_delay_report_twice_is_one_row(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)

    await bounce(settings, bounce_port, invite, "rfc3464_delayed.eml")
    await bounce(settings, bounce_port, invite, "rfc3464_delayed.eml")

    assert len(await bounces_of(db, invite.id)) == 1
    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO


@pytest.mark.parametrize("sample", ["malformed.eml", "not_a_bounce.eml"])
async def test_a_bounce_it_cannot_read_is_kept_counted_and_logged_with_its_id(
    settings: Settings,
    db: Database,
    bounce_port: int,
    sample: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    invite = await sent_invite(db)
    raw = bounce_sample(sample, invite, settings)

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


async def test_a_signed_return_path_of_an_invite_we_do_not_have_is_refused_at_rcpt(
    settings: Settings, db: Database, bounce_port: int, redis: Redis
) -> None:
    invite = await sent_invite(db)
    nobody = Invite(**{**vars(invite), "public_id": "AAAAAAAAAAAAAAAA"})

    assert await refused_at_rcpt(settings, bounce_port, nobody, verp(settings, nobody)) == 550

    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    assert await kept(db) == []
    assert await refused_bounces(redis) == {"unknown_invite": 1}


async def test_a_forged_return_path_is_refused_at_rcpt_counted_and_logged_without_it(
    settings: Settings,
    db: Database,
    bounce_port: int,
    redis: Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The recipient knows the invite's public id and attempt (the mail's headers say them);
    without SECRET_KEY they cannot write its return path."""
    invite = await sent_invite(db)
    real = verp(settings, invite)
    made_up = real.rpartition("-")[0] + "-" + "a" * 16 + "@" + real.rpartition("@")[2]
    other_key = bounce_address(settings.return_path, "z" * 32, invite.public_id, invite.attempt)

    with caplog.at_level(logging.INFO, logger="app.bounces.receiver"):
        for forged in (made_up, other_key):
            assert await refused_at_rcpt(settings, bounce_port, invite, forged) == 550

    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    assert await kept(db) == []
    assert await refused_bounces(redis) == {"forged": 2}
    lines = [r for r in caplog.records if r.getMessage() == "refused a bounce"]
    assert [r.reason for r in lines] == ["forged", "forged"]  # type: ignore[attr-defined]
    for forged in (made_up, other_key):
        tag = forged.partition("@")[0].rpartition("-")[2]
        assert all(tag not in str(vars(record)) for record in caplog.records)


async def test_an_invite_still_enviando_asks_for_the_bounce_again_later(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    """Its worker has not recorded the 250 yet: a 451 (not a 550), and the retry lands."""
    created = await transitions.create_invite(
        db, sender_id="s1", email="ana@exemplo.com", name=None, correlation_id="c-1"
    )
    claim = await transitions.claim_with_link(db, created.invite.public_id, 1, 60)
    assert claim is not None
    sending = claim.change.invite

    assert await refused_at_rcpt(settings, bounce_port, sending, verp(settings, sending)) == 451
    await transitions.mark_sent(db, sending)
    await bounce(settings, bounce_port, sending, "postfix.eml")

    assert (await invite_row(db, sending.public_id)).status == Status.DEVOLVIDO


NOT_VERP = [
    "postmaster@convites.exemplo",
    "devolucoes@convites.exemplo",
    "devolucoes+curto@convites.exemplo",
    "devolucoes+AAAAAAAAAAAAAAAA@outro.exemplo",
    "devolucoes+AAAAAAAAAAAAAAAA@convites.exemplo",  # the unsigned return path of before
]


@pytest.mark.parametrize("recipient", NOT_VERP)
async def test_mail_for_anything_but_a_verp_address_gets_550(
    settings: Settings, db: Database, bounce_port: int, recipient: str
) -> None:
    invite = await sent_invite(db)

    assert await refused_at_rcpt(settings, bounce_port, invite, recipient) == 550
    assert await kept(db) == []


async def test_a_bounce_it_cannot_record_now_is_spooled_and_refused_for_a_retry(
    settings: Settings, db: Database, bounce_port: int, tmp_path: Path
) -> None:
    invite = await sent_invite(db)
    raw = bounce_sample("postfix.eml", invite, settings)
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


def sendmail(port: int, recipients: list[str], raw: bytes) -> dict[str, tuple[int, bytes]]:
    """Python's own SMTP client, as a mail server hands over a bounce; the refused recipients."""
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        return client.sendmail("", recipients, raw)


async def test_one_message_to_fifty_recipients_is_refused_past_the_cap_and_kept_once(
    settings: Settings, db: Database, bounce_port: int, redis: Redis
) -> None:
    """The flood of the report: one 200 KB DATA to 50 made-up addresses kept 50 copies."""
    invite = await sent_invite(db)
    real = verp(settings, invite)
    encoded_id, domain = real.partition("+")[2].split("-")[0], real.rpartition("@")[2]
    made_up = [f"devolucoes+{encoded_id}-{n}-{'b' * 16}@{domain}" for n in range(1, 50)]
    raw = bounce_sample("postfix.eml", invite, settings)
    raw += b"\r\n" + (b"x" * 74 + b"\r\n") * 2700  # about 200 KB, under MAX_BOUNCE_BYTES

    refused = await asyncio.to_thread(sendmail, bounce_port, [real, *made_up], raw)

    codes = [refused[to][0] for to in made_up]
    within = MAX_RECIPIENTS - 1  # after the one accepted
    assert codes == [550] * within + [452] * (len(made_up) - within)
    async with db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(bounces))).scalar() == 1
    assert (await invite_row(db, invite.public_id)).status == Status.DEVOLVIDO
    assert await refused_bounces(redis) == {"forged": within, "too_many_recipients": 40}


async def test_one_message_to_several_real_return_paths_is_kept_and_read_once(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    """Each of our mails has its own return path, so a real bounce has one; the others are
    told to come in a message of their own (452), and do."""
    ana, bia, caio = [await sent_invite(db, f"{n}@exemplo.com") for n in ("ana", "bia", "caio")]
    raw = bounce_sample("rfc3464_multi_recipient.eml", ana, settings)
    recipients = [verp(settings, i) for i in (ana, bia, caio)]

    refused = await asyncio.to_thread(sendmail, bounce_port, recipients, raw)

    assert {to: code for to, (code, _) in refused.items()} == {
        recipients[1]: 452,
        recipients[2]: 452,
    }
    async with db.read() as conn:
        stored = (await conn.execute(select(bounces.c.public_id))).scalars().all()
    assert stored == [ana.public_id]
    assert (await invite_row(db, ana.public_id)).status == Status.DEVOLVIDO
    assert (await invite_row(db, bia.public_id)).status == Status.ENVIADO
    for invite in (bia, caio):  # the sending server's next messages
        await bounce(settings, bounce_port, invite, "postfix.eml")
    assert (await invite_row(db, caio.public_id)).status == Status.DEVOLVIDO


async def test_a_message_declared_too_big_is_refused_at_mail_from(
    settings: Settings, db: Database, bounce_port: int, redis: Redis
) -> None:
    client = aiosmtplib.SMTP(hostname="127.0.0.1", port=bounce_port, timeout=10)
    async with client:
        await client.ehlo()
        with pytest.raises(aiosmtplib.SMTPSenderRefused) as refused:
            await client.mail("", options=[f"SIZE={MAX_BOUNCE_BYTES + 1}"])

    assert refused.value.code == 552
    assert await refused_bounces(redis) == {"oversize": 1}


async def test_a_message_that_runs_past_the_limit_is_refused_and_nothing_kept(
    settings: Settings, db: Database, bounce_port: int, redis: Redis
) -> None:
    """A client that does not declare SIZE: aiosmtpd drops what is past the limit as it reads
    and answers 552 at the end of DATA."""
    invite = await sent_invite(db)
    padding = (b"x" * 74 + b"\r\n") * (MAX_BOUNCE_BYTES // 76 + 1)
    raw = bounce_sample("postfix.eml", invite, settings) + b"\r\n" + padding

    client = aiosmtplib.SMTP(hostname="127.0.0.1", port=bounce_port, timeout=10)
    async with client:
        await client.ehlo()
        await client.mail("")
        await client.rcpt(verp(settings, invite))
        with pytest.raises(aiosmtplib.SMTPDataError) as refused:
            await client.data(raw)

    assert refused.value.code == 552
    assert await kept(db) == []
    assert (await invite_row(db, invite.public_id)).status == Status.ENVIADO
    assert await refused_bounces(redis) == {"oversize": 1}


async def test_with_the_invites_out_of_reach_at_rcpt_the_bounce_is_asked_again_later(
    settings: Settings, db: Database, bounce_port: int
) -> None:
    invite = await sent_invite(db)
    async with db.write() as conn:  # every read of invites fails
        await conn.execute(text("ALTER TABLE invites RENAME TO invites_away"))

    refused = await refused_at_rcpt(settings, bounce_port, invite, verp(settings, invite))

    async with db.write() as conn:
        await conn.execute(text("ALTER TABLE invites_away RENAME TO invites"))
    assert refused == 451
    await bounce(settings, bounce_port, invite, "postfix.eml")  # the sender's retry
    assert (await invite_row(db, invite.public_id)).status == Status.DEVOLVIDO
