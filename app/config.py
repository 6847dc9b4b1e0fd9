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
from dataclasses import dataclass
from email.utils import parseaddr
from pathlib import Path
from typing import TypeVar
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
    pool_size: int = 10  # at most this many connections at once, kept open between messages

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


@dataclass(frozen=True)
class Settings:
    """Everything the web, the worker and the CLI need to know about their surroundings."""

    app_env: str
    database_url: str
    redis_url: str
    smtp: SmtpSettings
    mail_from: str
    secret_key: str
    public_url: str
    slow_after_seconds: float
    sending_lease_seconds: float
    max_attempts: int
    retry_backoff_seconds: tuple[float, ...]
    worker_heartbeat_seconds: float
    worker_grace_seconds: float
    mailbox_dir: Path | None
    https_only_cookies: bool
    trust_proxy_headers: bool
    max_body_bytes: int
    sends_per_sender_per_minute: int
    sends_per_address_per_minute: int
    sends_per_sender_per_day: int
    streams_per_sender: int
    alarm_pending_seconds: float
    alarm_check_seconds: float
    ops_token: str | None
    signin_ttl_seconds: int
    session_ttl_seconds: int
    signin_links_per_address_per_hour: int
    signin_links_per_client_per_hour: int
    invites_per_recipient_per_day: int
    sends_per_hour: int
    return_path: str = "devolucoes@localhost"
    bounce_listen: tuple[str, int] = ("127.0.0.1", 2525)
    streams_per_address: int = 60
    streams_per_process: int = 5000
    stream_max_seconds: float = 3600.0
    stream_ping_seconds: float = 15.0
    metrics_token: str | None = None
    metrics_public: bool = False
    status_snapshot_seconds: float = 2.0
    sender_share_of_hour_percent: int = 10
    batch_max_rows: int = 1000
    batch_max_bytes: int = 2 * 1024 * 1024
    batch_announce_seconds: float = 10.0
    batch_reviews_per_minute: int = 10
    allowed_hosts: tuple[str, ...] = ()
    invite_ttl_seconds: int = 7 * 24 * 3600
    trusted_proxies: tuple[Network, ...] = (
        ipaddress.ip_network("127.0.0.1"),
        ipaddress.ip_network("::1"),
    )

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


def _parse(env: Mapping[str, str], name: str, default: str, convert: Callable[[str], T]) -> T:
    raw = env.get(name, default)
    try:
        return convert(raw)
    except (ValueError, ConfigError) as exc:
        raise ConfigError(f"{name}={raw!r} is not valid: {exc}") from None


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError("must be a positive number of seconds")
    return value


def _seconds_or_zero(raw: str) -> float:
    value = float(raw)
    if not 0 <= value <= 60:
        raise ValueError("must be between 0 and 60 seconds")
    return value


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be a whole number of at least 1")
    return value


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


def _ops_token(raw: str) -> str | None:
    # No token: the operator page is off (404), never open.
    if not raw:
        return None
    if len(raw) < 16:
        raise ValueError("must be at least 16 random characters (or empty to turn /operacao off)")
    return raw


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


def _metrics_token(raw: str) -> str | None:
    if not raw:
        return None
    if len(raw) < 16:
        raise ValueError(
            "must be at least 16 random characters (or empty: /metrics is then public outside "
            "production, and in production only with METRICS_PUBLIC=true)"
        )
    return raw


def _networks(raw: str) -> tuple[Network, ...]:
    # "10.0.0.5, 10.1.0.0/16": addresses or networks of the proxies allowed to speak for a client.
    return tuple(ipaddress.ip_network(part.strip()) for part in raw.split(",") if part.strip())


def _host_names(raw: str) -> tuple[str, ...]:
    names = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    if any(":" in name or "/" in name for name in names):
        raise ValueError("must be host names without scheme or port, e.g. convites.example.com")
    return names


def _env_name(raw: str) -> str:
    if raw not in ENVIRONMENTS:
        raise ValueError(f"must be one of {', '.join(ENVIRONMENTS)}")
    return raw


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
    return settings


