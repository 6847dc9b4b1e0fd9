"""The sending side of bounces: every message leaves with a signed VERP envelope sender, and
asks for failure and delay reports (RFC 3461) where the server offers DSN."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.bounces.addresses import Forged, ReturnPath, bounce_address, read_address
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


async def test_the_envelope_sender_is_the_signed_return_path_of_the_attempt(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    await send(settings, an_invite())

    [received] = smtp.received
    assert received.mail_from == bounce_address(
        settings.return_path, settings.secret_key, PUBLIC_ID, 2
    )
    assert read_address(settings.return_path, settings.secret_key, received.mail_from) == (
        ReturnPath(PUBLIC_ID, 2)
    )
    # Nothing the recipient reads carries the tag (List-Unsubscribe's mailto: is the invite's
    # opt-out address, with a tag of its own).
    tag = received.mail_from.partition("@")[0].rpartition("-")[2]
    assert tag.encode() not in received.message.as_bytes()
    assert "mailto:devolucoes+sair-" in str(received.message["List-Unsubscribe"])
    assert received.message["Message-ID"] == f"<{PUBLIC_ID}.2@localhost>"  # unchanged
    assert received.mail_options == [] and received.rcpt_options == []  # no DSN offered


async def test_where_the_server_offers_dsn_it_asks_for_failures_and_delays(
    settings: Settings, dsn_smtp: ScriptedSmtp
) -> None:
    settings = replace(settings, smtp=replace(settings.smtp, port=dsn_smtp.port))

    await send(settings, an_invite())

    [received] = dsn_smtp.received
    assert received.mail_from.startswith("devolucoes+")
    assert received.mail_options == ["RET=HDRS", f"ENVID={PUBLIC_ID}.2"]
    assert received.rcpt_options == ["NOTIFY=FAILURE,DELAY", "ORCPT=rfc822;ana+2Bfesta@exemplo.com"]


RETURN_PATH = "devolucoes@convites.exemplo"
KEY = "k" * 32


def test_a_signed_return_path_names_its_invite_and_attempt_in_lower_case() -> None:
    address = bounce_address(RETURN_PATH, KEY, PUBLIC_ID, 3)
    local, _, domain = address.partition("@")

    assert domain == "convites.exemplo"
    assert local.startswith("devolucoes+") and local == local.lower() and len(local) <= 64
    assert PUBLIC_ID not in address  # the id itself is case-sensitive: base32 instead
    assert read_address(RETURN_PATH, KEY, address) == ReturnPath(PUBLIC_ID, 3)
    # A mail system that folds the case of the address still returns a readable one.
    assert read_address(RETURN_PATH, KEY, f"<{address.upper()}>") == ReturnPath(PUBLIC_ID, 3)


@pytest.mark.parametrize(
    "recipient",
    [
        "devolucoes@convites.exemplo",
        "outra+{ext}@convites.exemplo",
        "devolucoes+{ext}@outro.exemplo",
        f"devolucoes+{PUBLIC_ID}@convites.exemplo",  # the unsigned address of before
    ],
)
def test_an_address_not_in_the_shape_of_ours_is_not_ours(recipient: str) -> None:
    ext = bounce_address(RETURN_PATH, KEY, PUBLIC_ID, 1).partition("+")[2].partition("@")[0]

    assert read_address(RETURN_PATH, KEY, recipient.format(ext=ext)) is None


def test_a_tag_is_good_for_its_own_invite_and_attempt_and_key_only() -> None:
    address = bounce_address(RETURN_PATH, KEY, PUBLIC_ID, 1)
    encoded_id, _, tag = address.partition("+")[2].partition("@")[0].split("-")
    other = bounce_address(RETURN_PATH, KEY, "Zz9_-x9KqLmN0pQr", 1)
    other_id = other.partition("+")[2].split("-")[0]

    forgeries = [
        f"devolucoes+{encoded_id}-2-{tag}@convites.exemplo",  # another attempt
        f"devolucoes+{other_id}-1-{tag}@convites.exemplo",  # another invite
        f"devolucoes+{encoded_id}-1-{'a' * 16}@convites.exemplo",  # a made-up tag
    ]
    for forged in forgeries:
        with pytest.raises(Forged):
            read_address(RETURN_PATH, KEY, forged)
    with pytest.raises(Forged):
        read_address(RETURN_PATH, "another-key-" + KEY, address)


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
