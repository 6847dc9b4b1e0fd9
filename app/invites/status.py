"""The invite statuses, named once. These are the words the person and QA see."""

from enum import StrEnum


class Status(StrEnum):
    AGENDADO = "agendado"  # accepted for a later moment (``send_at``); pendente at its time
    PENDENTE = "pendente"  # accepted, waiting for a worker (also between retries)
    ENVIANDO = "enviando"  # a worker claimed it and is sending now
    ENVIADO = "enviado"  # the mail server accepted the message
    FALHOU = "falhou"  # permanent failure or attempts exhausted; `error` says why
    INCERTO = "incerto"  # a worker died mid-send; never re-sent automatically
    DEVOLVIDO = "devolvido"  # accepted with a 250, then bounced (a delivery status notification)
    ACEITO = "aceito"  # the invitee opened the link and accepted (final)
    RECUSADO = "recusado"  # the invitee declined (final for the link; the sender may re-send)
    EXPIRADO = "expirado"  # INVITE_TTL_SECONDS passed with no answer; the link answers 410
    CANCELADO = "cancelado"  # the sender called it off before an answer; never sent if pendente


#: Each row's badge (and a batch's counters): a ``pendente`` one reads "Enviando" (received,
#: on its way) unless sending is paused, when it reads ``PAUSED_LABEL``.
LABELS = {
    Status.AGENDADO: "Agendado",
    Status.PENDENTE: "Enviando",
    Status.ENVIANDO: "Enviando",
    Status.ENVIADO: "Enviado",
    Status.FALHOU: "Falhou",
    Status.INCERTO: "Incerto",
    Status.DEVOLVIDO: "Devolvido",
    Status.ACEITO: "Aceito",
    Status.RECUSADO: "Recusado",
    Status.EXPIRADO: "Expirado",
    Status.CANCELADO: "Cancelado",
}
PAUSED_LABEL = "Pausado"

#: States the person may ask to send again (each send carries a new link; the old one is 410).
RESENDABLE = (Status.FALHOU, Status.INCERTO, Status.EXPIRADO, Status.RECUSADO, Status.CANCELADO)

#: States an operator's bulk retry may send again: stopped by the mail pipeline, not a person.
RETRYABLE_IN_BULK = (Status.FALHOU, Status.INCERTO)

#: States the invitee's link may answer: the mail left (or may have; a click proves it arrived).
#: Either answer is final for the link: whoever else holds a forwarded link cannot turn the
#: invitee's "no" into a "yes". Changing one's mind after Recusar is a new invitation (the
#: sender may re-send a ``recusado`` invite, with a new link).
ANSWERABLE = (Status.ENVIADO, Status.INCERTO, Status.DEVOLVIDO)

#: States the sender may cancel: not answered yet, and no worker in the middle of sending it.
CANCELLABLE = (
    Status.AGENDADO,
    Status.PENDENTE,
    Status.ENVIADO,
    Status.INCERTO,
    Status.FALHOU,
    Status.DEVOLVIDO,
)

#: States whose moment of sending the sender may still change: not released to the queue yet.
RESCHEDULABLE = (Status.AGENDADO,)

#: States the sweep expires ``INVITE_TTL_SECONDS`` after the mail left (or may have left).
EXPIRABLE = (Status.ENVIADO, Status.INCERTO)

#: States a bounce may turn into ``devolvido`` (any other state keeps the bounce as history).
BOUNCEABLE = (Status.ENVIADO, Status.INCERTO)

#: States in which this attempt's mail may sit in a mailbox whose owner can report it as spam
#: or opt out by mail (the bounce receiver takes its return path); only ``BOUNCEABLE`` ones
#: turn ``devolvido``.
REPORTABLE = (*BOUNCEABLE, Status.ACEITO, Status.RECUSADO, Status.EXPIRADO, Status.CANCELADO)

#: States the person may correct (a new address) and send again.
CORRECTABLE = (Status.DEVOLVIDO,)


class FailureClass(StrEnum):
    """Why an invite stopped short of ``enviado``, recorded on its ``falhou``/``incerto`` event."""

    TRANSIENT_EXHAUSTED = "transient_exhausted"  # every automatic attempt got a 4xx/timeout
    PERMANENT = "permanent"  # 5xx, refused recipient, bad address, internal error
    UNCERTAIN = "uncertain"  # the connection broke mid-DATA, or a lease expired (incerto)


#: An invite in one of these states makes a second one to the same address a duplicate (409).
ON_ITS_WAY = (Status.AGENDADO, Status.PENDENTE, Status.ENVIANDO, Status.ENVIADO, Status.ACEITO)

#: Where such an invite is, to end "o convite …" (a status word alone reads wrong there:
#: "está enviando", "está pendente", "está enviado").
WHERE_IT_IS = {
    Status.AGENDADO: "está agendado",
    Status.PENDENTE: "está na fila para envio",
    Status.ENVIANDO: "está sendo enviado agora",
    Status.ENVIADO: "já foi enviado",
    Status.ACEITO: "já foi aceito",
}

#: The summary line above "Meus convites": scheduled, on their way out (badge "Enviando", or
#: "Pausado" for a ``pendente`` one while sending is paused), waiting for an answer, and needing
#: the sender.
SCHEDULED = (Status.AGENDADO,)
ON_THE_WAY_OUT = (Status.PENDENTE, Status.ENVIANDO)
AWAITING_ANSWER = (Status.ENVIADO,)
NEEDS_ATTENTION = (Status.FALHOU, Status.INCERTO, Status.DEVOLVIDO)
