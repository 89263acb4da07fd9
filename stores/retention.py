"""Retention of finished checkpoints: the one rule every store's ``ttl`` follows.

A store built with ``ttl=SECONDS`` (or ``?ttl=7d`` in its URL) forgets a checkpoint whose
status is ``completed`` or ``failed`` once ``ttl`` seconds have passed since its last
save: ``load`` returns ``None``, listings omit it, and a save that expects version 0
creates it afresh. A ``running`` checkpoint never expires, however long it waits: losing
it would make the next resume start the task over and repeat every irreversible action
it had already done, which is the failure this project exists to prevent.

Re-running a task whose finished checkpoint has expired redoes the task; choose ``ttl``
longer than the time in which anyone may re-run it.

>>> parse_ttl("7d"), parse_ttl("90m"), parse_ttl("1.5"), parse_ttl(None)
(604800.0, 5400.0, 1.5, None)
"""

from __future__ import annotations

import datetime as _dt
import math
import re

from .checkpoint import CheckpointStatus

__all__ = ["EXPIRING_STATUSES", "cutoff", "is_expired", "parse_ttl"]

EXPIRING_STATUSES: frozenset[CheckpointStatus] = frozenset({"completed", "failed"})
"""The statuses whose checkpoints a ``ttl`` removes; ``running`` is never among them."""

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
#: ASCII digits only: ``\d`` alone took '٣' (an Arabic-Indic three) for 3 (a CLI round).
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)\s*", re.IGNORECASE | re.ASCII)


def parse_ttl(value: float | int | str | None) -> float | None:
    """Seconds from a ``ttl`` given as a number or a duration (``"45s"``, ``"12h"``, ``"7d"``).

    ``None`` means keep finished checkpoints for ever. Raises ``ValueError`` naming the
    accepted forms for anything else, zero or negative included.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"ttl must be seconds or a duration such as '7d', not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match is None:
            raise ValueError(
                f"ttl {value!r} is not a duration: give seconds (3600) or a number with a unit "
                "s, m, h, d or w (45s, 90m, 12h, 7d, 2w)"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    else:
        raise ValueError(f"ttl must be seconds or a duration such as '7d', not {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"ttl must be a positive duration, not {value!r}; leave it out to keep checkpoints")
    return seconds


def cutoff(ttl: float, now: _dt.datetime) -> _dt.datetime:
    """The ``updated_at`` before which a finished checkpoint has expired at ``now``.

    A ttl reaching past the calendar's start expires nothing (the earliest datetime).
    """
    try:
        return now - _dt.timedelta(seconds=ttl)
    except OverflowError:
        return _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)


def is_expired(status: str, updated_at: _dt.datetime, ttl: float | None, now: _dt.datetime) -> bool:
    """Whether a checkpoint with this status and last save has expired under ``ttl`` at ``now``."""
    return ttl is not None and status in EXPIRING_STATUSES and updated_at < cutoff(ttl, now)
