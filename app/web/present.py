"""How an invite reads to a person: the one place that turns a row into pt-BR words."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.bounces.history import Bounce, bounce_json
from app.bounces.reasons import in_plain_words
from app.clock import DISPLAY_TZ, local_hour, local_moment
from app.consent.suppression import NOT_SENT_TAIL
from app.invites.records import SIGNIN_MAIL, Event, Invite
from app.invites.status import LABELS, PAUSED_LABEL, Status
from app.invites.validation import shown_email


def local_time(moment: datetime | None) -> str:
    """``14:05:09``, in the display time zone."""
    if moment is None:
        return ""
    local = moment.astimezone(DISPLAY_TZ)
    return local.strftime("%H:%M:%S")


def local_datetime(moment: datetime | None) -> str:
    """``04/12/2026 18:53:09``, in the display time zone."""
    if moment is None:
        return ""
    return moment.astimezone(DISPLAY_TZ).strftime("%d/%m/%Y %H:%M:%S")


def local_minute(moment: datetime | None) -> str:
    """``04/12/2026 18:53``: dd/mm/aaaa hh:mm in the display time zone (a spreadsheet's cell)."""
    if moment is None:
        return ""
    return moment.astimezone(DISPLAY_TZ).strftime("%d/%m/%Y %H:%M")


def local_input(moment: datetime | None) -> str:
    """``2026-12-12T09:00``: the value of a ``datetime-local`` field, in the display time zone."""
    if moment is None:
        return ""
    return moment.astimezone(DISPLAY_TZ).strftime("%Y-%m-%dT%H:%M")


def is_slow(invite: Invite, now: datetime, slow_after_seconds: float) -> bool:
    """A ``pendente`` invite that has waited longer than a person should have to."""
    if invite.status != Status.PENDENTE:
        return False
    waiting_since = invite.next_attempt_at or invite.created_at
    return now - waiting_since > timedelta(seconds=slow_after_seconds)


@dataclass(frozen=True)
class StatusText:
    """What the page says about one invite: a short label and the sentence to announce."""

    label: str
    message: str
    detail: str | None = None


def _reason(invite: Invite) -> str:
    return invite.error or "Motivo desconhecido."


def _person(invite: Invite) -> str:
    """Who answered: their name when the sender gave one, else the address."""
    return invite.name or shown_email(invite.email)


#: What a row says in each state that needs no more than the row: (message, detail).
_SAID: dict[Status, Callable[[Invite], tuple[str, str]]] = {
    Status.AGENDADO: lambda i: (
        f"Agendado para {local_moment(i.send_at)} (convite para {shown_email(i.email)}).",
        "Sai nessa hora. Até lá, dá para mudar o horário ou cancelar.",
    ),
    Status.ENVIADO: lambda i: (
        f"Convite para {shown_email(i.email)} enviado.",
        f"Enviado às {local_time(i.sent_at)}.",
    ),
    Status.FALHOU: lambda i: (
        f"Não foi possível enviar o convite para {shown_email(i.email)}.",
        f"{_reason(i)} Confira o endereço e use Tentar de novo.",
    ),
    Status.INCERTO: lambda i: (
        f"Não conseguimos confirmar o envio do convite para {shown_email(i.email)}.",
        "Ele pode ter saído. Se reenviar, a pessoa pode receber duas vezes.",
    ),
    Status.DEVOLVIDO: lambda i: (
        f"O convite para {shown_email(i.email)} voltou: não foi entregue.",
        # The code and the reporting host stay in the history (and on /operacao).
        f"{in_plain_words(_reason(i))} Corrija o endereço e reenvie.",
    ),
    Status.ACEITO: lambda i: (
        f"{_person(i)} aceitou o convite.",
        f"Aceito às {local_time(i.updated_at)}.",
    ),
    Status.RECUSADO: lambda i: (
        # The invitee opted out or complained (app.consent.suppression): what they did then,
        # which stays true after a way back or an operator's lift.
        (f"{_person(i)}: {i.error}", f"Em {local_time(i.updated_at)}.")
        if i.error
        else (
            f"{_person(i)} recusou o convite.",
            f"Recusado às {local_time(i.updated_at)}. "
            "A resposta é definitiva; se a pessoa mudar de ideia, reenvie o convite.",
        )
    ),
    Status.EXPIRADO: lambda i: (
        f"O convite para {shown_email(i.email)} expirou sem resposta.",
        "O link não funciona mais. Reenvie se ainda quiser convidar.",
    ),
    Status.CANCELADO: lambda i: (
        (
            f"O convite para {shown_email(i.email)} não foi enviado.",
            i.error.removesuffix(NOT_SENT_TAIL),
        )
        if i.error  # its address is on the suppression list
        else (
            f"Convite para {shown_email(i.email)} cancelado.",
            # Cancelled before any mail was known to leave (agendado, paused, after a failure,
            # incerto, after a correction): no link may be out, or one may.
            (
                "O link do convite não funciona mais."
                if i.sent_at
                else "Se algum e-mail saiu, o link dele não funciona mais."
            )
            + " Reenvie se mudar de ideia.",
        )
    ),
}

#: The same for a sign-in mail: the same honesty as an invite's.
_SAID_SIGNIN: dict[Status, Callable[[Invite], tuple[str, str]]] = {
    Status.ENVIADO: lambda i: (
        f"Link de acesso enviado para {shown_email(i.email)}. Confira sua caixa de entrada.",
        f"Enviado às {local_time(i.sent_at)}. O link vale por pouco tempo e só uma vez.",
    ),
    Status.FALHOU: lambda i: (
        f"Não foi possível enviar o link de acesso para {shown_email(i.email)}.",
        f"{_reason(i)} Confira o endereço e peça outro link.",
    ),
    Status.INCERTO: lambda i: (
        f"Não conseguimos confirmar o envio do link para {shown_email(i.email)}.",
        "Ele pode ter saído. Confira sua caixa de entrada ou peça outro link.",
    ),
}


#: What a sent invite's row adds about its reminder (``reminder_status``).
_REMINDER_DETAIL: dict[str | None, Callable[[Invite], str]] = {
    "enviado": lambda i: f"Lembrete enviado às {local_hour(i.reminded_at or i.updated_at)}.",
    "falhou": lambda i: "O lembrete não foi enviado (veja o histórico).",
    "incerto": lambda i: "Não conseguimos confirmar o envio do lembrete.",
}


def _with_reminder(invite: Invite, said: tuple[str, str]) -> tuple[str, str]:
    if invite.reminder_requested_at is not None:
        return said[0], f"{said[1]} Lembrete pedido: sai em instantes."
    if invite.reminder_status in _REMINDER_DETAIL:
        return said[0], f"{said[1]} {_REMINDER_DETAIL[invite.reminder_status](invite)}"
    return said


def describe(invite: Invite, now: datetime, slow_after_seconds: float) -> StatusText:
    """The truth about ``invite`` in pt-BR. Only an ``enviado`` row ever reads as sent."""
    who = shown_email(invite.email)
    label = LABELS[invite.status]
    if invite.status == Status.ENVIADO:
        return StatusText(label, *_with_reminder(invite, _SAID[invite.status](invite)))
    if invite.status == Status.AGENDADO and invite.send_at is not None and invite.send_at <= now:
        # Its moment has come and the worker's sweep is about to release it: "Sai nessa hora"
        # about a moment already past would read as a mistake.
        return StatusText(label, _SAID[invite.status](invite)[0], "Saindo agora.")
    if invite.status in _SAID:
        return StatusText(label, *_SAID[invite.status](invite))
    if invite.status == Status.ENVIANDO:
        return StatusText(label, f"Enviando o convite para {who}…")
    if is_slow(invite, now, slow_after_seconds):
        return StatusText(
            "Ainda enviando",
            "Ainda enviando — está demorando mais que o normal.",
            f"Convite para {who}.",
        )
    if invite.error and invite.attempt > invite.round_first_attempt:
        failed = invite.attempt - 1
        return StatusText(
            label,
            f"Recebemos, enviando… A tentativa {failed} para {who} falhou; vamos tentar de novo.",
            f"{invite.error} Próxima tentativa às {local_time(invite.next_attempt_at)}.",
        )
    if invite.error:
        # Given back before any byte left (the hourly budget, a worker stopping): it waits.
        return StatusText(
            label,
            f"Recebemos o convite para {who}; o envio foi adiado.",
            f"{invite.error} Próxima tentativa às {local_time(invite.next_attempt_at)}.",
        )
    return StatusText(label, f"Recebemos, enviando… (convite para {who})")


def describe_paused(invite: Invite) -> StatusText | None:
    """What a ``pendente`` row says while sending is paused: it waits, nothing is sending it.

    The row carries this next to ``describe``'s words and the page shows the one that fits the
    notice above it (``body[data-envio]``), so the notice and every row change together."""
    if invite.status != Status.PENDENTE:
        return None
    if invite.kind == SIGNIN_MAIL:
        return StatusText(
            PAUSED_LABEL,
            f"Recebemos o pedido do link para {shown_email(invite.email)}. O envio está pausado; "
            "o link sai assim que o envio voltar.",
        )
    return StatusText(
        PAUSED_LABEL,
        f"Recebemos o convite para {shown_email(invite.email)}. O envio está pausado; "
        "ele sai assim que o envio voltar.",
    )


def describe_signin(invite: Invite) -> StatusText:
    """The truth about a sign-in mail in pt-BR: the same honesty as an invite's."""
    label = LABELS[invite.status]
    if invite.status in _SAID_SIGNIN:
        return StatusText(label, *_SAID_SIGNIN[invite.status](invite))
    if invite.status == Status.ENVIANDO:
        return StatusText(label, f"Enviando o link de acesso para {shown_email(invite.email)}…")
    return StatusText(label, f"Recebemos, enviando o link… (para {shown_email(invite.email)})")


# Shown on every live page (invites, batches, the sign-in link's): what waits is whatever the
# person asked for.
PAUSED_NOTICE = (
    "O envio está pausado no momento. Nada do que você pediu se perde: tudo sai assim que ele "
    "voltar."
)
TEAM_PAUSED_NOTICE = (
    "O envio foi pausado pela equipe. Nada do que você pediu se perde: tudo sai quando o envio "
    "for retomado."
)
RESUMED_NOTICE = "O envio voltou."
RECONNECTING = "Reconectando…"
CONNECTION_LOST = "Não conseguimos falar com o servidor. Confira sua conexão e tente de novo."


def seconds_until_slow(invite: Invite, now: datetime, slow_after_seconds: float) -> float | None:
    """For a ``pendente`` row not yet slow: when the page should ask again (a client timer).
    Never for a batch's row: a thousand timers would ask at once; its stream brings changes."""
    if invite.batch_id is not None:
        return None
    if invite.status != Status.PENDENTE or is_slow(invite, now, slow_after_seconds):
        return None
    waiting_since = invite.next_attempt_at or invite.created_at
    due = waiting_since + timedelta(seconds=slow_after_seconds)
    return max(0.0, (due - now).total_seconds())


def announcement(invite: Invite, text: StatusText, *, own_action: bool = False) -> tuple[str, str]:
    """What a screen reader should hear when a row reaches this state, and through which region.

    ``enviando`` is a passing moment, not announced; a batch's rows are silent but for answers
    (the batch page sums them up) and for the person's own press on the row (``own_action``:
    Reenviar, Cancelar… on one row of a batch is heard as on a single invite).
    """
    if (
        invite.batch_id is not None
        and not own_action
        and invite.status not in (Status.ACEITO, Status.RECUSADO)
    ):
        return "", ""
    if invite.status == Status.ENVIADO and (invite.reminder_requested_at or invite.reminder_status):
        return reminder_announcement(invite)
    if invite.status in (Status.FALHOU, Status.INCERTO, Status.DEVOLVIDO):
        return f"{text.message} {text.detail}", "alert"
    if invite.status == Status.ENVIANDO:
        return "", ""
    return text.message, "status"


def reminder_announcement(invite: Invite) -> tuple[str, str]:
    """What is heard about a sent invite's reminder: asked for, then what became of it."""
    who = _person(invite)
    if invite.reminder_requested_at is not None:
        return f"Lembrete pedido para {who}.", "status"
    if invite.reminder_status == "enviado":
        at = local_hour(invite.reminded_at or invite.updated_at)
        return f"Lembrete enviado para {who} às {at}.", "status"
    if invite.reminder_status == "falhou":
        return (
            f"Não foi possível enviar o lembrete para {who}. O convite continua valendo.",
            "alert",
        )
    if invite.reminder_status == "incerto":
        return f"Não conseguimos confirmar o envio do lembrete para {who}.", "alert"
    return "", ""  # claimed, sending now: a passing moment


def can_remind(invite: Invite, now: datetime, min_gap_seconds: float) -> bool:
    """Whether the row offers Lembrar: sent, unanswered, not asked already, and not reminded
    within ``min_gap_seconds``."""
    if invite.status != Status.ENVIADO or invite.reminder_requested_at is not None:
        return False
    last = invite.reminded_at
    return last is None or now - last >= timedelta(seconds=min_gap_seconds)


_REMINDER_EVENTS = {
    "enviado": lambda e: f"Lembrete enviado às {local_hour(e.created_at)}",
    "falhou": lambda e: f"Lembrete não enviado: {e.error or 'motivo desconhecido.'}",
    "incerto": lambda e: f"Lembrete incerto: {e.error or 'motivo desconhecido.'}",
}


def event_text(event: Event, previous: Event | None = None) -> str:
    """One line of the history: what happened at that moment (``previous``: the line before)."""
    if event.reminder in _REMINDER_EVENTS:
        return _REMINDER_EVENTS[event.reminder](event)
    texts = {
        Status.AGENDADO: f"Agendado para {local_moment(event.next_attempt_at)}",
        Status.PENDENTE: (
            "Criado: na fila para envio" if event.attempt == 1 else "Reenvio pedido: na fila"
        ),
        Status.ENVIANDO: f"Tentativa {event.attempt}: enviando",
        Status.ENVIADO: f"Tentativa {event.attempt}: enviado",
        Status.FALHOU: f"Tentativa {event.attempt}: falhou",
        Status.INCERTO: f"Tentativa {event.attempt}: resultado incerto",
        Status.DEVOLVIDO: f"Tentativa {event.attempt}: devolvida pelo servidor do destinatário",
        Status.ACEITO: "Aceito pela pessoa convidada",
        Status.RECUSADO: "Recusado pela pessoa convidada",
        Status.EXPIRADO: "Expirou sem resposta",
        Status.CANCELADO: "Cancelado por você",
    }
    text = texts[event.status]
    if event.status == Status.PENDENTE and previous and previous.status == Status.AGENDADO:
        text = "Chegou a hora marcada: na fila para envio"
    if event.status in (Status.RECUSADO, Status.CANCELADO) and event.error:
        return event.error  # the suppression list's reason: nobody clicked Recusar or Cancelar
    if event.status == Status.PENDENTE and event.error:
        # A claim given back keeps its attempt (the hourly budget, a worker stopping before
        # any byte left): nothing failed. A retry after a failure is the next attempt.
        given_back = previous is not None and previous.attempt == event.attempt
        text = "Envio adiado" if given_back else f"A tentativa {event.attempt - 1} falhou"
        text += "; nova tentativa marcada"
        if event.next_attempt_at is not None:
            text += f" para {local_time(event.next_attempt_at)}"
    return text


def invite_json(invite: Invite, now: datetime, slow_after_seconds: float) -> dict[str, Any]:
    """The JSON shape of an invite for API clients."""
    text = describe(invite, now, slow_after_seconds)

    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    return {
        "id": invite.public_id,
        "status": invite.status.value,
        "email": invite.email,
        "nome": invite.name,
        "tentativa": invite.attempt,
        "erro": invite.error,
        "mensagem": text.message,
        "mensagem_pessoal": invite.message,  # the sender's Mensagem, as typed
        "criado_em": iso(invite.created_at),
        "atualizado_em": iso(invite.updated_at),
        "enviado_em": iso(invite.sent_at),
        "enviar_em": iso(invite.send_at),
        "lembrete": invite.reminder_status,
        "ocasiao": invite.occasion_title,
        "ocasiao_em": iso(invite.occasion_at),
        "ocasiao_local": invite.occasion_place,
        "lembrete_em": iso(invite.reminded_at),
        "lembrete_pedido_em": iso(invite.reminder_requested_at),
        "proxima_tentativa_em": iso(invite.next_attempt_at)
        if invite.status == Status.PENDENTE
        else None,
        "url": f"/convites/{invite.public_id}",
    }


def invite_detail_json(
    invite: Invite,
    history: list[Event],
    bounces: list[Bounce],
    now: datetime,
    slow_after_seconds: float,
) -> dict[str, Any]:
    """An invite with its history and bounces: ``GET /api/v1/convites/{id}`` and the ``data`` of
    every webhook delivery (``app.webhooks.deliver``)."""
    body = invite_json(invite, now, slow_after_seconds)
    body["historico"] = [
        event_json(event, history[n - 1] if n else None) for n, event in enumerate(history)
    ]
    body["devolucoes"] = [bounce_json(bounce) for bounce in bounces]
    return body


def event_json(event: Event, previous: Event | None = None) -> dict[str, Any]:
    return {
        "id": event.id,
        "status": event.status.value,
        "tentativa": event.attempt,
        "erro": event.error,
        "proxima_tentativa_em": event.next_attempt_at.isoformat()
        if event.next_attempt_at
        else None,
        "em": event.created_at.isoformat(),
        "lembrete": event.reminder,
        "descricao": event_text(event, previous),
    }
