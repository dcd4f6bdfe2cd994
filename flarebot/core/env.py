"""Typed access to Flarebot's configuration, all of which comes from the environment.

Every setting has one `FLAREBOT_*` (or conventional) name here; secrets may instead be
given as a path in `<NAME>_FILE`. Settings modules and the process supervisor read
configuration only through this module, so nothing exists only in production.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# The embedded database, under the data dir, when DATABASE_URL is not set.
SQLITE_FILE = "flarebot.sqlite3"
# One worker process: its one event loop streams every turn, and each further process
# holds its own copy of Django and the SDKs (docs/architecture.md has the figures).
# More: FLAREBOT_WORKER_PROCESSES.
DEFAULT_WORKER_PROCESSES = 1


class ConfigurationError(Exception):
    """The environment holds a value Flarebot cannot run with."""


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str) -> str:
    """Return a string setting or its default."""
    return _raw(name) or default


def env_int(name: str, default: int, *, minimum: int = 0, maximum: int = 2**31) -> int:
    """Return an integer setting, refusing values outside [minimum, maximum]."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number") from None
    if not minimum <= value <= maximum:
        raise ConfigurationError(f"{name} must be between {minimum} and {maximum}")
    return value


def env_bool(name: str, default: bool) -> bool:
    """Return a boolean setting written as 1/0, true/false, yes/no or on/off."""
    raw = _raw(name)
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigurationError(f"{name} must be true or false")


def env_secret(name: str) -> str | None:
    """Return a secret from NAME or from the file named by NAME_FILE, never both."""
    direct = _raw(name)
    file_path = _raw(f"{name}_FILE")
    if direct and file_path:
        raise ConfigurationError(f"set {name} or {name}_FILE, not both")
    if file_path:
        try:
            return Path(file_path).read_text(encoding="utf-8").strip() or None
        except OSError:
            raise ConfigurationError(f"{name}_FILE cannot be read") from None
    return direct


