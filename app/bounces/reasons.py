"""What a bounce means, in plain pt-BR, with its code and the host that reported it.

The sentence is stored (``invites.error`` for ``devolvido``, ``bounces.reason``), like the
mailer's reasons, so the page, the history, ``/operacao`` and the CLI all say the same thing.
"""

from __future__ import annotations

import re

_SAID = "O servidor do destinatário informou que"

#: Enhanced status codes (RFC 3463) people meet, most specific first.
_BY_CODE = {
    "5.1.1": f"{_SAID} a caixa não existe",
    "5.1.10": f"{_SAID} o endereço não existe",
    "5.1.2": f"{_SAID} o domínio do endereço não existe",
    "5.1.3": f"{_SAID} o endereço está mal escrito",
    "5.1.6": f"{_SAID} a caixa mudou de endereço",
    "5.2.1": f"{_SAID} a caixa está desativada",
    "5.2.2": f"{_SAID} a caixa está cheia",
    "4.2.2": f"{_SAID} a caixa está cheia",
    "5.2.3": f"{_SAID} a mensagem é grande demais para a caixa",
    "4.4.7": f"{_SAID} desistiu de entregar depois de tentar por muito tempo",
    "5.4.4": f"{_SAID} não encontrou como chegar ao domínio",
}
_BY_CLASS_AND_SUBJECT = {
    "5.7": f"{_SAID} recusou a mensagem por política (spam ou segurança)",
    "4.7": f"{_SAID} adiou a mensagem por política (spam ou limite de envio)",
    "5.4": f"{_SAID} não conseguiu encaminhar a mensagem até a caixa",
    "4.4": f"{_SAID} ainda não conseguiu falar com o servidor da caixa",
    "5.2": f"{_SAID} a caixa não pode receber mensagens",
    "4.2": f"{_SAID} a caixa não pode receber mensagens agora",
}
_BY_CLASS = {
    "5": f"{_SAID} não foi possível entregar a mensagem",
    "4": f"{_SAID} a entrega está atrasada e será tentada de novo",
}
_NO_CODE = "O servidor do destinatário devolveu a mensagem"


_GAVE_UP = f"{_SAID} desistiu de entregar a mensagem"


def meaning(status_code: str | None, *, final: bool = True) -> str:
    """The sentence for an enhanced status code such as ``5.1.1`` (without the code).

    ``final``: the report says the server gave up (``Action: failed``), even with a 4.x.x code.
    """
    if not status_code:
        return _NO_CODE
    code_class, _, rest = status_code.partition(".")
    if final and code_class == "4" and status_code not in _BY_CODE:
        return _GAVE_UP
    subject = rest.partition(".")[0]
    return (
        _BY_CODE.get(status_code)
        or _BY_CLASS_AND_SUBJECT.get(f"{code_class}.{subject}")
        or _BY_CLASS.get(code_class, _NO_CODE)
    )


def bounce_reason(
    status_code: str | None, reporting_host: str | None, *, final: bool = True
) -> str:
    """``O servidor do destinatário informou que a caixa não existe (5.1.1). Informado por
    mx.exemplo.com.`` — what the person reads on a ``devolvido`` row."""
    text = meaning(status_code, final=final)
    text += f" ({status_code})." if status_code else "."
    if reporting_host:
        text += f" Informado por {reporting_host}."
    return text


#: What ``bounce_reason`` adds to the sentence: the code, and who reported it.
_CODE = re.compile(r" \([245]\.\d{1,3}\.\d{1,3}\)(?=\.)")
_REPORTED_BY = re.compile(r" Informado por \S+\.")


def in_plain_words(reason: str) -> str:
    """A ``bounce_reason`` (and what follows it) without its code and reporting host, for the
    row's sentence (the history and ``/operacao`` keep them); any other text as it is."""
    return _REPORTED_BY.sub("", _CODE.sub("", reason))


#: History lines for bounces that change no status (``app.bounces.store.Outcome``).
DELAYED_PREFIX = "atrasado: "
UNCHANGED_PREFIX = "devolução recebida, sem mudança no convite: "
STALE_PREFIX = "devolução de um envio anterior (o convite já foi reenviado): "
UNREADABLE = "recebemos uma devolução que não conseguimos ler; ela foi guardada para análise."
OTHER_PREFIX = "aviso de entrega recebido: "
COMPLAINT_PREFIX = "reclamação de spam: "
UNSUBSCRIBE_PREFIX = "pedido de descadastro por e-mail: "


def history_line(kind: str, outcome: str, reason: str | None) -> str:
    """How one kept bounce reads in its invite's history (``app.bounces.history.Bounce``)."""
    if kind == "unreadable":
        return UNREADABLE
    text = reason or ""
    if outcome == "devolvido":
        return f"devolvido: {text}"
    if outcome == "stale":
        return STALE_PREFIX + text
    prefixes = {
        "delayed": DELAYED_PREFIX,
        "other": OTHER_PREFIX,
        "complaint": COMPLAINT_PREFIX,
        "unsubscribe": UNSUBSCRIBE_PREFIX,
    }
    return prefixes.get(kind, UNCHANGED_PREFIX) + text
