"""The reader on its own: a non-standard bounce counts only when it names the invite's own
address, and nothing it is given makes it raise."""

from __future__ import annotations

import pytest

from app.bounces.reader import BounceKind, read_bounce
from app.bounces.reasons import bounce_reason
from tests.helpers import bounce_message

PUBLIC_ID = "AAAAAAAAAAAAAAAA"
VERP = "devolucoes+aaaaaaaaaaaaaaaaaaaa-1-aaaaaaaaaaaaaaaa@convites.exemplo"


def sample(name: str, email: str = "ana@exemplo.com") -> bytes:
    return bounce_message(name, PUBLIC_ID, email, 1, VERP)


def test_a_non_standard_bounce_for_someone_else_is_unreadable_not_a_failure() -> None:
    raw = sample("exim.eml", email="outra@exemplo.com")

    verdict = read_bounce(raw, PUBLIC_ID, "ana@exemplo.com")

    assert verdict.kind == BounceKind.UNREADABLE
    assert verdict.problem == "names other recipients: outra@exemplo.com"


def test_a_non_standard_bounce_for_the_invite_is_a_permanent_failure_with_its_code() -> None:
    verdict = read_bounce(sample("exim.eml"), PUBLIC_ID, "Ana@Exemplo.com")

    assert (verdict.kind, verdict.status_code) == (BounceKind.PERMANENT, "5.1.1")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\xff\xfe garbage",
        b"Content-Type: multipart/report\r\n\r\n--x--",
        b"A: b\r\n" * 5000,
    ],
)
def test_whatever_it_is_given_it_answers_a_verdict(raw: bytes) -> None:
    verdict = read_bounce(raw, PUBLIC_ID, "ana@exemplo.com")

    assert verdict.kind == BounceKind.UNREADABLE and verdict.fingerprint


def test_the_same_bounce_relayed_twice_has_one_fingerprint() -> None:
    raw = sample("postfix.eml")
    relayed = b"Received: from relay.exemplo.com by mx.exemplo.com\r\n" + raw

    assert (
        read_bounce(raw, PUBLIC_ID, None).fingerprint
        == read_bounce(relayed, PUBLIC_ID, None).fingerprint
    )


def test_reasons_read_as_plain_portuguese_with_the_code_and_the_host() -> None:
    assert bounce_reason("5.2.2", "mx.exemplo.com") == (
        "O servidor do destinatário informou que a caixa está cheia (5.2.2). "
        "Informado por mx.exemplo.com."
    )
    assert bounce_reason("5.7.1", None) == (
        "O servidor do destinatário informou que recusou a mensagem por política "
        "(spam ou segurança) (5.7.1)."
    )
