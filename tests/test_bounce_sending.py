"""The sending side of bounces: every message leaves with a VERP envelope sender, and asks for
failure and delay reports (RFC 3461) where the server offers DSN."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.bounces.addresses import bounce_address, public_id_of
from app.config import ConfigError, Settings, load_settings
from app.invites.records import Invite
from app.invites.status import Status
from app.sending.mailer import Mailer, SendProgress, xtext
from app.sending.messages import build_message
from tests.services import ScriptedSmtp, free_port

PUBLIC_ID = "Ab3_-x9KqLmN0pQr"
BASE = {"SECRET_KEY": "x" * 32, "DATABASE_URL": "sqlite+aiosqlite:///tmp/x.db"}


def an_invite(email: str = "ana+festa@exemplo.com", attempt: int = 2) -> Invite:
    now = datetime.now(UTC)
    return Invite(
        1, PUBLIC_ID, "remetente", email, "Ana", Status.ENVIANDO, None, attempt, 1,
        now, now, None, None, None, "corr-1", "convite", "Marta Souza", "marta@exemplo.com",
    )  # fmt: skip


@pytest.fixture
def dsn_smtp() -> Iterator[ScriptedSmtp]:
    server = ScriptedSmtp(free_port(), dsn=True)
    server.start()
    yield server
    server.stop()


async def send(settings: Settings, invite: Invite) -> None:
    mailer = Mailer(settings.smtp)
    await mailer.send(build_message(settings, invite, "TOKEN"), SendProgress(), deadline=10)
    await mailer.close()


async def test_the_envelope_sender_is_the_verp_address_of_the_invite(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    await send(settings, an_invite())

    [received] = smtp.received
    assert received.mail_from == f"devolucoes+{PUBLIC_ID}@convites.exemplo"
    assert received.message["Message-ID"] == f"<{PUBLIC_ID}.2@localhost>"  # unchanged
    assert received.mail_options == [] and received.rcpt_options == []  # no DSN offered


async def test_where_the_server_offers_dsn_it_asks_for_failures_and_delays(
    settings: Settings, dsn_smtp: ScriptedSmtp
) -> None:
    settings = replace(settings, smtp=replace(settings.smtp, port=dsn_smtp.port))

    await send(settings, an_invite())

    [received] = dsn_smtp.received
    assert received.mail_from == f"devolucoes+{PUBLIC_ID}@convites.exemplo"
    assert received.mail_options == ["RET=HDRS", f"ENVID={PUBLIC_ID}.2"]
    assert received.rcpt_options == ["NOTIFY=FAILURE,DELAY", "ORCPT=rfc822;ana+2Bfesta@exemplo.com"]


def test_a_verp_address_names_its_invite_and_nothing_else_does() -> None:
    address = bounce_address("devolucoes@convites.exemplo", PUBLIC_ID)

    assert public_id_of("devolucoes@convites.exemplo", address) == PUBLIC_ID
    assert public_id_of("devolucoes@convites.exemplo", "devolucoes@convites.exemplo") is None
    assert (
        public_id_of("devolucoes@convites.exemplo", "outra+" + PUBLIC_ID + "@convites.exemplo")
        is None
    )


def test_xtext_encodes_plus_equals_and_spaces() -> None:
    assert xtext("a+b=c d") == "a+2Bb+3Dc+20d"


def test_the_return_path_defaults_to_the_mail_from_domain_and_the_receiver_to_port_2525() -> None:
    settings = load_settings({**BASE, "MAIL_FROM": "Convites <convites@Convites.Example>"})

    assert settings.return_path == "devolucoes@convites.example"
    assert settings.bounce_listen == ("127.0.0.1", 2525)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RETURN_PATH", "devolucoes"),
        ("RETURN_PATH", "devolucoes+x@convites.example"),
        ("BOUNCE_LISTEN", "2525"),
        ("BOUNCE_LISTEN", "127.0.0.1:99999"),
    ],
)
def test_a_bad_bounce_setting_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings({**BASE, name: value})
