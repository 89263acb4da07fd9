"""What a contract check gets to work with, and how it says how it went.

A check is a function of a :class:`CertifyContext`. It returns a short note when the
contract holds, and raises :class:`ContractFailed` (with what failed and how to
reproduce it), :class:`NotCheckable` (a hook the check needs is missing) or
:class:`NotApplicable` (the contract does not concern this store) otherwise.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stores import CheckpointStore

from .factory import StoreFactory, new_namespace
from .hooks import StoreHooks, hooks_for

__all__ = [
    "FULL",
    "QUICK",
    "Budget",
    "CertifyContext",
    "ContractFailed",
    "NotApplicable",
    "NotCheckable",
]

T = TypeVar("T")


class ContractFailed(AssertionError):
    """The store broke the contract: ``summary`` says how, ``details`` shows the evidence."""

    def __init__(self, summary: str, details: str = "", reproduce: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.details = details
        self.reproduce = reproduce


class NotCheckable(Exception):
    """The contract cannot be checked for this store (a hook is missing): not a pass."""


class NotApplicable(Exception):
    """The contract does not concern this store (e.g. an optional one it does not declare)."""


@dataclass(frozen=True)
class Budget:
    """How much work each contract may do: bounded loops keep a run short."""

    examples: int
    state_machine_steps: int
    big_history: int
    threads: int
    saves_per_thread: int
    processes: int
    saves_per_process: int
    kill_rounds: int
    incremental_saves: int
    latency_repeats: int
    contract_timeout: float
    shrink: bool


#: ``--quick``: a few seconds for an in-process store.
QUICK = Budget(
    examples=12,
    state_machine_steps=15,
    big_history=300,
    threads=3,
    saves_per_thread=8,
    processes=2,
    saves_per_process=8,
    kill_rounds=3,
    incremental_saves=60,
    latency_repeats=5,
    contract_timeout=60.0,
    shrink=False,
)
#: The default run.
FULL = Budget(
    examples=60,
    state_machine_steps=30,
    big_history=1000,
    threads=4,
    saves_per_thread=20,
    processes=3,
    saves_per_process=15,
    kill_rounds=8,
    incremental_saves=200,
    latency_repeats=25,
    contract_timeout=180.0,
    shrink=True,
)


@dataclass
class CertifyContext:
    """Shared state of one certification run.

    Every store it makes is in a namespace of its own unless asked for a given one, and
    every task id starts with ``run_id``, so runs never see each other's data.
    """

    factory: StoreFactory
    seed: int
    budget: Budget
    run_id: str = field(default_factory=new_namespace)
    figures: dict[str, Any] = field(default_factory=dict)
    _stores: list[CheckpointStore] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _memo: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def new_store(self, namespace: str | None = None) -> CheckpointStore:
        """A fresh store instance from the factory, closed when the run ends."""
        store = self.factory.make(namespace or new_namespace())
        with self._lock:
            self._stores.append(store)
        return store

    def task_id(self, name: str) -> str:
        """A task id unique to this run."""
        return f"{self.run_id}-{name}-{next(self._counter)}"

    def hooks(self, store: CheckpointStore) -> StoreHooks:
        """The optional hooks of ``store`` (its own, or a built-in adapter)."""
        return hooks_for(store)

    def reproduce(self, contract_id: str) -> str:
        """The command line that repeats this check with this run's seed."""
        return f"agentckpt certify {self.factory.spec} --only {contract_id} --seed {self.seed}"

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per run (for experiments two contracts judge)."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            self._memo.setdefault(key, value)
            return self._memo[key]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close every store this run made (errors on close are not the contracts' business)."""
        with self._lock:
            stores, self._stores = self._stores, []
        for store in stores:
            # Leave nothing behind on a shared server; a failing clean-up or close must
            # not hide the results.
            purge = hooks_for(store).purge
            if purge is not None:
                with contextlib.suppress(Exception):
                    purge()
            with contextlib.suppress(Exception):
                store.close()
