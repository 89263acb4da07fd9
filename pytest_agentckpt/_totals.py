"""Counters that add up across xdist workers: one merge and one JSON form for every kind.

A subclass is a dataclass whose fields are ints, ``Counter``\\ s or sets (each with a
default); :meth:`Totals.merge` adds them, :meth:`Totals.to_dict` is what a worker sends,
:meth:`Totals.from_dict` what the controller reads back.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["Totals"]

_T = TypeVar("_T", bound="Totals")


def _empty(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


class Totals:
    """Mixin of a dataclass of counts (ints, ``Counter``\\ s, sets)."""

    def merge(self, other: Totals) -> None:
        """Add ``other``'s counts to these (the xdist controller sums its workers')."""
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, Counter):
                mine.update(theirs)
            elif isinstance(mine, set):
                mine |= theirs
            else:
                setattr(self, field.name, mine + theirs)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form (what an xdist worker sends)."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if isinstance(value, Counter):
                value = dict(value)
            elif isinstance(value, set):
                value = sorted(value)
            out[field.name] = value
        return out

    @classmethod
    def from_dict(cls: type[_T], data: Mapping[str, Any]) -> _T:
        """The inverse of :meth:`to_dict` (a missing key is an empty count)."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            empty = _empty(field)
            raw = data.get(field.name)
            if raw is None:
                values[field.name] = empty
            elif isinstance(empty, Counter):
                values[field.name] = Counter(raw)
            elif isinstance(empty, set):
                values[field.name] = set(raw)
            else:
                values[field.name] = int(raw)
        return cls(**values)
