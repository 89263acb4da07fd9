"""The store under certification: a ``MODULE:FACTORY`` that makes fresh store instances.

The factory is named, not passed as an object, because the process contracts call it
again in child processes (``multiprocessing``: a fork server or ``spawn``), which can only import it.
A factory may take one argument, a namespace: instances made with the same namespace
share their data, different namespaces never collide.
"""

from __future__ import annotations

import importlib
import inspect
import re
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stores import CheckpointStore

__all__ = [
    "FactoryError",
    "StoreFactory",
    "StoreNotEmptyError",
    "is_certify_task",
    "new_namespace",
    "new_run_id",
]

#: Every task id a certification run writes starts with ``certify-`` and ten hex digits.
_CERTIFY_TASK = re.compile(r"^certify-[0-9a-f]{10}-")


class FactoryError(Exception):
    """The ``MODULE:FACTORY`` cannot be imported or does not make a checkpoint store."""


class StoreNotEmptyError(Exception):
    """The store already holds checkpoints certification did not write: it refuses to run.

    ``task_ids`` are a few of them, to show the user which data it protected.
    """

    def __init__(self, message: str, task_ids: list[str]) -> None:
        super().__init__(message)
        self.task_ids = task_ids


def new_namespace() -> str:
    """A namespace safe as a table prefix, a key prefix, an S3 prefix and a file name."""
    return "ckpt" + secrets.token_hex(5)


def new_run_id() -> str:
    """The prefix of every task id one certification run writes (see :func:`is_certify_task`)."""
    return "certify-" + secrets.token_hex(5)


def is_certify_task(task_id: str) -> bool:
    """True for task ids a certification run writes (this run's or an earlier one's).

    >>> is_certify_task(new_run_id() + "-rt-0"), is_certify_task("invoice-42")
    (True, False)
    """
    return _CERTIFY_TASK.match(task_id) is not None


def _takes_namespace(factory: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return False
    params = list(signature.parameters.values())
    if any(p.name == "namespace" for p in params):
        return True
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) == 1


class StoreFactory:
    """A resolved ``MODULE:FACTORY``.

    >>> factory = StoreFactory.from_spec("pytest_agentckpt.certify.builtin:memory")
    >>> store = factory.make("ns1")
    >>> store.info().backend
    'memory'
    """

    def __init__(self, spec: str, function: Callable[..., Any]) -> None:
        self.spec = spec
        self.function = function
        self.takes_namespace = _takes_namespace(function)

    @classmethod
    def from_spec(cls, spec: str) -> StoreFactory:
        """Import ``MODULE:FACTORY`` (``FACTORY`` may be dotted, e.g. ``Class.method``)."""
        module_name, sep, attr_path = spec.partition(":")
        if not sep or not module_name or not attr_path:
            raise FactoryError(
                f"{spec!r} is not MODULE:FACTORY; write e.g. 'mypackage.stores:make_store', "
                "where make_store() returns a fresh CheckpointStore"
            )
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise FactoryError(
                f"cannot import module {module_name!r} ({type(exc).__name__}: {exc}); "
                "check the name and that it is importable from the current directory or "
                "the installed packages"
            ) from exc
        target: Any = module
        for part in attr_path.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise FactoryError(
                    f"module {module_name!r} has no attribute {attr_path!r}"
                ) from None
        if not callable(target):
            raise FactoryError(f"{spec!r} is not callable: it is a {type(target).__name__}")
        return cls(spec, target)

    def make(self, namespace: str) -> CheckpointStore:
        """A fresh store instance in ``namespace`` (ignored by factories without one)."""
        store = self.function(namespace) if self.takes_namespace else self.function()
        if not isinstance(store, CheckpointStore):
            needed = ("load", "save", "delete", "list_checkpoints", "info", "close")
            missing = [name for name in needed if not callable(getattr(store, name, None))]
            lacks = f": it has no {', '.join(missing)} method" if missing and len(missing) < len(needed) else ""
            raise FactoryError(
                f"{self.spec} returned a {type(store).__name__}, which is not a "
                f"CheckpointStore{lacks} (it needs load, save, delete, list_checkpoints, info, close)"
            )
        return store

    def __repr__(self) -> str:
        return f"StoreFactory({self.spec!r})"


def import_from_cwd() -> None:
    """Make a factory module in the current directory importable, here and in the child
    processes the process contracts start (a console script, unlike ``python -m``, does
    not put that directory on ``sys.path``)."""
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