def _read(env: Mapping[str, str]) -> Settings:
    app_env = _parse(env, "APP_ENV", "development", _env_name)
    mailbox = env.get("MAILBOX_DIR", "")
    if mailbox and app_env != "development":
        # /caixa shows every message sent: a development tool, never served anywhere else.
        raise ConfigError(
            f"MAILBOX_DIR (the /caixa dev mailbox) needs APP_ENV=development, not {app_env}"
        )
    mail_from = env.get("MAIL_FROM", "Convites <convites@localhost>")
    return Settings(
        app_env=app_env,
        database_url=_parse(
            env,
            "DATABASE_URL",
            f"sqlite+aiosqlite:///{VAR_DIR / 'convites.db'}",
            _url("sqlite+aiosqlite", "postgresql+asyncpg"),
        ),
        redis_url=_parse(
            env, "REDIS_URL", "redis://localhost:6379/0", _url("redis", "rediss", "unix")
        ),
        smtp=_parse(env, "SMTP_URL", "smtp://localhost:8025", SmtpSettings.from_url),
        mail_from=mail_from,
        secret_key=_secret_key(env, app_env),
        public_url=env.get("PUBLIC_URL", "http://localhost:8000").rstrip("/"),
        slow_after_seconds=_parse(env, "SLOW_AFTER_SECONDS", "30", _positive_float),
        sending_lease_seconds=_parse(env, "SENDING_LEASE_SECONDS", "120", _positive_float),
        max_attempts=_parse(env, "MAX_ATTEMPTS", "4", _positive_int),
        retry_backoff_seconds=_parse(env, "RETRY_BACKOFF_SECONDS", "5,30,300,1800", _backoff),
        worker_heartbeat_seconds=_parse(env, "WORKER_HEARTBEAT_SECONDS", "5", _positive_float),
        worker_grace_seconds=_parse(env, "WORKER_GRACE_SECONDS", "30", _positive_float),
        mailbox_dir=Path(mailbox) if mailbox else None,
        https_only_cookies=_parse(env, "HTTPS_ONLY_COOKIES", "false", _bool),
        trust_proxy_headers=_parse(env, "TRUST_PROXY_HEADERS", "false", _bool),
        max_body_bytes=_parse(env, "MAX_BODY_BYTES", "16384", _positive_int),
        sends_per_sender_per_minute=_parse(env, "SENDS_PER_SENDER_PER_MINUTE", "30", _positive_int),
        sends_per_address_per_minute=_parse(
            env, "SENDS_PER_ADDRESS_PER_MINUTE", "120", _positive_int
        ),
        # A full batch (BATCH_MAX_ROWS) fits in a day, with room for single invites besides.
        sends_per_sender_per_day=_parse(env, "SENDS_PER_SENDER_PER_DAY", "1500", _positive_int),
        streams_per_sender=_parse(env, "STREAMS_PER_SENDER", "10", _positive_int),
        alarm_pending_seconds=_parse(env, "ALARM_PENDING_SECONDS", "300", _positive_float),
        alarm_check_seconds=_parse(env, "ALARM_CHECK_SECONDS", "15", _positive_float),
        ops_token=_parse(env, "OPS_TOKEN", "", _ops_token),
        signin_ttl_seconds=_parse(env, "SIGNIN_TTL_SECONDS", "900", _positive_int),
        session_ttl_seconds=_parse(env, "SESSION_TTL_SECONDS", str(30 * 24 * 3600), _positive_int),
        signin_links_per_address_per_hour=_parse(
            env, "SIGNIN_LINKS_PER_ADDRESS_PER_HOUR", "5", _positive_int
        ),
        signin_links_per_client_per_hour=_parse(
            env, "SIGNIN_LINKS_PER_CLIENT_PER_HOUR", "20", _positive_int
        ),
        invites_per_recipient_per_day=_parse(
            env, "INVITES_PER_RECIPIENT_PER_DAY", "3", _positive_int
        ),
        sends_per_hour=_parse(env, "SENDS_PER_HOUR", "5000", _positive_int),
        sender_share_of_hour_percent=_parse(env, "SENDER_SHARE_OF_HOUR_PERCENT", "10", _percent),
        # Bounces come back to a VERP address of this one (app.bounces.addresses).
        return_path=_parse(
            env, "RETURN_PATH", f"devolucoes@{mail_domain(mail_from)}", _return_path
        ),
        bounce_listen=_parse(env, "BOUNCE_LISTEN", "127.0.0.1:2525", _host_port),
        streams_per_address=_parse(env, "STREAMS_PER_ADDRESS", "60", _positive_int),
        streams_per_process=_parse(env, "STREAMS_PER_PROCESS", "5000", _positive_int),
        stream_max_seconds=_parse(env, "STREAM_MAX_SECONDS", "3600", _positive_float),
        stream_ping_seconds=_parse(env, "STREAM_PING_SECONDS", "15", _positive_float),
        metrics_token=_parse(env, "METRICS_TOKEN", "", _metrics_token),
        metrics_public=_parse(env, "METRICS_PUBLIC", "false", _bool),
        status_snapshot_seconds=_parse(env, "STATUS_SNAPSHOT_SECONDS", "2", _seconds_or_zero),
        batch_max_rows=_parse(env, "BATCH_MAX_ROWS", "1000", _positive_int),
        batch_max_bytes=_parse(env, "BATCH_MAX_BYTES", str(2 * 1024 * 1024), _positive_int),
        batch_announce_seconds=_parse(env, "BATCH_ANNOUNCE_SECONDS", "10", _positive_float),
        batch_reviews_per_minute=_parse(env, "BATCH_REVIEWS_PER_MINUTE", "10", _positive_int),
        allowed_hosts=_parse(env, "ALLOWED_HOSTS", "", _host_names),
        invite_ttl_seconds=_parse(env, "INVITE_TTL_SECONDS", str(7 * 24 * 3600), _positive_int),
        trusted_proxies=_parse(env, "TRUSTED_PROXIES", "127.0.0.1,::1", _networks),
    )


def mail_domain(mail_from: str) -> str:
    """The lower-case domain of a ``Name <address>`` (``localhost`` when it names none)."""
    return parseaddr(mail_from)[1].rpartition("@")[2].lower() or "localhost"
