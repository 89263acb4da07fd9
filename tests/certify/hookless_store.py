"""A correct store without certification hooks: damage cannot be checked, only reported so."""

from __future__ import annotations

from stores.memory import MemoryStore


class HooklessStore(MemoryStore):
    """A MemoryStore subclass: the built-in adapter does not recognise it."""


HooklessStore.__module__ = __name__


def make_store(namespace: str) -> HooklessStore:
    return HooklessStore(namespace)
