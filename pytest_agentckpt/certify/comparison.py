"""Type-strict comparison of JSON data: what "the store gave back what it was given" means.

``1 == 1.0 == True`` in Python, but a store that turns an integer into a float has lost
precision (beyond 2**53) and one that turns ``True`` into ``1`` has changed the data. So
types are compared too; object key order is not (JSONB, for one, reorders keys).
"""

from __future__ import annotations

from typing import Any

__all__ = ["first_difference"]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def first_difference(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Where ``actual`` first differs from ``expected``, or ``None`` when they are equal.

    >>> first_difference({"n": 2**53 + 1}, {"n": float(2**53 + 1)})
    "$['n']: expected 9007199254740993 (int), got 9007199254740992.0 (float)"
    """
    if type(expected) is not type(actual):
        return (
            f"{path}: expected {_show(expected)} ({type(expected).__name__}), "
            f"got {_show(actual)} ({type(actual).__name__})"
        )
    if isinstance(expected, dict):
        missing = [k for k in expected if k not in actual]
        if missing:
            return f"{path}: key {_show(missing[0])} is missing"
        extra = [k for k in actual if k not in expected]
        if extra:
            return f"{path}: unexpected key {_show(extra[0])}"
        for key, value in expected.items():
            found = first_difference(value, actual[key], f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(expected, list | tuple):
        for index, (left, right) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(left, right, f"{path}[{index}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        return None
    if expected != actual:
        return f"{path}: expected {_show(expected)}, got {_show(actual)}"
    return None
