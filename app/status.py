"""The invite statuses, named once. These are the words the person and QA see."""

from enum import StrEnum


class Status(StrEnum):
    PENDENTE = "pendente"  # accepted, waiting for a worker (also between retries)
    ENVIANDO = "enviando"  # a worker claimed it and is sending now
    ENVIADO = "enviado"  # the mail server accepted the message
    FALHOU = "falhou"  # permanent failure or attempts exhausted; `error` says why
    INCERTO = "incerto"  # a worker died mid-send; never re-sent automatically
    DEVOLVIDO = "devolvido"  # accepted with a 250, then bounced (a delivery status notification)


#: States the person may ask to send again.
RESENDABLE = (Status.FALHOU, Status.INCERTO)

#: States a bounce may turn into ``devolvido`` (any other state keeps the bounce as history).
BOUNCEABLE = (Status.ENVIADO, Status.INCERTO)

#: States the person may correct (a new address) and send again.
CORRECTABLE = (Status.DEVOLVIDO,)


class FailureClass(StrEnum):
    """Why an invite stopped short of ``enviado``, recorded on its ``falhou``/``incerto`` event."""

    TRANSIENT_EXHAUSTED = "transient_exhausted"  # every automatic attempt got a 4xx/timeout
    PERMANENT = "permanent"  # 5xx, refused recipient, bad address, internal error
    UNCERTAIN = "uncertain"  # the connection broke mid-DATA, or a lease expired (incerto)


#: An invite in one of these states makes a second one to the same address a duplicate (409).
ON_ITS_WAY = (Status.PENDENTE, Status.ENVIANDO, Status.ENVIADO)
