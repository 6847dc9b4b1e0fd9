"""Every setting the app reads is documented in docs/settings.md (Datasette's habit)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_variable_read_in_config_is_in_a_settings_table_of_the_docs() -> None:
    config = (ROOT / "app" / "config.py").read_text()
    read = set(re.findall(r'(?:_parse\(\s*env,|setting\()\s*"([A-Z_]+)"', config))
    read |= set(re.findall(r'env\.get\("([A-Z_]+)"', config))
    settings = (ROOT / "docs" / "settings.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", settings, flags=re.MULTILINE))

    assert len(read) > 20
    assert read - documented == set()
