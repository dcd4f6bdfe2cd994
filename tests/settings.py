"""Settings for the test process: the real settings, pointed at private test resources.

Each run gets its own data dir, a fresh PostgreSQL database (or SQLite file) made by
pytest-django, a Redis database number claimed for the run, and a free port for the live
stack. Subprocesses started by the live-stack fixture use `flarebot.settings` itself with
the same resources through the environment.
"""

from __future__ import annotations

import os
import tempfile

from tests.support.resources import claim_redis_db, listen_port, new_run_id

RUN_ID = os.environ.setdefault("FLAREBOT_TEST_RUN_ID", new_run_id())
os.environ.setdefault("FLAREBOT_DATA_DIR", tempfile.mkdtemp(prefix=f"flarebot-test-{RUN_ID}-"))
os.environ.setdefault("FLAREBOT_PORT", str(listen_port()))
# The loopback model providers (tests/support/fake_providers.py) listen here; the live
# stack's worker inherits these base URLs.
_provider_port = os.environ.setdefault("FLAREBOT_TEST_PROVIDER_PORT", str(listen_port()))
os.environ["FLAREBOT_ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{_provider_port}"
os.environ["FLAREBOT_OPENAI_BASE_URL"] = f"http://127.0.0.1:{_provider_port}/v1"
# The loopback fixture web server (tests/support/web_fixtures.py): the web tools reach it
# through the operator's allowlist, the only way past the network policy; its second
# port is deliberately not listed.
_web_port = os.environ.setdefault("FLAREBOT_TEST_WEB_PORT", str(listen_port()))
os.environ.setdefault("FLAREBOT_TEST_WEB_OTHER_PORT", str(listen_port()))
os.environ["FLAREBOT_NETWORK_ALLOW"] = f"127.0.0.1:{_web_port}"
os.environ.pop("FLAREBOT_SEARCH_MODEL", None)
os.environ.pop("FLAREBOT_LOCAL_BASE_URL", None)
os.environ.pop("FLAREBOT_LOCAL_MODELS", None)
os.environ.setdefault("FLAREBOT_STREAM_IDLE_TIMEOUT", "3")
os.environ.pop("FLAREBOT_ORIGIN", None)
os.environ.pop("FLAREBOT_MODE", None)
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault(
    "REDIS_URL", claim_redis_db(os.environ.get("FLAREBOT_TEST_REDIS_URL", "redis://127.0.0.1:6379"), RUN_ID)
)

from flarebot.settings.base import *  # noqa: E402,F403
from flarebot.settings.base import CONFIG, _database  # noqa: E402

TEST_DB_KIND = os.environ.get("FLAREBOT_TEST_DB", "postgres")
if TEST_DB_KIND == "postgres":
    DATABASES = {
        "default": {
            **_database(os.environ.get("FLAREBOT_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")),
            "CONN_MAX_AGE": 0,
            "TEST": {"NAME": f"test_flarebot_{RUN_ID}"},
        }
    }
elif TEST_DB_KIND == "sqlite":
    DATABASES = {
        "default": {
            **_database(None),
            # A file, not memory: the live stack's processes open the same database.
            "TEST": {"NAME": str(CONFIG.data_dir / "test.sqlite3")},
        }
    }
else:
    raise RuntimeError("FLAREBOT_TEST_DB must be postgres or sqlite")

# Password hashing at full strength would dominate the suite's run time; the hasher
# itself is Django's and not what these tests are about. It must stay a format the real
# settings verify: the live stack's processes check passwords that tests create here.
PASSWORD_HASHERS = ["tests.support.hashers.FastPBKDF2PasswordHasher"]
