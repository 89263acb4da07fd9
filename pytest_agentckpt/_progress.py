"""Progress of a long ``fuzz`` call: a live line on a terminal, a line now and then in CI logs.

Nothing is shown for a call shorter than :data:`QUIET_FOR` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: Seconds a call runs before any progress is shown.
QUIET_FOR = 5.0
#: Seconds between two lines in a log (not a terminal).
LOG_EVERY = 10.0
#: Seconds between two redraws of the live line on a terminal.
REDRAW_EVERY = 0.5


@dataclass
class Sink:
    """Where progress goes: ``write(text)`` without a newline, and whether it is a terminal."""

    write: Callable[[str], None]
    live: bool


#: Set by the pytest plugin (its terminal writer); None: no progress at all.
sink: Sink | None = None


@dataclass
class Progress:
    """The progress of one ``fuzz`` call over ``total`` examples."""

    name: str
    total: int
    clock: Callable[[], float] = time.monotonic
    out: Sink | None = None
    started: float = field(default=0.0)
    #: How many examples ran before the first failure, once there is one: from then on the
    #: scenarios run shrink it and search for other oracles, past ``total``.
    found_after: int | None = None
    #: ``fuzz(systematic=True)``: ``total`` counts plans, each run with a crash at every
    #: point; ``plans`` is how many have started.
    systematic: bool = False
    plans: int = 0
    _last: float | None = None
    _drawn: bool = False

    def __post_init__(self) -> None:
        self.started = self.clock()

    def tick(self, done: int, crashes: int, violations: int) -> None:
        """After each example: show a line if the call has run long enough."""
        out = self.out
        if out is None:
            return
        now = self.clock()
        elapsed = now - self.started
        if elapsed < QUIET_FOR:
            return
        every = REDRAW_EVERY if out.live else LOG_EVERY
        if self._last is not None and now - self._last < every:
            return
        self._last = now
        rate = done / elapsed if elapsed > 0 else 0.0
        if self.found_after is None and self.systematic:
            line = (
                f"agentckpt: {self.name}: {self.plans}/{self.total} plans, {done} single-crash scenarios, "
                f"{violations} violations so far, {rate:.1f} scenarios/s"
            )
        elif self.found_after is None:
            line = (
                f"agentckpt: {self.name}: {done}/{self.total} examples, {crashes} crashes injected, "
                f"{violations} violations so far, {rate:.1f} examples/s"
            )
        else:
            line = (
                f"agentckpt: {self.name}: failure found after {self.found_after} examples; shrinking it "
                f"and searching for other oracles: {done} scenarios run, {rate:.1f}/s"
            )
        try:
            out.write("\r" + line if out.live else line + "\n")
        except (OSError, ValueError):  # the writer went away (a closed stream): stay quiet
            self.out = None
            return
        self._drawn = True

    def close(self) -> None:
        """End the live line, if one was drawn."""
        if self.out is not None and self.out.live and self._drawn:
            try:
                self.out.write("\n")
            except (OSError, ValueError):
                self.out = None
