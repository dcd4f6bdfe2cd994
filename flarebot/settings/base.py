"""Every Django, Channels, Celery and DRF setting, derived from one FlarebotConfig."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import dj_database_url

from flarebot.core.env import BASE_DIR, SQLITE_FILE, ensure_data_dir, load_config, redis_namespace, server_secret

CONFIG = load_config()
ensure_data_dir(CONFIG.data_dir)

SECRET_KEY = server_secret(CONFIG.data_dir)
DEBUG = False
FLAREBOT_ORIGIN = CONFIG.origin
FLAREBOT_DATA_DIR = CONFIG.data_dir
# Bumped with every change that needs a forward migration of the installation itself;
# an installation row written by another schema version fails closed.
FLAREBOT_SCHEMA_VERSION = 1
FLAREBOT_SESSION_LIFETIME = timedelta(hours=8)
FLAREBOT_SIGNIN_FAILURE_WINDOW = timedelta(minutes=15)
FLAREBOT_SIGNIN_FAILURES_PER_ACCOUNT = 5
FLAREBOT_SIGNIN_FAILURES_PER_CLIENT = 20
# Reverse proxies whose X-Forwarded-For entries are believed (flarebot.core.clients).
FLAREBOT_TRUSTED_PROXIES = CONFIG.trusted_proxies

ALLOWED_HOSTS = sorted({CONFIG.origin_host, "127.0.0.1", "localhost", "[::1]"})

# Not "daphne": as an app it would load daphne's server and Twisted into every
# process, workers and beat included; the web process (`python -m flarebot.web`) loads them.
INSTALLED_APPS = [
    "flarebot.core.apps.FlarebotAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_celery_beat",
    "flarebot.core",
    "tools",
    "memory",
    "conversations",
    "attachments",
    "tasks",
    "notifications",
    "settings_ui",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "flarebot.core.middleware.PrivateResponseMiddleware",
    "flarebot.core.middleware.ContentSecurityPolicyMiddleware",
    "flarebot.core.middleware.OriginGuardMiddleware",
    "flarebot.core.middleware.InstallationGuardMiddleware",
    "flarebot.core.middleware.DuplicateSessionCookieMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "flarebot.core.middleware.OwnerSessionMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "flarebot.urls"
ASGI_APPLICATION = "flarebot.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database(url: str | None) -> dict[str, Any]:
    if url:
        database: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60))
    else:
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": CONFIG.data_dir / SQLITE_FILE}
    if database["ENGINE"] == "django.db.backends.sqlite3":
        # WAL lets the web process read while a worker writes; IMMEDIATE transactions
        # take the write lock up front so concurrent writers wait (busy timeout)
        # instead of failing with "database is locked" on lock upgrade.
        database["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
        database["CONN_MAX_AGE"] = 0
    else:
        database["CONN_HEALTH_CHECKS"] = True
        # Parameters sent apart from the statement, and statements run five times kept
        # prepared on their connection: the streaming path repeats the same few
        # statements thousands of times a minute, and quoting them into text for the
        # server to parse and plan each time cost measurable CPU on both sides.
        database["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 5}
    return database


DATABASES = {"default": _database(CONFIG.database_url)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

# Sessions: the cookie carries only an opaque key; the database holds the session.
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_NAME = "__Host-flarebot-session"
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_PATH = "/"
SESSION_COOKIE_AGE = int(FLAREBOT_SESSION_LIFETIME.total_seconds())
SESSION_SAVE_EVERY_REQUEST = False
CSRF_COOKIE_NAME = "__Host-flarebot-csrf"
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
CSRF_TRUSTED_ORIGINS = [CONFIG.origin]

SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if CONFIG.production:
    # Production runs behind a TLS-terminating proxy that sets X-Forwarded-Proto.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^status/$"]  # container health checks speak plain HTTP
    SECURE_HSTS_SECONDS = 60 * 60 * 24 * 365
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = CONFIG.hsts_preload

# Also the bound the web process holds every request body to before reading it, an upload excepted
# (flarebot.core.request_bounds).
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FIELDS = 200

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = CONFIG.data_dir / "static"  # only for an optional collectstatic
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True
# Files browsers ask for at the site's root (favicon.ico), served like /static/: before
# any sign-in check, cached briefly.
WHITENOISE_ROOT = BASE_DIR / "webroot"
# The installable app's manifest (webroot/manifest.webmanifest), which browsers want typed as such.
WHITENOISE_MIMETYPES = {".webmanifest": "application/manifest+json"}
WHITENOISE_AUTOREFRESH = False

REDIS_URL = CONFIG.redis_url
# Pub/sub channels are server-wide: named after the database, so that instances sharing a
# Redis server never hear each other (flarebot.core.env.redis_namespace).
REDIS_NAMESPACE = redis_namespace(REDIS_URL)
CHANNEL_LAYERS = {
    "default": {
        # Pub/sub delivers group messages without per-channel polling, which keeps many
        # concurrent streams steady (the README's benchmark section).
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": REDIS_NAMESPACE},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "conversations.jobs.turn_*": {"queue": "turns"},
    "conversations.jobs.browser_task*": {"queue": "tools"},
    "tools.jobs.*": {"queue": "tools"},
}
# Above the longest turn, so Redis never redelivers a turn that is still running;
# the lease in the database, not the broker, decides who owns a turn.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 60 * 60 * 2}
# django-celery-beat's DatabaseScheduler, keeping its bookkeeping off scheduled tasks' rows
# (tasks/beat.py says why).
CELERY_BEAT_SCHEDULER = "tasks.beat:TaskDatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "conversations-reconcile-turns": {
        "task": "conversations.jobs.turns_reconcile",
        # With the 15 s lease, a turn whose worker died continues within about 20 s of the
        # crash (the query is indexed and cheap). A run nobody took within 20 s is dropped:
        # a slow worker still gets one (an expiry of one period would drop every run while
        # its queue lags), and at most four ever wait.
        "schedule": 5.0,
        "options": {"expire_seconds": 20},
    },
    "conversations-reconcile-browser-tasks": {
        "task": "conversations.jobs.browser_tasks_reconcile",
        # A task whose worker died continues within about 20 s (its 15 s lease, then this).
        "schedule": 5.0,
        "options": {"expire_seconds": 20},
    },
    "tools-browser-leases-sweep": {
        "task": "tools.jobs.browser_leases_sweep",
        "schedule": 60.0,
        "options": {"expire_seconds": 60},
    },
    "tools-shell-leases-sweep": {
        # Shell containers whose call's worker died end by their own timeout; this removes
        # them (and retries pending removals) within a minute or so.
        "task": "tools.jobs.shell_leases_sweep",
        "schedule": 30.0,
        "options": {"expire_seconds": 30},
    },
    "tasks-reconcile": {
        # Scheduled tasks: fires, dispatches and run projections that a lost message or a
        # crash left behind, and schedules missing from beat (tasks.runs.tasks_reconcile).
        "task": "tasks.jobs.tasks_reconcile",
        "schedule": 30.0,
        "options": {"expire_seconds": 30},
    },
    "notifications-sweep": {
        # Deliveries whose coalescing minute or quiet hours ended, retries a lost job left,
        # and claims a stopped worker left (marked failed, never sent twice).
        "task": "notifications.jobs.notifications_sweep",
        "schedule": 10.0,
        "options": {"expire_seconds": 10},
    },
    "attachments-sweep": {
        # Uploads interrupted over an hour ago, and blobs no attachment names any more.
        "task": "attachments.jobs.attachments_sweep",
        "schedule": 600.0,
        "options": {"expire_seconds": 600},
    },
    "conversations-finish-deletions": {
        "task": "conversations.jobs.conversation_finish_deletions",
        "schedule": 300.0,
    },
}
CELERY_TIMEZONE = "UTC"

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["flarebot.core.api.StrictJSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": ["flarebot.core.api_auth.OwnerSessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["flarebot.core.api_auth.IsOwner"],
    "DEFAULT_SCHEMA_CLASS": "flarebot.core.schema.AutoSchema",
    "EXCEPTION_HANDLER": "flarebot.core.api.exception_handler",
    "UNAUTHENTICATED_USER": None,
    # `?format=` is the export's own parameter (md or json), not DRF's renderer override.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Flarebot API",
    "DESCRIPTION": "The owner's HTTP contract of a self-hosted Flarebot.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # A PATCH here takes the whole body its serializer names, as a PUT would.
    "COMPONENT_SPLIT_PATCH": False,
    # Enums stay where they are used: several fields share a name (`status`) with other choices.
    "POSTPROCESSING_HOOKS": [],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "DEBUG" if CONFIG.log_level == "debug" else "INFO"},
    "loggers": {
        "django.request": {"level": "ERROR"},
        "daphne": {"level": "WARNING"},
        # The provider SDKs' HTTP client logs every request at INFO.
        "httpx2": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # Apprise's warnings may name a destination's host or path (a token, for some
        # services); notifications reports outcomes in its own safe words instead.
        "apprise": {"level": "CRITICAL"},
    },
}
