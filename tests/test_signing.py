"""``app.signing``: one HMAC for every purpose, kept apart by purpose, checked in constant time;
and every token already mailed or set keeps its exact bytes."""

from __future__ import annotations

import hmac
from itertools import permutations

import pytest

from app.bounces.addresses import bounce_address, opt_out_is_ours, read_address
from app.consent.confirmation import link_token
from app.consent.optout import signed_before_addresses
from app.invites.links import token_from_seed
from app.ops.auth import fingerprint
from app.signing import FULL, SEPARATOR, Purpose, sign, verify
from app.web.middleware.csrf import token_for

KEY = "chave-de-teste"
PUBLIC_ID = "AbCdEfGh12345678"


def test_no_purpose_is_a_prefix_of_another_so_their_messages_never_meet() -> None:
    # Two messages purpose+parts can only be equal if one purpose starts the other.
    for one, other in permutations(Purpose, 2):
        assert not other.value.startswith(one.value), (one.name, other.name)


def test_the_same_parts_sign_differently_under_every_purpose() -> None:
    tags = {sign(KEY, purpose, PUBLIC_ID, length=FULL) for purpose in Purpose}

    assert len(tags) == len(Purpose)


def test_verify_takes_the_signed_parts_and_refuses_a_changed_one() -> None:
    tag = sign(KEY, Purpose.RETURN_PATH, PUBLIC_ID, "1", length=10, encoding="base32")

    assert verify(tag, KEY, Purpose.RETURN_PATH, PUBLIC_ID, "1", length=10, encoding="base32")
    assert not verify(tag, KEY, Purpose.RETURN_PATH, PUBLIC_ID, "2", length=10, encoding="base32")
    assert not verify(tag, KEY, Purpose.OPT_OUT_ADDRESS, PUBLIC_ID, length=10, encoding="base32")
    assert not verify(tag, "outra-chave", Purpose.RETURN_PATH, PUBLIC_ID, "1", length=10)


def test_parts_cannot_be_shifted_across_the_separator() -> None:
    with pytest.raises(ValueError):
        sign(KEY, Purpose.RETURN_PATH, f"{PUBLIC_ID}{SEPARATOR}1", length=FULL)
    tag = sign(KEY, Purpose.RETURN_PATH, PUBLIC_ID, "1", length=FULL)

    assert not verify(tag, KEY, Purpose.RETURN_PATH, f"{PUBLIC_ID}{SEPARATOR}1", length=FULL)


def test_a_tag_that_is_not_ascii_is_refused_not_an_error() -> None:
    assert not verify("ét", KEY, Purpose.ERASURE_LINK, PUBLIC_ID, length=FULL)


def test_verify_compares_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[object, object]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    tag = sign(KEY, Purpose.CSRF, "visitante", length=FULL)

    assert verify(tag, KEY, Purpose.CSRF, "visitante", length=FULL)
    assert compared == [(tag.encode(), tag.encode())]


def test_tokens_already_out_there_keep_their_bytes() -> None:
    # Computed by each caller's own HMAC before app.signing existed: links sitting in mailboxes,
    # return paths of mails in flight and cookies set must all still be ours.
    address = "devolucoes@convites.example"

    # Opt-out links and addresses now name the address too; those mailed before still count.
    assert signed_before_addresses(KEY, PUBLIC_ID, "bDcn9LuuurXQqCQNMdckbmUJHujFQYstsNpThBUNNyo")
    assert link_token(KEY, PUBLIC_ID) == (
        "AbCdEfGh12345678.ZytqamRAXiC5_SU01fE_HJUgu1uHP-gSPCI1vvn4Tls"
    )
    assert token_from_seed(KEY, "semente-aleatoria") == "qy0xiyX4Rs97h7y9fFkVx2MaF0ZjMrk6"
    assert bounce_address(address, KEY, PUBLIC_ID, 3) == (
        "devolucoes+ifregzcfmzdwqmjsgm2dknrxha-3-er3ve3uircelzo35@convites.example"
    )
    mailed = read_address(
        address, KEY, "devolucoes+sair-ifregzcfmzdwqmjsgm2dknrxha-ylw6m6fmjqwhbmek@convites.example"
    )
    assert mailed is not None
    assert opt_out_is_ours(KEY, mailed, "ana@exemplo.com", corrected=False)
    assert token_for(KEY, "visitante-1") == "F9hr5N20wR73cNo9gXPc__baIvgqRERcdPUYQ5KrmeQ"
    assert fingerprint(KEY, "token-de-operacao") == (
        "3ca7128ce9605a86722e4a9d31d714d89e2421a78bf4dbbf984c8688b232c52b"
    )
