"""Django settings, built from the environment by `flarebot.core.env`.

One module serves both modes: `FLAREBOT_MODE=local` (the default, plain HTTP on
loopback) and `production` (behind a TLS proxy, passes `check --deploy`).
"""

# Wherever Django runs (web, workers, beat, shells) Flarebot's Celery app is loaded, so a
# job sent from a view goes to Flarebot's broker (the package itself no longer imports it:
# the supervisor stays small). The app reads these settings lazily, on first use.
import flarebot.celery  # noqa: F401
from flarebot.settings.base import *  # noqa: F403
