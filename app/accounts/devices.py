"""A session's device in plain words, from the User-Agent it signed in with ("Chrome no
Android"): enough for a person to recognise their own phone or laptop on ``/conta``, not a
fingerprint. A User-Agent is whatever the client says, so the page calls it what it is: the
device *as the browser described itself*."""

from __future__ import annotations

import re

UNKNOWN = "Aparelho desconhecido"

# Order matters: most browsers also name the ones they are built on ("Edg/… Chrome/… Safari/…").
_BROWSERS = [
    (r"\bEdg(?:e|A|iOS)?/", "Edge"),
    (r"\b(?:OPR|Opera)/", "Opera"),
    (r"\bSamsungBrowser/", "Samsung Internet"),
    (r"\b(?:Firefox|FxiOS)/", "Firefox"),
    (r"\b(?:HeadlessChrome|Chrome|Chromium|CriOS)/", "Chrome"),
    (r"\bSafari/", "Safari"),
    (r"\bcurl/", "curl"),
    (r"\bpython-(?:httpx|requests)/|\bPython-urllib/", "um programa em Python"),
]
_SYSTEMS = [
    (r"\biPhone\b", "iPhone"),
    (r"\biPad\b", "iPad"),
    (r"\bAndroid\b", "Android"),
    (r"\bCrOS\b", "ChromeOS"),
    (r"\bWindows\b", "Windows"),
    (r"\bMac OS X\b|\bMacintosh\b", "Mac"),
    (r"\bLinux\b", "Linux"),
]


def _first(patterns: list[tuple[str, str]], text: str) -> str | None:
    return next((name for pattern, name in patterns if re.search(pattern, text)), None)


def describe(user_agent: str | None) -> str:
    """``Chrome no Android``, ``Safari no iPhone``, ``Firefox``, ``Aparelho desconhecido``."""
    text = user_agent or ""
    browser, system = _first(_BROWSERS, text), _first(_SYSTEMS, text)
    if browser and system:
        return f"{browser} no {system}"
    return browser or system or UNKNOWN
