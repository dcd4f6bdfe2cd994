"""An authentication backend that counts the passwords it was asked to check."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.contrib.auth.backends import ModelBackend

# About what one check of the real hasher takes, where the tests' hasher takes nothing:
# attempts that arrive together overlap in the check as they do in production.
CHECK_SECONDS = 0.05


class CountingBackend(ModelBackend):
    """Django's model backend, counting every authenticate() call."""

    checked = 0
    _lock = threading.Lock()

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls.checked = 0

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        with CountingBackend._lock:
            CountingBackend.checked += 1
        time.sleep(CHECK_SECONDS)
        return super().authenticate(request, username=username, password=password, **kwargs)
