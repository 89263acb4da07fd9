"""A settable ``utcnow`` for a store module: expiry tests without sleeping."""

from __future__ import annotations

import datetime as _dt
from types import ModuleType

import pytest


class FakeClock:
    """Starts at a whole second (whose ``isoformat()`` would leave out the microseconds)."""

    def __init__(self) -> None:
        self.now = _dt.datetime(2030, 1, 1, tzinfo=_dt.timezone.utc)

    def __call__(self) -> _dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += _dt.timedelta(seconds=seconds)


def fake_clock(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> FakeClock:
    """Replace ``module.utcnow`` with a :class:`FakeClock` for one test."""
    clock = FakeClock()
    monkeypatch.setattr(module, "utcnow", clock)
    return clock
