"""What an invite request must look like; every message is pt-BR text for the person."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from email_validator import EmailNotValidError, validate_email

from app.clock import DISPLAY_TZ, local_moment
from app.invites.records import Occasion

MAX_EMAIL_LENGTH = 254
MAX_NAME_LENGTH = 100
MAX_MESSAGE_LENGTH = 500


@dataclass(frozen=True)
class InviteRequest:
    email: str
    name: str | None
    message: str | None = None


class InvalidInvite(ValueError):
    """The request cannot become an invite; ``errors`` maps each field to its message."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors)
        self.errors = errors


#: Control characters (C0, DEL, C1), line/paragraph separators, lone surrogates, and the
#: bidirectional overrides that make text read differently from what it is.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: An RFC 2047 encoded word (``=?charset?B?...?=``): a mail client would decode it into text
#: the person never typed (another address, a line that looks like a header).
_ENCODED_WORD = re.compile(r"=\?[^?\s]*\?[bq]\?", re.IGNORECASE)


def _has_control_chars(value: str) -> bool:
    """True when ``value`` could break a header line (CR/LF and friends) or mislead a reader."""
    return any(
        unicodedata.category(ch) in _FORBIDDEN_CATEGORIES or ch in _BIDI_CONTROLS for ch in value
    )


