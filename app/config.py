"""Settings, read once from the environment.

Every knob the app has is named here, with its default. A bad value stops start-up with a
message that names the variable (``ConfigError``), never a stack trace deep in a worker.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from email.utils import parseaddr
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

T = TypeVar("T")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

VAR_DIR = Path(os.environ.get("CONVITES_VAR_DIR", "var"))
ENVIRONMENTS = ("development", "test", "production")


class ConfigError(ValueError):
    """A setting has a value the app cannot run with; the message names the variable."""


@dataclass(frozen=True)
class SmtpSettings:
    """Where and how the worker hands mail over (from ``SMTP_URL``)."""

    host: str
    port: int
    username: str | None
    password: str | None
    use_tls: bool  # implicit TLS (smtps://)
    start_tls: bool  # require STARTTLS (smtp+starttls://)
    timeout: float
    pool_size: int  # at most this many connections at once, kept open between messages

    @classmethod
    def from_url(cls, url: str) -> SmtpSettings:
        parts = urlsplit(url)
        schemes = {"smtp": (False, False), "smtp+starttls": (False, True), "smtps": (True, False)}
        if parts.scheme not in schemes or not parts.hostname:
            raise ConfigError(
                "SMTP_URL must look like smtp://user:pass@host:port "
                "(or smtp+starttls://, smtps://); got " + repr(url)
            )
        use_tls, start_tls = schemes[parts.scheme]
        query = parse_qs(parts.query)
        try:
            port = parts.port or (465 if use_tls else 587 if start_tls else 25)
            timeout = float(query.get("timeout", ["30"])[0])
            pool_size = int(query.get("pool", ["10"])[0])
        except ValueError as exc:
            raise ConfigError(f"SMTP_URL has a bad port, timeout or pool: {exc}") from None
        if timeout <= 0:
            raise ConfigError("SMTP_URL timeout must be positive")
        if pool_size < 1:
            raise ConfigError("SMTP_URL pool must be at least 1")
        return cls(
            host=parts.hostname,
            port=port,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            use_tls=use_tls,
            start_tls=start_tls,
            timeout=timeout,
            pool_size=pool_size,
        )


def _parse(env: Mapping[str, str], name: str, default: str, convert: Callable[[str], T]) -> T:
    raw = env.get(name, default)
    try:
        return convert(raw)
    except (ValueError, ConfigError) as exc:
        raise ConfigError(f"{name}={raw!r} is not valid: {exc}") from None


def _checked(convert: Callable[[str], T], ok: Callable[[T], bool], why: str) -> Callable[[str], T]:
    def check(raw: str) -> T:
        value = convert(raw)
        if not ok(value):
            raise ValueError(why)
        return value

    return check


_positive_float = _checked(float, lambda v: v > 0, "must be a positive number of seconds")
_zero_or_more = _checked(float, lambda v: v >= 0, "must be a number of seconds, 0 or more")
_seconds_or_zero = _checked(float, lambda v: 0 <= v <= 60, "must be between 0 and 60 seconds")
_positive_int = _checked(int, lambda v: v >= 1, "must be a whole number of at least 1")
_env_name = _checked(str, ENVIRONMENTS.__contains__, f"must be one of {', '.join(ENVIRONMENTS)}")


def _backoff(raw: str) -> tuple[float, ...]:
    steps = tuple(float(step) for step in raw.split(",") if step.strip())
    if not steps or any(step < 0 for step in steps):
        raise ValueError("must be a comma-separated list of seconds, e.g. 5,30,300")
    return steps


def _percent(raw: str) -> int:
    value = _positive_int(raw)
    if value > 100:
        raise ValueError(f"expected a percentage from 1 to 100, got {raw!r}")
    return value


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _token(when_empty: str) -> Callable[[str], str | None]:
    def check(raw: str) -> str | None:
        if raw and len(raw) < 16:
            raise ValueError(f"must be at least 16 random characters (or empty {when_empty})")
        return raw or None

    return check


def _return_path(raw: str) -> str:
    local, at, domain = raw.strip().rpartition("@")
    if not at or not local or not domain or "+" in local or any(c in raw for c in " <>\r\n"):
        raise ValueError("must be a plain address without '+', e.g. devolucoes@convites.example")
    return f"{local}@{domain.lower()}"


def _host_port(raw: str) -> tuple[str, int]:
    host, colon, port = raw.strip().rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("must be host:port, e.g. 127.0.0.1:2525")
    return host.strip("[]"), int(port)


def _networks(raw: str) -> tuple[Network, ...]:
    # "10.0.0.5, 10.1.0.0/16": addresses or networks of the proxies allowed to speak for a client.
    return tuple(ipaddress.ip_network(part.strip()) for part in raw.split(",") if part.strip())


def _host_names(raw: str) -> tuple[str, ...]:
    names = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    if any(":" in name or "/" in name for name in names):
        raise ValueError("must be host names without scheme or port, e.g. convites.example.com")
    return names


def _url(*schemes: str) -> Callable[[str], str]:
    def check(raw: str) -> str:
        if urlsplit(raw).scheme not in schemes:
            raise ValueError(f"must start with {' or '.join(s + '://' for s in schemes)}")
        return raw

    return check


#: Words that mark a copied example rather than a generated key.
_PLACEHOLDER_WORDS = ("change", "example", "placeholder", "secret", "default", "xxxx")
_MIN_PRODUCTION_KEY = 32


def _check_production_key(key: str) -> None:
    if len(key) < _MIN_PRODUCTION_KEY or any(w in key.lower() for w in _PLACEHOLDER_WORDS):
        raise ConfigError(
            f"SECRET_KEY must be a real random key of at least {_MIN_PRODUCTION_KEY} characters "
            "when APP_ENV=production (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )


def _secret_key(env: Mapping[str, str], app_env: str) -> str:
    key = env.get("SECRET_KEY", "")
    if app_env == "production":
        # Sessions and CSRF tokens are only as good as this key: never a generated or sample one.
        if not key:
            raise ConfigError("SECRET_KEY is required when APP_ENV=production")
        _check_production_key(key)
    if key:
        if len(key) < 16:
            raise ConfigError("SECRET_KEY is too short: use at least 16 random characters")
        return key
    # One person on one machine: keep a generated key under var/ so sessions survive restarts.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        _write_new_key(path)
    key = path.read_text().strip()
    if len(key) < _MIN_PRODUCTION_KEY:
        raise ConfigError(
            f"{path} holds no usable key (empty or under {_MIN_PRODUCTION_KEY} characters): "
            "delete it to have a new one generated, or set SECRET_KEY"
        )
    return key


def _write_new_key(path: Path) -> None:
    """Create the key file 0600 from its first byte, and atomically: no reader ever sees a
    half-written key, and two processes starting together agree on one key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
            handle.flush()
            os.fsync(handle.fileno())
        # A hard link fails if another process won the race: then its key is the key.
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def setting(name: str, default: str, convert: Callable[[str], Any]) -> Any:
    """A field read from the environment variable ``name`` (``default`` when unset)."""
    return field(metadata={"env": (name, default, convert)})


