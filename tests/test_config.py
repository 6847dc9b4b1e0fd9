"""Settings: defaults, and a bad value stops start-up with a message naming the variable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.config import ConfigError, load_settings

BASE = {"SECRET_KEY": "x" * 32, "DATABASE_URL": "sqlite+aiosqlite:///tmp/x.db"}


def test_defaults_match_the_documented_values() -> None:
    settings = load_settings(BASE)

    assert settings.slow_after_seconds == 30
    assert settings.sending_lease_seconds == 120
    assert settings.max_attempts == 4
    assert settings.retry_backoff_seconds == (5, 30, 300, 1800)
    assert settings.worker_heartbeat_seconds == 5
    assert settings.alarm_pending_seconds == 300
    assert settings.alarm_check_seconds == 15
    assert settings.ops_token is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SLOW_AFTER_SECONDS", "soon"),
        ("SENDING_LEASE_SECONDS", "-1"),
        ("MAX_ATTEMPTS", "0"),
        ("RETRY_BACKOFF_SECONDS", "5,x"),
        ("WORKER_HEARTBEAT_SECONDS", ""),
        ("SMTP_URL", "http://mail"),
        ("DATABASE_URL", "mysql://db"),
        ("REDIS_URL", "localhost:6379"),
        ("APP_ENV", "staging"),
        ("ALARM_PENDING_SECONDS", "0"),
        ("ALARM_CHECK_SECONDS", "never"),
        ("OPS_TOKEN", "short"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings({**BASE, name: value})


def test_production_refuses_to_start_without_a_secret_key() -> None:
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        load_settings({"APP_ENV": "production"})


def test_production_refuses_a_public_url_without_https() -> None:
    """Every invitation's one-click opt-out URL is under PUBLIC_URL; RFC 8058 wants https."""
    key = "Zq3v8K1xw9Lr2Tn6Yp0Bc5Hd7Jf4Mg1Qs8Vk3We6Ra"
    env = {"APP_ENV": "production", "SECRET_KEY": key}
    with pytest.raises(ConfigError, match="PUBLIC_URL"):
        load_settings({**env, "PUBLIC_URL": "http://convites.example.com"})
    assert load_settings({**env, "PUBLIC_URL": "https://convites.example.com"}).public_url


def test_a_lease_shorter_than_a_send_is_refused() -> None:
    with pytest.raises(ConfigError, match="SENDING_LEASE_SECONDS"):
        load_settings({**BASE, "SENDING_LEASE_SECONDS": "10", "SMTP_URL": "smtp://m:25?timeout=30"})


def test_smtp_url_carries_credentials_and_tls_mode() -> None:
    smtp = load_settings({**BASE, "SMTP_URL": "smtps://ana:s%40nha@mail.exemplo.com"}).smtp

    assert (smtp.host, smtp.port, smtp.username, smtp.password) == (
        "mail.exemplo.com",
        465,
        "ana",
        "s@nha",
    )
    assert smtp.use_tls and not smtp.start_tls


def test_the_command_line_reports_a_bad_setting_without_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "migrate"],
        env={"PATH": "/usr/bin:/bin", "MAX_ATTEMPTS": "many", "SECRET_KEY": "x" * 32},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )

    assert result.returncode == 2
    assert "MAX_ATTEMPTS" in result.stderr and "Traceback" not in result.stderr
