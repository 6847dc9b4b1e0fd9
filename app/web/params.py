"""Numbers in query strings and headers, parsed strictly: ASCII digits only, bounded length.

(``str.isdigit()`` accepts "²", which ``int()`` refuses): anything else is a 400, never a 500.
"""

from __future__ import annotations

import re

_EVENT_ID = re.compile(r"[0-9]{1,18}")


class BadParameter(ValueError):
    """A parameter is present but not a number we accept; ``message`` is pt-BR."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def whole_number(raw: str | None, what: str) -> int | None:
    """``raw`` as a non-negative int; ``None`` when absent or blank; ``BadParameter`` otherwise."""
    if raw is None or not raw.strip(" \t"):
        return None
    value = raw.strip(" \t")
    if not _EVENT_ID.fullmatch(value):
        raise BadParameter(f"O valor de {what} precisa ser um número (só algarismos 0–9).")
    return int(value)