@dataclass(frozen=True)
class Settings:
    """Everything the web, the worker and the CLI need to know about their surroundings."""

    # Read by ``_read`` itself, each from another setting too.
    secret_key: str
    mailbox_dir: Path | None
    return_path: str  # bounces come back to a VERP address of this one
    app_env: str = setting("APP_ENV", "development", _env_name)
    database_url: str = setting(
        "DATABASE_URL",
        f"sqlite+aiosqlite:///{VAR_DIR / 'convites.db'}",
        _url("sqlite+aiosqlite", "postgresql+asyncpg"),
    )
    redis_url: str = setting(
        "REDIS_URL", "redis://localhost:6379/0", _url("redis", "rediss", "unix")
    )
    smtp: SmtpSettings = setting("SMTP_URL", "smtp://localhost:8025", SmtpSettings.from_url)  # noqa: RUF009 (a field(), no default)
    mail_from: str = setting("MAIL_FROM", "Convites <convites@localhost>", str)
    public_url: str = setting("PUBLIC_URL", "http://localhost:8000", lambda raw: raw.rstrip("/"))
    slow_after_seconds: float = setting("SLOW_AFTER_SECONDS", "30", _positive_float)
    sending_lease_seconds: float = setting("SENDING_LEASE_SECONDS", "120", _positive_float)
    max_attempts: int = setting("MAX_ATTEMPTS", "4", _positive_int)
    retry_backoff_seconds: tuple[float, ...] = setting(
        "RETRY_BACKOFF_SECONDS", "5,30,300,1800", _backoff
    )
    worker_heartbeat_seconds: float = setting("WORKER_HEARTBEAT_SECONDS", "5", _positive_float)
    worker_grace_seconds: float = setting("WORKER_GRACE_SECONDS", "30", _positive_float)
    https_only_cookies: bool = setting("HTTPS_ONLY_COOKIES", "false", _bool)
    trust_proxy_headers: bool = setting("TRUST_PROXY_HEADERS", "false", _bool)
    max_body_bytes: int = setting("MAX_BODY_BYTES", "16384", _positive_int)
    sends_per_sender_per_minute: int = setting("SENDS_PER_SENDER_PER_MINUTE", "30", _positive_int)
    sends_per_address_per_minute: int = setting(
        "SENDS_PER_ADDRESS_PER_MINUTE", "120", _positive_int
    )
    # A full batch (BATCH_MAX_ROWS) fits in a day, with room for single invites besides.
    sends_per_sender_per_day: int = setting("SENDS_PER_SENDER_PER_DAY", "1500", _positive_int)
    streams_per_sender: int = setting("STREAMS_PER_SENDER", "10", _positive_int)
    alarm_pending_seconds: float = setting("ALARM_PENDING_SECONDS", "300", _positive_float)
    alarm_check_seconds: float = setting("ALARM_CHECK_SECONDS", "15", _positive_float)
    # No token: the operator page is off (404), never open.
    ops_token: str | None = setting("OPS_TOKEN", "", _token("to turn /operacao off"))
    signin_ttl_seconds: int = setting("SIGNIN_TTL_SECONDS", "900", _positive_int)
    session_ttl_seconds: int = setting("SESSION_TTL_SECONDS", str(30 * 24 * 3600), _positive_int)
    signin_links_per_address_per_hour: int = setting(
        "SIGNIN_LINKS_PER_ADDRESS_PER_HOUR", "5", _positive_int
    )
    signin_links_per_client_per_hour: int = setting(
        "SIGNIN_LINKS_PER_CLIENT_PER_HOUR", "20", _positive_int
    )
    invites_per_recipient_per_day: int = setting(
        "INVITES_PER_RECIPIENT_PER_DAY", "3", _positive_int
    )
    sends_per_hour: int = setting("SENDS_PER_HOUR", "5000", _positive_int)
    sender_share_of_hour_percent: int = setting("SENDER_SHARE_OF_HOUR_PERCENT", "10", _percent)
    bounce_listen: tuple[str, int] = setting("BOUNCE_LISTEN", "127.0.0.1:2525", _host_port)
    streams_per_address: int = setting("STREAMS_PER_ADDRESS", "60", _positive_int)
    streams_per_process: int = setting("STREAMS_PER_PROCESS", "5000", _positive_int)
    stream_max_seconds: float = setting("STREAM_MAX_SECONDS", "3600", _positive_float)
    stream_ping_seconds: float = setting("STREAM_PING_SECONDS", "15", _positive_float)
    metrics_token: str | None = setting(
        "METRICS_TOKEN",
        "",
        _token("for a /metrics open outside production, and in it with METRICS_PUBLIC=true"),
    )
    metrics_public: bool = setting("METRICS_PUBLIC", "false", _bool)
    status_snapshot_seconds: float = setting("STATUS_SNAPSHOT_SECONDS", "2", _seconds_or_zero)
    batch_max_rows: int = setting("BATCH_MAX_ROWS", "1000", _positive_int)
    batch_max_bytes: int = setting("BATCH_MAX_BYTES", str(2 * 1024 * 1024), _positive_int)
    batch_announce_seconds: float = setting("BATCH_ANNOUNCE_SECONDS", "10", _positive_float)
    batch_reviews_per_minute: int = setting("BATCH_REVIEWS_PER_MINUTE", "10", _positive_int)
    allowed_hosts: tuple[str, ...] = setting("ALLOWED_HOSTS", "", _host_names)
    invite_ttl_seconds: int = setting("INVITE_TTL_SECONDS", str(7 * 24 * 3600), _positive_int)
    retention_days: int = setting("RETENTION_DAYS", "180", _positive_int)
    schedule_max_days: int = setting("SCHEDULE_MAX_DAYS", "90", _positive_int)
    reminder_after_seconds: float = setting(
        "REMINDER_AFTER_SECONDS", str(3 * 24 * 3600), _zero_or_more
    )
    reminder_min_gap_seconds: float = setting(
        "REMINDER_MIN_GAP_SECONDS", str(24 * 3600), _zero_or_more
    )
    trusted_proxies: tuple[Network, ...] = setting("TRUSTED_PROXIES", "127.0.0.1,::1", _networks)
    webhook_retry_backoff_seconds: tuple[float, ...] = setting(
        "WEBHOOK_RETRY_BACKOFF_SECONDS", "5,30,300,1800", _backoff
    )
    webhook_max_failures: int = setting("WEBHOOK_MAX_FAILURES", "5", _positive_int)
    webhook_timeout_seconds: float = setting("WEBHOOK_TIMEOUT_SECONDS", "10", _positive_float)
    # Lifts the https-only rule and the private-address guard (app/webhooks/addresses.py):
    # development and tests only (refused with APP_ENV=production).
    webhook_allow_private_networks: bool = setting("WEBHOOK_ALLOW_PRIVATE_NETWORKS", "false", _bool)

    @property
    def is_dev(self) -> bool:
        return self.app_env == "development"

    @property
    def mail_domain(self) -> str:
        """``MAIL_FROM``'s domain: the right-hand side of every Message-ID we write."""
        return mail_domain(self.mail_from)

    def backoff_for(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt number ``failed_attempt`` (1-based) failed."""
        steps = self.retry_backoff_seconds
        return steps[min(failed_attempt, len(steps)) - 1]


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and check every setting; raise ``ConfigError`` naming the first bad variable."""
    env = os.environ if env is None else env
    settings = _read(env)
    if settings.sending_lease_seconds < 2 * settings.smtp.timeout:
        raise ConfigError(
            f"SENDING_LEASE_SECONDS={settings.sending_lease_seconds:g} must be at least twice the "
            f"SMTP timeout ({settings.smtp.timeout:g}s, from SMTP_URL): a send must end inside "
            "its lease, or a slow send would be reported as incerto"
        )
    if settings.app_env == "production" and not settings.public_url.startswith("https://"):
        # Every invitation's List-Unsubscribe URL is under it, and RFC 8058 one-click is
        # only for https: a mail provider never POSTs to a plain http link.
        raise ConfigError(
            f"PUBLIC_URL={settings.public_url} must be an https:// URL when APP_ENV=production"
        )
    return settings


def _read(env: Mapping[str, str]) -> Settings:
    values: dict[str, Any] = {}
    for each in fields(Settings):
        if "env" in each.metadata:
            values[each.name] = _parse(env, *each.metadata["env"])
    app_env = values["app_env"]
    mailbox = env.get("MAILBOX_DIR", "")
    if mailbox and app_env != "development":
        # /caixa shows every message sent: a development tool, never served anywhere else.
        raise ConfigError(
            f"MAILBOX_DIR (the /caixa dev mailbox) needs APP_ENV=development, not {app_env}"
        )
    values["mailbox_dir"] = Path(mailbox) if mailbox else None
    if values["webhook_allow_private_networks"] and app_env == "production":
        # A receiver on the server's own network is how a webhook reaches what it must not.
        raise ConfigError(
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS=true is for development and tests, not production"
        )
    values["secret_key"] = _secret_key(env, app_env)
    return_path = f"devolucoes@{mail_domain(values['mail_from'])}"
    values["return_path"] = _parse(env, "RETURN_PATH", return_path, _return_path)
    return Settings(**values)


def mail_domain(mail_from: str) -> str:
    """The lower-case domain of a ``Name <address>`` (``localhost`` when it names none)."""
    return parseaddr(mail_from)[1].rpartition("@")[2].lower() or "localhost"
