"""Django settings, built from the environment by `flarebot.core.env`.

One module serves both modes: `FLAREBOT_MODE=local` (the default, plain HTTP on
loopback) and `production` (behind a TLS proxy, passes `check --deploy`).
"""

from flarebot.settings.base import *  # noqa: F403
