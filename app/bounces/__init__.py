"""Bounces: a 250 is not a delivery either.

Every message leaves with a signed VERP envelope sender (``addresses``); whatever receives bounces
(the SMTP ``receiver`` by default, or a provider's webhook) hands the raw message to
``store.receive``, which keeps it, reads it (``reader``: RFC 3464 with the ``email`` package,
``flufl.bounce`` for the rest) and records what it says (``enviado | incerto → devolvido``,
or a history line). ``reasons`` words the verdicts in pt-BR.
"""