def _normalise_origin(raw: str, name: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ConfigurationError(f"{name} must look like https://host[:port]")
    if parts.path not in {"", "/"} or parts.query or parts.fragment or parts.username:
        raise ConfigurationError(f"{name} must be an origin only: scheme, host and port")
    default_port = 443 if parts.scheme == "https" else 80
    port = parts.port or default_port
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    suffix = "" if port == default_port else f":{port}"
    return f"{parts.scheme}://{host}{suffix}"


@dataclass(frozen=True)
class FlarebotConfig:
    """The environment, read once and checked."""

    mode: str
    data_dir: Path
    database_url: str | None
    redis_url: str
    redis_url_explicit: bool  # set by the operator (never silently replaced), not the default
    port: int
    bind: str
    origin: str
    hsts_preload: bool
    anthropic_base_url: str
    openai_base_url: str
    local_base_url: str | None
    local_models: tuple[str, ...]
    stream_idle_timeout: float
    worker_concurrency: int
    worker_processes: int
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    log_level: str  # what `make run` shows: warning (ready lines and warnings), info or debug (everything)
    # Exact (host, port) pairs the web tools may reach even when private (tools.network.policy).
    network_allow: tuple[tuple[str, int], ...] = ()
    search_model: str = "gpt-5.4-mini"
    chromium: str | None = None  # the operator's browser for browser_read; else it is looked for
    # Seconds a paused browser task's Chromium context is kept for its resumption.
    browser_task_keep: float = 600.0
    # The Docker network shell containers join; None: no network at all (the default).
    shell_network: str | None = None

    @property
    def production(self) -> bool:
        return self.mode == "production"

    @property
    def origin_host(self) -> str:
        return urlsplit(self.origin).hostname or ""

    @property
    def secure_origin(self) -> bool:
        return self.origin.startswith("https://")


def redis_namespace(url: str) -> str:
    """The prefix of the pub/sub channels of the instance using this Redis database.

    Pub/sub channels are server-wide in Redis, not per database: two instances (or test
    stacks) on one server with different databases would otherwise hear each other's
    group messages and cancellations. The database number (the URL's path, 0 when absent)
    keeps them apart.
    """
    path = urlsplit(url).path.strip("/")
    return f"flarebot:{int(path) if path.isdigit() else 0}"


def load_config() -> FlarebotConfig:
    """Read and validate the whole configuration."""
    mode = env_str("FLAREBOT_MODE", "local")
    if mode not in {"local", "production"}:
        raise ConfigurationError("FLAREBOT_MODE must be local or production")
    data_dir = Path(env_str("FLAREBOT_DATA_DIR", str(BASE_DIR / "var"))).resolve()
    port = env_int("FLAREBOT_PORT", 8000, minimum=1, maximum=65535)
    origin_raw = _raw("FLAREBOT_ORIGIN")
    if origin_raw is None:
        if mode == "production":
            raise ConfigurationError("FLAREBOT_ORIGIN is required in production mode")
        origin_raw = f"http://127.0.0.1:{port}"
    return FlarebotConfig(
        mode=mode,
        data_dir=data_dir,
        database_url=env_secret("DATABASE_URL"),
        redis_url=env_str("REDIS_URL", "redis://127.0.0.1:6379/0"),
        redis_url_explicit=_raw("REDIS_URL") is not None,
        port=port,
        bind=env_str("FLAREBOT_BIND", "127.0.0.1"),
        origin=_normalise_origin(origin_raw, "FLAREBOT_ORIGIN"),
        hsts_preload=env_bool("FLAREBOT_HSTS_PRELOAD", True),
        anthropic_base_url=env_str("FLAREBOT_ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
        openai_base_url=env_str("FLAREBOT_OPENAI_BASE_URL", "https://api.openai.com/v1"),
        local_base_url=_raw("FLAREBOT_LOCAL_BASE_URL"),
        local_models=_local_models(),
        stream_idle_timeout=float(env_int("FLAREBOT_STREAM_IDLE_TIMEOUT", 60, minimum=1, maximum=600)),
        worker_concurrency=env_int("FLAREBOT_WORKER_CONCURRENCY", 128, minimum=1, maximum=1024),
        worker_processes=env_int("FLAREBOT_WORKER_PROCESSES", DEFAULT_WORKER_PROCESSES, minimum=1, maximum=64),
        trusted_proxies=env_networks("FLAREBOT_TRUSTED_PROXIES"),
        log_level=env_choice("FLAREBOT_LOG_LEVEL", "warning", ("warning", "info", "debug")),
        network_allow=env_host_ports("FLAREBOT_NETWORK_ALLOW"),
        search_model=_search_model(),
        chromium=_raw("FLAREBOT_CHROMIUM"),
        browser_task_keep=float(env_int("FLAREBOT_BROWSER_TASK_KEEP", 600, minimum=1, maximum=86_400)),
        shell_network=_shell_network(),
    )


def _shell_network() -> str | None:
    """FLAREBOT_SHELL_NETWORK: the name of a Docker network (never the host's own stack)."""
    raw = _raw("FLAREBOT_SHELL_NETWORK")
    if raw is None or raw == "none":
        return None
    if raw == "host" or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", raw):
        raise ConfigurationError(
            "FLAREBOT_SHELL_NETWORK must name a Docker network (letters, digits, _ . -), not host or container:..."
        )
    return raw


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """Return one of `choices` (case-insensitive), or the default when unset."""
    value = (_raw(name) or default).lower()
    if value not in choices:
        raise ConfigurationError(f"{name} must be one of: {', '.join(choices)}")
    return value


def env_networks(name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Return comma-separated addresses or networks (CIDR) as networks; empty when unset."""
    networks = []
    for entry in (_raw(name) or "").split(","):
        if not entry.strip():
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ConfigurationError(
                f"{name} must be comma-separated IP addresses or networks such as 172.30.80.0/24; "
                f"{entry.strip()[:60]!r} is neither"
            ) from None
    return tuple(dict.fromkeys(networks))


def env_host_ports(name: str) -> tuple[tuple[str, int], ...]:
    """Return comma-separated exact `host:port` entries (a name, `1.2.3.4` or `[::1]`) as pairs.

    Each entry is kept as written (lowercased): it allows exactly that spelling of the
    host and that port, so it is checked to be one host and a port, nothing more.
    """
    entries = []
    for raw_entry in (_raw(name) or "").split(","):
        entry = raw_entry.strip().lower()
        if not entry:
            continue
        host, _, port = entry.rpartition(":")
        problem = host_port_problem(host, port)
        if problem:
            raise ConfigurationError(f"{name}: {entry[:80]!r} is not host:port ({problem})")
        entries.append((host, int(port)))
    return tuple(dict.fromkeys(entries))


def host_port_problem(host: str, port: str) -> str | None:
    """Why `host:port` (lowercased) is not an allowlist entry, or None (the network policy offers entries)."""
    if not (port.isascii() and port.isdigit() and 0 < int(port) <= 65535):
        return "the port must be 1-65535"
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return "not an IPv6 address"
        return None
    if not host or not all(ch.isascii() and (ch.isalnum() or ch in ".-_") for ch in host):
        return "a host name, an IPv4 address or a bracketed IPv6 address"
    last_label = host.rstrip(".").rpartition(".")[2]
    if last_label.isdigit() or last_label.startswith("0x"):
        # Numeric: only the canonical dotted form, the one spelling URLs are matched by.
        try:
            if str(ipaddress.IPv4Address(host)) != host:
                return "an IPv4 address in its dotted form"
        except ValueError:
            return "an IPv4 address in its dotted form"
    return None


def _search_model() -> str:
    model = env_str("FLAREBOT_SEARCH_MODEL", "gpt-5.4-mini")
    if len(model) > 128 or any(ch.isspace() or not ch.isprintable() for ch in model):
        raise ConfigurationError("FLAREBOT_SEARCH_MODEL holds an invalid model id")
    return model


def _local_models() -> tuple[str, ...]:
    raw = _raw("FLAREBOT_LOCAL_MODELS") or ""
    models = tuple(dict.fromkeys(m.strip() for m in raw.split(",") if m.strip()))
    for model in models:
        if len(model) > 128 or any(ch.isspace() or not ch.isprintable() for ch in model):
            raise ConfigurationError("FLAREBOT_LOCAL_MODELS holds an invalid model id")
    if models and not _raw("FLAREBOT_LOCAL_BASE_URL"):
        raise ConfigurationError("FLAREBOT_LOCAL_MODELS needs FLAREBOT_LOCAL_BASE_URL")
    return models


def installation_absent(config: FlarebotConfig) -> str | None:
    """Why no installation can be found with this configuration before Django starts, or None.

    Read before settings load, which would create the data dir and a new secret: a
    command that needs an existing installation (createowner) refuses instead.
    """
    if not config.data_dir.is_dir() and env_secret("FLAREBOT_SECRET_KEY") is None:
        return "the folder does not exist"
    if config.database_url is None and not (config.data_dir / SQLITE_FILE).is_file():
        return "it has no database"
    return None


def no_installation_message(data_dir: Path, reason: str) -> str:
    """What to say when a command finds no installation where it looked."""
    return (
        f"No Flarebot installation was found in the data dir {data_dir} ({reason}); nothing was created. "
        "Use the same FLAREBOT_DATA_DIR (and DATABASE_URL) as `make run`, "
        "or start Flarebot with `make run` once so that it sets this one up."
    )


def ensure_data_dir(data_dir: Path) -> None:
    """Create the data directory (owner-only) and its logs folder."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "logs").mkdir(exist_ok=True)
    (data_dir / "static").mkdir(exist_ok=True)
    os.chmod(data_dir, 0o700)


def server_secret(data_dir: Path) -> str:
    """Return FLAREBOT_SECRET_KEY(_FILE), or the one generated under the data dir.

    The generated secret is written once, 0600, with a link-based create so that the
    web, worker and beat processes starting together all end up with the same value.
    """
    configured = env_secret("FLAREBOT_SECRET_KEY")
    if configured:
        if len(configured) < 50 or len(set(configured)) < 5:
            raise ConfigurationError("FLAREBOT_SECRET_KEY must be at least 50 varied characters")
        return configured
    ensure_data_dir(data_dir)
    path = data_dir / "secret_key"
    if not path.exists():
        tmp = data_dir / f".secret_key.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_urlsafe(64))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process won the race; use its secret
        finally:
            tmp.unlink()
    value = path.read_text(encoding="utf-8").strip()
    if len(value) < 50:
        raise ConfigurationError(f"{path} holds a secret that is too short")
    return value
