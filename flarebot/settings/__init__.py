"""Django settings, built from the environment by `flarebot.core.env`.

One module serves both modes: `FLAREBOT_MODE=local` (the default, plain HTTP on
loopback) and `production` (behind a TLS proxy, passes `check --deploy`).
"""

from flarebot.settings.base import *  # noqa: F403

# Wherever Django runs (web, workers, beat, shells) Flarebot's Celery app is the current
# one, so a job sent from a view goes to Flarebot's broker. Its configuration is read from
# these settings lazily, on first use.
import flarebot.celery  # noqa: E402,F401