def check_email(
    raw: object, missing: str = "Informe o e-mail de quem você quer convidar."
) -> tuple[str | None, str | None]:
    """The address as we send to it (domain in IDNA, lower case), or the pt-BR reason not."""
    if raw is not None and not isinstance(raw, str):
        return None, "O e-mail precisa ser um texto."
    if raw is None or not raw.strip():
        return None, missing
    email = raw.strip()
    if len(email) > MAX_EMAIL_LENGTH:
        return None, f"O e-mail pode ter no máximo {MAX_EMAIL_LENGTH} caracteres."
    if _has_control_chars(email):
        return None, "O e-mail não pode ter quebras de linha nem caracteres de controle."
    if not email.rpartition("@")[0].isascii():
        # Such a mailbox needs SMTPUTF8 all the way, which we never ask a server for.
        return None, (
            "O Convites não envia para endereços com acento ou outras letras especiais antes "
            "do @ (ex.: lucia@exemplo.com, não lúcia@exemplo.com)."
        )
    try:
        # Syntax only: no DNS at request time (a slow resolver must not slow the answer).
        checked = validate_email(email, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError:
        return (
            None,
            "Este e-mail não parece válido. Confira e tente de novo (ex.: ana@exemplo.com).",
        )
    # The domain in ASCII (IDNA) and lower case, so every SMTP server can take it.
    return f"{checked.local_part}@{checked.ascii_domain.lower()}", None


def shown_email(email: str) -> str:
    """The address as its owner reads it: a domain stored in IDNA (``xn--…``, what every SMTP
    server takes) in its own letters. An address that does not read back is shown as stored."""
    if "xn--" not in email:
        return email
    try:
        return validate_email(email, check_deliverability=False, allow_smtputf8=False).normalized
    except EmailNotValidError:
        return email


def check_name(raw: object) -> tuple[str | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, str):
        return None, "O nome precisa ser um texto."
    name = " ".join(raw.split()) if not _has_control_chars(raw.strip()) else None
    if name is None:
        return None, "O nome não pode ter quebras de linha nem caracteres de controle."
    if len(name) > MAX_NAME_LENGTH:
        return None, f"O nome pode ter no máximo {MAX_NAME_LENGTH} caracteres."
    if _ENCODED_WORD.search(name):
        return None, "O nome não pode conter sequências como “=?…?”."
    return name or None, None


def check_message(raw: object) -> tuple[str | None, str | None]:
    """The optional **Mensagem**: plain text, line breaks kept (as ``\n``), at most 500
    characters; markup is kept as typed and escaped wherever it is shown."""
    if raw is None:
        return None, None
    if not isinstance(raw, str):
        return None, "A mensagem precisa ser um texto."
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    lines = [line.rstrip() for line in text.split("\n")]
    message = "\n".join(lines).strip("\n").strip()
    if any(_has_control_chars(line) for line in lines):
        return None, "A mensagem não pode ter caracteres de controle."
    if len(message) > MAX_MESSAGE_LENGTH:
        return None, (
            f"A mensagem pode ter no máximo {MAX_MESSAGE_LENGTH} caracteres (tem {len(message)})."
        )
    return message or None, None


def parse_invite(data: dict[str, object]) -> InviteRequest:
    """Check ``email``, optional ``nome`` and ``mensagem``; raise ``InvalidInvite`` with pt-BR
    messages."""
    email, email_error = check_email(data.get("email"))
    name, name_error = check_name(data.get("nome"))
    message, message_error = check_message(data.get("mensagem"))
    checked = (("email", email_error), ("nome", name_error), ("mensagem", message_error))
    errors = {field: msg for field, msg in checked if msg}
    if errors or email is None:
        raise InvalidInvite(errors)
    return InviteRequest(email=email, name=name, message=message)


def check_send_at(
    raw: object, now: datetime, max_days: int, *, local: bool
) -> tuple[datetime | None, str | None]:
    """The optional "Enviar em" (``enviar_em``): ``None`` to send now, or an aware moment after
    ``now`` and at most ``max_days`` ahead. ``local``: a moment without a UTC offset (the form's
    ``datetime-local``) is São Paulo time; a JSON client must give the offset."""
    return _moment_ahead(
        raw,
        "enviar_em",
        now,
        max_days,
        local=local,
        past="Esse momento já passou. Escolha uma data e hora no futuro.",
        too_far=f"Dá para agendar no máximo {max_days} dias à frente.",
    )


def check_send_before_occasion(
    send_at: datetime | None, occasion_at: datetime | None
) -> str | None:
    """A scheduled invite must leave before its occasion: one sent at or after it would invite
    to something already happening (and, unanswered, it expires at the occasion)."""
    if send_at is None or occasion_at is None or send_at < occasion_at:
        return None
    return (
        f"O convite precisa sair antes da ocasião ({local_moment(occasion_at)}). "
        "Escolha um horário de envio anterior."
    )


MAX_OCCASION_TITLE_LENGTH = 120
MAX_OCCASION_PLACE_LENGTH = 200
#: How far ahead an occasion's date may be: any real event is planned within it, and a year
#: like 9999 (which a ``datetime-local`` field accepts) is a typo, not a plan.
MAX_OCCASION_YEARS = 5
MAX_OCCASION_DAYS = MAX_OCCASION_YEARS * 365 + 2  # leap days included


def _one_line(raw: object, what: str, limit: int) -> tuple[str | None, str | None]:
    """A short plain text on one line (it goes into a mail's subject): ``None`` if empty."""
    if raw is None or raw == "":
        return None, None
    if not isinstance(raw, str):
        return None, f"{what} precisa ser um texto."
    if _has_control_chars(raw.strip()):
        return None, f"{what} não pode ter quebras de linha nem caracteres de controle."
    text = " ".join(raw.split())
    if len(text) > limit:
        return None, f"{what} pode ter no máximo {limit} caracteres."
    if _ENCODED_WORD.search(text):
        return None, f"{what} não pode conter sequências como “=?…?”."
    return text or None, None


def check_occasion(
    data: dict[str, object], now: datetime, *, local: bool
) -> tuple[Occasion | None, dict[str, str]]:
    """The optional occasion (``ocasiao``, ``ocasiao_em``, ``ocasiao_local``): a title, and a
    moment still to come (at most ``MAX_OCCASION_YEARS`` ahead) and a place, which need the
    title."""
    title, title_error = _one_line(
        data.get("ocasiao"), "O nome da ocasião", MAX_OCCASION_TITLE_LENGTH
    )
    place, place_error = _one_line(data.get("ocasiao_local"), "O local", MAX_OCCASION_PLACE_LENGTH)
    at, at_error = _moment_ahead(
        data.get("ocasiao_em"),
        "ocasiao_em",
        now,
        MAX_OCCASION_DAYS,
        local=local,
        past="A data da ocasião já passou.",
        too_far=f"A data da ocasião pode ser no máximo {MAX_OCCASION_YEARS} anos à frente.",
    )
    errors = {
        field: message
        for field, message in (
            ("ocasiao", title_error),
            ("ocasiao_em", at_error),
            ("ocasiao_local", place_error),
        )
        if message
    }
    if title is None and (at is not None or place is not None) and "ocasiao" not in errors:
        errors["ocasiao"] = "Dê um nome à ocasião (por exemplo, Corrida de sábado)."
    if errors or title is None:
        return None, errors
    return Occasion(title, at, place), {}


def _moment_ahead(
    raw: object,
    field: str,
    now: datetime,
    max_days: int,
    *,
    local: bool,
    past: str,
    too_far: str,
) -> tuple[datetime | None, str | None]:
    """The one rule for a moment a person chooses ahead ("Enviar em", the occasion): after
    ``now`` and at most ``max_days`` ahead, else the pt-BR ``past`` or ``too_far``; in UTC, as
    it is stored. Only a moment in range is converted: near the ends of the calendar the
    conversion overflows (9999-12-31 23:59 in São Paulo is year 10000 in UTC), and comparing
    aware moments does not."""
    moment, problem = _moment(raw, field, local=local)
    if moment is None:
        return None, problem
    if moment <= now:
        return None, past
    if moment - now > timedelta(days=max_days):
        return None, too_far
    return moment.astimezone(UTC), None


def _moment(raw: object, field: str, *, local: bool) -> tuple[datetime | None, str | None]:
    """An aware moment from ISO 8601 (São Paulo time when ``local`` and it has no offset)."""
    if raw is None or raw == "":
        return None, None
    example = "2026-12-12T09:00:00-03:00"
    if not isinstance(raw, str):
        return None, f"Informe a data e a hora como texto, por exemplo {example}."
    try:
        moment = datetime.fromisoformat(raw.strip())
    except ValueError:
        return None, "A data e a hora não estão num formato que entendemos."
    if moment.tzinfo is None:
        if not local:
            return None, f"Informe o fuso horário em {field}, por exemplo {example}."
        moment = moment.replace(tzinfo=DISPLAY_TZ)
    return moment, None


def same_address(email: str) -> str:
    """The form two spellings of one mailbox share (``Ana@Exemplo.com`` = ``ana@exemplo.com``):
    accounts are unique by it, and the per-recipient limit, a batch's repeated rows and a
    sender's duplicate invitation (``sending.mailbox_of``) count by it. The stored address keeps
    its local part as typed: it is the mail's To."""
    return email.lower()
