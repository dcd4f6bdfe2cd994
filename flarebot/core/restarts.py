"""When the supervisor starts a crashed process again, and when it gives up.

A process that was ready once and then exits (a crash, the kernel's OOM killer, a
library that called exit) is started again after a pause that doubles with each crash
in the last RESTART_WINDOW_SECONDS; one that crashes more often than that stops the
whole stack, so that a real fault is seen rather than hidden by a restart loop. A process
that exits before it was ever ready is a fault of the start (configuration, a missing
dependency) and stops the stack at once. A process that hangs before it is ready, at its
first start or after a restart, is reported once its own start is older than the timeout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RESTART_WINDOW_SECONDS = 600.0
# The pause before each restart within the window; one crash more gives up.
RESTART_DELAYS_SECONDS = (1.0, 2.0, 4.0, 8.0, 16.0)


@dataclass
class Restarts:
    window: float = RESTART_WINDOW_SECONDS
    delays: tuple[float, ...] = RESTART_DELAYS_SECONDS
    _crashes: dict[str, list[float]] = field(default_factory=dict)

    def crashed(self, name: str, now: float) -> float | None:
        """Count a crash of `name`: the seconds to wait before starting it again, or None to give up."""
        recent = [at for at in self._crashes.get(name, []) if now - at < self.window] + [now]
        self._crashes[name] = recent
        if len(recent) > len(self.delays):
            return None
        return self.delays[len(recent) - 1]

    def count(self, name: str) -> int:
        """Crashes of `name` within the window, as last counted."""
        return len(self._crashes.get(name, []))


@dataclass
class ReadyDeadlines:
    """When each process that is starting (the first time, or again after a crash) is late.

    Each process gets its own clock from its own start, and is reported late once per start.
    """

    timeout: float
    _by: dict[str, float] = field(default_factory=dict)

    def starting(self, name: str, now: float) -> None:
        self._by[name] = now + self.timeout

    def ended(self, name: str) -> None:
        """It became ready, or exited: no longer waited for."""
        self._by.pop(name, None)

    def late(self, now: float) -> list[str]:
        """The processes whose time ran out since the last call, in name order (each once per start)."""
        late = sorted(name for name, by in self._by.items() if now > by)
        for name in late:
            self._by[name] = float("inf")
        return late
