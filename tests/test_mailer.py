"""The mailer on a real SMTP server: well-formed messages, kept connections, honest verdicts."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.config import Settings
from app.invites.records import Invite
from app.invites.status import Status
from app.sending.mailer import Mailer, SendProgress, TransientSendError
from app.sending.messages import build_message, compose
from tests.services import ScriptedSmtp, free_port


def an_invite(
    name: str | None = "Ana",
    email: str = "ana@exemplo.com",
    n: int = 1,
    sender: tuple[str | None, str] | None = ("Marta Souza", "marta@exemplo.com"),
) -> Invite:
    now = datetime.now(UTC)
    sender_name, sender_email = sender if sender else (None, None)
    return Invite(
        n, f"convite{n}", "remetente", email, name, Status.ENVIANDO, None, 1, 1,
        now, now, None, None, None, "corr-1", "convite", sender_name, sender_email,
    )  # fmt: skip


async def send(mailer: Mailer, settings: Settings, invite: Invite) -> None:
    await mailer.send(build_message(settings, invite, "TOKEN"), SendProgress(), deadline=10)


async def test_a_non_ascii_name_arrives_intact_with_both_bodies(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    mailer = Mailer(settings.smtp)
    await send(mailer, settings, an_invite("Conceição Araújo"))
    await mailer.close()

    [received] = smtp.received
    message = received.message
    assert message["To"].addresses[0].display_name == "Conceição Araújo"
    assert message["Subject"] == "Você recebeu um convite"
    assert message["Message-ID"] == "<convite1.1@localhost>"
    assert "Olá, Conceição Araújo!" in message.get_body(("plain",)).get_content()
    assert "Olá, Conceição Araújo!" in message.get_body(("html",)).get_content()


LONG_SUBJECT = (
    "Joana Conceição convidou você para a comemoração de aniversário da associação "
    "de moradores da Vila São João — confirmação até sexta-feira"
)


async def test_names_with_accents_quotes_and_commas_and_a_long_subject_survive_the_wire(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    invite = an_invite("Joana Conceição")
    text = "Olá, Joana Conceição!\n" + "Até já, ação e emoção. " * 20 + "\n"
    page = "<p>" + "Até já, ação e emoção. " * 60 + "</p>"
    mail = compose(
        settings, invite, LONG_SUBJECT, text, page, reply_to=('Silva, "Zé"', "ze@exemplo.com")
    )
    mailer = Mailer(settings.smtp)
    await mailer.send(mail, SendProgress(), deadline=10)
    await mailer.close()

    [received] = smtp.received
    assert max(len(line) for line in received.content.split(b"\r\n")) <= 998
    message = received.message
    assert [(a.display_name, a.addr_spec) for a in message["To"].addresses] == [
        ("Joana Conceição", "ana@exemplo.com")
    ]
    assert [(a.display_name, a.addr_spec) for a in message["Reply-To"].addresses] == [
        ('Silva, "Zé"', "ze@exemplo.com")
    ]
    assert len(LONG_SUBJECT) > 78 and message["Subject"] == LONG_SUBJECT
    # Text travels in MIME's canonical form, lines ending in CRLF (RFC 2045).
    assert message.get_body(("plain",)).get_content().splitlines() == text.splitlines()
    assert message.get_body(("html",)).get_content().splitlines() == [page]


async def test_consecutive_messages_share_one_connection(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    mailer = Mailer(settings.smtp)
    for n in range(3):
        await send(mailer, settings, an_invite(n=n))
    await mailer.close()

    assert len({received.peer for received in smtp.received}) == 1


async def test_a_refused_message_closes_its_connection(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    mailer = Mailer(settings.smtp)
    await send(mailer, settings, an_invite(n=1))
    smtp.reply_next("451 4.3.0 Try again later")
    with pytest.raises(TransientSendError):
        await send(mailer, settings, an_invite(n=2))
    await send(mailer, settings, an_invite(n=3))
    await mailer.close()

    first, last = smtp.received
    assert first.peer != last.peer


async def test_a_kept_connection_the_server_dropped_is_replaced_not_failed(
    settings: Settings,
) -> None:
    port = free_port()
    smtp = replace(settings.smtp, host="127.0.0.1", port=port)
    server = ScriptedSmtp(port)
    server.start()
    mailer = Mailer(smtp)
    try:
        await send(mailer, settings, an_invite(n=1))
        server.stop()  # the server goes away (restart, idle timeout): our kept socket is dead
        server = ScriptedSmtp(port)
        server.start()

        await send(mailer, settings, an_invite(n=2))

        [received] = server.received
        assert received.rcpt_tos == ["ana@exemplo.com"]
    finally:
        await mailer.close()
        server.stop()


async def test_the_invitation_names_its_sender_and_replies_go_to_them(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    mailer = Mailer(settings.smtp)
    await send(mailer, settings, an_invite(sender=("Conceição Araújo", "ceica@exemplo.com")))
    await mailer.close()

    [received] = smtp.received
    message = received.message
    text = message.get_body(("plain",)).get_content()
    assert "Conceição Araújo (ceica@exemplo.com) convidou você" in text
    assert message["Reply-To"].addresses[0].addr_spec == "ceica@exemplo.com"
    assert message["Reply-To"].addresses[0].display_name == "Conceição Araújo"
    html_part = message.get_body(("html",)).get_content()
    assert "Conceição Araújo (ceica@exemplo.com) convidou você" in html_part


async def test_a_sender_with_no_name_yet_is_named_by_the_address_once(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    mailer = Mailer(settings.smtp)
    await send(mailer, settings, an_invite(sender=(None, "ceica@exemplo.com")))
    await mailer.close()

    [received] = smtp.received
    text = received.message.get_body(("plain",)).get_content()
    assert "\nceica@exemplo.com convidou você." in text


async def test_markup_in_the_senders_name_stays_text_in_the_html_part(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    mailer = Mailer(settings.smtp)
    await send(mailer, settings, an_invite(sender=("<b>Eu</b>", "eu@exemplo.com")))
    await mailer.close()

    html_part = smtp.received[0].message.get_body(("html",)).get_content()
    assert "<b>" not in html_part and "&lt;b&gt;Eu&lt;/b&gt;" in html_part
