"""Nothing a person types can become a mail header: encoded words in names, request ids."""

from __future__ import annotations

from dataclasses import replace
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as email_policy

import httpx
import pytest

from app.config import Settings
from app.sending.mailer import PermanentSendError
from app.sending.messages import compose, invitation, unsubscribe_headers
from app.storage.database import Database
from app.web.middleware.correlation import CorrelationIdMiddleware
from tests.helpers import api_headers, invite_count
from tests.test_mailer import an_invite

ENCODED_WORDS = [
    "=?utf-8?b?Qm9iIDxib2JAZXZpbC5leGFtcGxlPg==?=",
    "Ana =?ISO-8859-1?Q?Mall=E9?= Silva",
    "=?UTF-8?B??=",
]


@pytest.mark.parametrize("name", ENCODED_WORDS)
async def test_a_name_with_an_rfc2047_encoded_word_is_refused(
    client: httpx.AsyncClient, db: Database, name: str
) -> None:
    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com", "nome": name},
        headers=await api_headers(client),
    )

    assert response.status_code == 422
    assert "=?" in response.json()["campos"]["nome"]
    assert await invite_count(db) == 0


async def test_a_name_that_merely_has_an_equals_sign_or_question_mark_is_fine(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com", "nome": "Ana = Bia? Sim"},
        headers=await api_headers(client),
    )
    assert response.status_code == 202


async def _correlation_id_for(raw: bytes) -> str:
    seen: dict[str, str] = {}

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        seen["id"] = scope["correlation_id"]

    middleware = CorrelationIdMiddleware(app)  # type: ignore[arg-type]
    scope = {"type": "http", "headers": [(b"x-request-id", raw)]}
    await middleware(scope, None, None)  # type: ignore[arg-type]
    return seen["id"]


async def test_a_request_id_with_a_trailing_newline_is_replaced() -> None:
    assert await _correlation_id_for(b"pedido-1") == "pedido-1"
    replaced = await _correlation_id_for(b"pedido-1\n")
    assert replaced != "pedido-1\n" and "\n" not in replaced


def _sent_to(settings: Settings, name: str | None, email: str) -> EmailMessage:
    """The message composed for (``name``, ``email``), as a mail program reads it."""
    invite = an_invite(name, email)
    mail = compose(settings, invite, "Convite", "Olá!\n", "<p>Olá!</p>", reply_to=(name, email))
    parsed = message_from_bytes(mail.content, policy=email_policy)
    assert isinstance(parsed, EmailMessage)
    return parsed


ADDRESSES = [
    ("Ana", "ana@exemplo.com.br"),
    (None, "o.brien+convite@mail.exemplo.com"),
    ("Ana, a chefe", "ana_1@exemplo.com"),
    ("Zoë Müller", "zoe@exemplo.de"),
    ("Léa", "lea@xn--exmplo-bva.com"),
]


@pytest.mark.parametrize(("name", "email"), ADDRESSES)
def test_an_address_header_reads_back_as_the_name_and_address_it_was_made_of(
    settings: Settings, name: str | None, email: str
) -> None:
    message = _sent_to(settings, name, email)
    for header in ("To", "Reply-To"):
        [address] = message[header].addresses
        assert (address.display_name, address.addr_spec) == (name or "", email)


@pytest.mark.parametrize("email", ["ana@exemplo.com\r\nBcc: x@y.z", "a b@exemplo.com", "ana@"])
def test_an_address_that_could_bend_the_header_is_refused(settings: Settings, email: str) -> None:
    with pytest.raises(PermanentSendError):
        _sent_to(settings, "Ana", email)


@pytest.mark.parametrize("host", ["a", "a" * 20, "a" * 37, "a" * 60])
def test_list_unsubscribe_is_its_two_uris_as_written_whatever_their_length(
    settings: Settings, host: str
) -> None:
    """A signed URL longer than a header line: the standard folding wrote it as encoded words
    (``=?utf-8?q?…``), which no mail provider decodes in ``List-Unsubscribe``."""
    settings = replace(settings, public_url=f"https://{host}.exemplo")
    invite = an_invite()
    raw = invitation(settings, invite, "TOKEN").content
    head = raw.split(b"\r\n\r\n")[0].decode("ascii")
    written = head.split("List-Unsubscribe: ")[1].split("\r\nList-Unsubscribe-Post")[0]

    expected = unsubscribe_headers(settings, invite)["List-Unsubscribe"]
    assert written.replace("\r\n", "") == expected
    assert "=?" not in written
    assert str(message_from_bytes(raw, policy=email_policy)["List-Unsubscribe"]) == expected
