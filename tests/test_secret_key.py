"""The generated secret key file (dev and test only): private from its first byte, atomic,
and refused when it holds no usable key."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app import config
from app.config import ConfigError, load_settings

ENV = {"APP_ENV": "development", "DATABASE_URL": "sqlite+aiosqlite:///tmp/x.db"}


@pytest.fixture
def var_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(config, "VAR_DIR", tmp_path)
    return tmp_path


def test_a_generated_key_file_is_private_and_reused(var_dir: Path) -> None:
    first = load_settings(ENV).secret_key

    mode = stat.S_IMODE((var_dir / "secret_key").stat().st_mode)
    assert mode == 0o600
    assert len(first) >= 32
    assert load_settings(ENV).secret_key == first
    assert [p.name for p in var_dir.iterdir()] == ["secret_key"]  # no temporary file left


def test_the_key_file_is_never_readable_by_others_even_while_being_written(
    var_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A permissive umask: a file created first and chmod-ed later would be 0644 for a moment.
    seen: list[int] = []
    real_link = os.link

    def spy_link(source: os.PathLike[str] | str, target: os.PathLike[str] | str) -> None:
        seen.append(stat.S_IMODE(os.stat(source).st_mode))
        real_link(source, target)

    monkeypatch.setattr(os, "link", spy_link)
    old = os.umask(0o022)
    try:
        load_settings(ENV)
    finally:
        os.umask(old)
    assert seen == [0o600]


@pytest.mark.parametrize("content", ["", "   \n", "short-key"])
def test_an_empty_or_short_key_file_stops_start_up(var_dir: Path, content: str) -> None:
    (var_dir / "secret_key").write_text(content)

    with pytest.raises(ConfigError, match="secret_key"):
        load_settings(ENV)
