"""Every setting the app reads is in the README's settings table (Datasette's habit)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_variable_read_in_config_is_in_the_readme_settings_table() -> None:
    config = (ROOT / "app" / "config.py").read_text()
    read = set(re.findall(r'_parse\(\s*env,\s*"([A-Z_]+)"', config))
    read |= set(re.findall(r'env\.get\("([A-Z_]+)"', config))
    readme = (ROOT / "README.md").read_text()
    table = set(re.findall(r"^\| `([A-Z_]+)` \|", readme, flags=re.MULTILINE))

    assert len(read) > 20
    assert read - table == set()
