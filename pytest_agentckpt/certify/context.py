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

from stores import Checkpoint, CheckpointStore

from .factory import (
    FactoryError,
    StoreFactory,
    StoreNotEmptyError,
    is_certify_task,
    new_namespace,
    new_run_id,
)
from .hooks import StoreHooks, hooks_for

__all__ = [
    "FULL",
    "QUICK",
    "Budget",
    "CertifyContext",
    "ContractFailed",
    "NotApplicable",
    "NotCheckable",
    "Stopped",
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
    """The contract cannot be checked for this store, or the run saw no evidence: not a pass.

    ``needs`` names briefly what would make it checkable (a hook, a store shared across
    processes); the message says how to provide it.
    """

    def __init__(self, message: str, needs: str = "") -> None:
        super().__init__(message)
        self.needs = needs


class Stopped(BaseException):
    """Raised inside a check when the run was interrupted, so that it writes no more.

    A ``BaseException`` so that Hypothesis does not take it for a failure to shrink.
    """


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
    #: Tasks the listing contract saves before it lists them all (past a page of 100).
    listed_tasks: int = 120


#: ``--quick``: a few seconds for an in-process store.
QUICK = Budget(
    examples=12,
    state_machine_steps=15,
    big_history=300,
    threads=3,
    saves_per_thread=8,
    processes=2,
    saves_per_process=8,
    kill_rounds=5,
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
    # Past S3's page of 1,000 keys too (a listing that reads one page only).
    listed_tasks=1050,
)


@dataclass
class _Made:
    """A store the run made; ``purgeable`` if its namespace was new and held nothing then."""

    store: CheckpointStore
    namespace: str
    purgeable: bool
    #: Closed by a contract (:meth:`CertifyContext.close_store`): never used again, not
    #: even to clean up (a store may block or fail on any call once closed).
    closed: bool = False


@dataclass
class CertifyContext:
    """Shared state of one certification run.

    Every store it makes is in a namespace of its own unless asked for a given one, and
    every task id starts with ``run_id``, so runs never see each other's data. A store
    that already holds checkpoints the suite did not write is refused
    (:class:`~.factory.StoreNotEmptyError`) unless ``scratch`` is set; either way the run
    deletes only what it wrote, and purges a namespace whole only when the factory keeps
    namespaces apart and that namespace was empty when the run made it.

    >>> from pytest_agentckpt.certify.factory import StoreFactory
    >>> ctx = CertifyContext(StoreFactory.from_spec("pytest_agentckpt.certify.builtin:memory"),
    ...                      seed=1, budget=QUICK)
    >>> ctx.prepare().info().backend, ctx.namespaces_isolated
    ('memory', True)
    >>> ctx.close()
    """

    factory: StoreFactory
    seed: int
    budget: Budget
    scratch: bool = False
    #: How the refusal message tells the user to declare the store scratch.
    scratch_hint: str = "--scratch"
    #: Options the reproduce command repeats (``--quick``, ``--timeout 600``).
    reproduce_options: str = ""
    run_id: str = field(default_factory=new_run_id)
    figures: dict[str, Any] = field(default_factory=dict)
    #: Set by :meth:`prepare`: stores made with different namespaces do not share data.
    namespaces_isolated: bool = False
    #: The refusal, once a store with someone else's checkpoints was met.
    refusal: StoreNotEmptyError | None = None
    #: Set by :meth:`close` when a namespace's clean-up failed: the run's tasks may remain.
    clean_up_failed: bool = False
    _made: list[_Made] = field(default_factory=list)
    _namespaces: set[str] = field(default_factory=set)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _memo: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Set when the run is interrupted: long checks stop at their next step.
    stopping: threading.Event = field(default_factory=threading.Event)

    def check_stop(self) -> None:
        """Raise :class:`Stopped` if the run was interrupted (called between steps)."""
        if self.stopping.is_set():
            raise Stopped

    def close_made(self) -> None:
        """Close every instance made so far (once a contract has finished with them); the
        clean-up at the end of the run cleans each namespace with a new instance. An
        outside round's PostgreSQL store, a pool per instance, had 52 connections open on
        a shared server at once in a quick run, while the run kept every instance to its
        end."""
        with self._lock:
            entries = [entry for entry in self._made if not entry.closed]
            for entry in entries:
                entry.closed = True
        for entry in entries:
            with contextlib.suppress(Exception):
                entry.store.close()

    def close_store(self, store: CheckpointStore) -> None:
        """Close ``store``, one :meth:`new_store` made, as a contract that reopens it does;
        the clean-up at the end of the run then cleans its namespace with another instance
        and never calls it again (a closed store "is not used afterwards")."""
        with self._lock:
            for entry in self._made:
                if entry.store is store:
                    entry.closed = True
        store.close()

    def new_store(self, namespace: str | None = None) -> CheckpointStore:
        """A fresh store instance from the factory, cleaned up and closed when the run ends.

        A store in a namespace the run has not used yet is listed first: checkpoints
        that no certification run wrote raise :class:`~.factory.StoreNotEmptyError`
        (unless ``scratch``), so the run never writes beside someone's data unasked.
        """
        with self._lock:
            fresh = namespace is None or namespace not in self._namespaces
        chosen = namespace or new_namespace()
        store = self.factory.make(chosen)
        made = _Made(store, chosen, purgeable=False)
        with self._lock:
            self._namespaces.add(chosen)
            self._made.append(made)
        if not fresh:
            return store
        try:
            held = [summary.task_id for summary in store.list_checkpoints()]
        except Exception as exc:
            if self.scratch:
                return store  # not known to be empty: never purged whole
            raise FactoryError(
                f"the first list_checkpoints() of a store from {self.factory.spec} failed "
                f"({type(exc).__name__}: {exc}), so nothing was written. Certification lists "
                "every new store before it writes, to make sure it holds no one else's "
                "checkpoints, and without a listing it cannot know. Fix what makes the listing "
                "fail first: is the backend reachable? does the factory point at the store you "
                "meant? is a stored checkpoint there damaged or from a newer version (then it "
                "holds data that is not certification's)? Only if everything that store holds "
                f"is disposable, {self.scratch_hint} runs without this check: certification "
                "then writes beside whatever the store holds, and still deletes only its own"
            ) from None
        made.purgeable = not held
        foreign = [task_id for task_id in held if not is_certify_task(task_id)]
        if foreign and not self.scratch:
            refusal = StoreNotEmptyError(self._refusal_message(store, foreign, chosen), foreign[:5])
            with self._lock:
                self.refusal = self.refusal or refusal
            raise refusal
        return store

    def _refusal_message(self, store: CheckpointStore, foreign: list[str], namespace: str) -> str:
        try:
            info = store.info()
            where = f" ({info.backend}: {info.url})"
        except Exception:  # the message matters more than the location
            where = ""
        shown = ", ".join(repr(task_id) for task_id in foreign[:3])
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        if self.factory.takes_namespace:
            # A namespace no one has used lists someone's tasks: the namespace is not
            # where the store looks, or not where it lists.
            return (
                f"{self.factory.spec} makes a store{where} that already holds checkpoints "
                f"certification did not write ({shown}{more}), although it was given a new "
                f"namespace ({namespace!r}) that no one can have used yet; it refuses to run "
                "there, since it saves, kills writers mid-save and deletes what it wrote. "
                "Either the factory does not put its namespace into the store's location (a "
                "fresh SQLite file, a PostgreSQL table_prefix, a Redis key_prefix, an S3 "
                "prefix), or the store's list_checkpoints() ignores the namespace (a query "
                "without the namespace's WHERE, a SCAN over every key): a bug that would hand "
                f"one namespace's tasks to another's workers. Fix that; pass {self.scratch_hint} "
                "only if everything it lists is disposable (it still deletes only what it wrote)."
            )
        return (
            f"{self.factory.spec} makes a store{where} that already holds checkpoints "
            f"certification did not write ({shown}{more}); it refuses to run there, since it "
            "saves, kills writers mid-save and deletes what it wrote. Give it an empty "
            "namespace of its own: let the factory take a namespace argument and put it into "
            "the store's location (a fresh SQLite file, a PostgreSQL table_prefix, a Redis "
            "key_prefix, an S3 prefix; pytest_agentckpt.certify.builtin:from_env does this for "
            f"the URL in $AGENTCKPT_CERTIFY_URL), or pass {self.scratch_hint} if the store is "
            "scratch and certification may write beside what it holds (it still deletes only "
            "what it wrote)."
        )

    def prepare(self) -> CheckpointStore:
        """Check the factory and the store before any contract; return a first store.

        Raises :class:`~.factory.FactoryError` when the factory fails and
        :class:`~.factory.StoreNotEmptyError` when the store holds someone else's data.
        It also finds out whether namespaces are kept apart (``namespaces_isolated``):
        only then may the run purge the namespaces it made.
        """

        def make() -> CheckpointStore:
            try:
                return self.new_store()
            except (FactoryError, StoreNotEmptyError):
                raise
            except Exception as exc:
                raise FactoryError(
                    f"{self.factory.spec} failed to make a store: {type(exc).__name__}: {exc}"
                ) from None

        first = make()
        if self.factory.takes_namespace:
            second = make()
            probe = self.task_id("isolation")
            try:
                first.save(Checkpoint(task_id=probe, goal="do namespaces share data?"))
                self.namespaces_isolated = second.load(probe) is None and not any(
                    summary.task_id == probe for summary in second.list_checkpoints()
                )
            except Exception:  # a broken store: the contracts will say how; purge nothing
                self.namespaces_isolated = False
            finally:
                with contextlib.suppress(Exception):
                    first.delete(probe)
        return first

    def task_id(self, name: str) -> str:
        """A task id unique to this run."""
        return f"{self.run_id}-{name}-{next(self._counter)}"

    def hooks(self, store: CheckpointStore) -> StoreHooks:
        """The optional hooks of ``store`` (its own, or a built-in adapter)."""
        return hooks_for(store)

    def reproduce(self, contract_id: str) -> str:
        """The command line that repeats this check with this run's seed."""
        command = f"agentckpt certify {self.factory.spec} --only {contract_id} --seed {self.seed}"
        return f"{command} {self.reproduce_options}".rstrip()

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per run (for experiments two contracts judge)."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            self._memo.setdefault(key, value)
            return self._memo[key]  # type: ignore[no-any-return]

    def _delete_own(self, store: CheckpointStore) -> None:
        """Delete this run's checkpoints from ``store``, and nothing else; raise if one
        is still listed after."""
        mine = self.run_id + "-"
        for summary in _listing_past_damage(store):
            if summary.task_id.startswith(mine):
                with contextlib.suppress(Exception):
                    store.delete(summary.task_id)
        left = [summary.task_id for summary in _listing_past_damage(store) if summary.task_id.startswith(mine)]
        if left:
            raise RuntimeError(f"{len(left)} of the run's checkpoints are still listed after their delete")

    def close(self) -> None:
        """Remove what the run wrote and close every store it made.

        A namespace is purged whole (the store's purge hook) only if the factory keeps
        namespaces apart and the namespace held nothing when the run made it; everywhere
        else the run deletes its own task ids one by one. Each namespace is cleaned once,
        after its other instances are closed, with the instance that can purge it; when
        that one fails (a contract closed it to reopen the store), with a new instance of
        the namespace. Errors in clean-up or close must not hide the results, so they are
        suppressed.
        """
        with self._lock:
            made, self._made = self._made, []
        by_namespace: dict[str, list[_Made]] = {}
        for entry in made:
            by_namespace.setdefault(entry.namespace, []).append(entry)
        for namespace, entries in by_namespace.items():
            whole = self.namespaces_isolated and any(entry.purgeable for entry in entries)
            open_entries = [entry for entry in entries if not entry.closed]
            chosen = next(
                (entry for entry in open_entries if entry.purgeable),
                open_entries[0] if open_entries else None,
            )
            for entry in open_entries:
                if entry is not chosen:
                    with contextlib.suppress(Exception):
                        entry.store.close()
            cleaned = False
            if chosen is not None:
                with contextlib.suppress(Exception):
                    self._clean(chosen.store, whole=whole)
                    cleaned = True
            if not cleaned:
                # Every instance was closed, or the one chosen failed: a new one cleans.
                with contextlib.suppress(Exception):
                    again = self.factory.make(namespace)
                    try:
                        self._clean(again, whole=whole)
                        cleaned = True
                    finally:
                        again.close()
            if not cleaned:
                self.clean_up_failed = True
            if chosen is not None:
                with contextlib.suppress(Exception):
                    chosen.store.close()

    def _clean(self, store: CheckpointStore, *, whole: bool) -> None:
        """Purge ``store``'s namespace (``whole``, when the store has the hook and it
        works), else delete this run's checkpoints from it; raise if neither worked."""
        purge = hooks_for(store).purge if whole else None
        if purge is not None:
            try:
                purge()
                return
            except Exception:
                pass
        self._delete_own(store)


def _listing_past_damage(store: CheckpointStore) -> list[Any]:
    """``store.list_checkpoints()``; where a checkpoint the run did not write is damaged
    (``--scratch`` beside someone's data), the listing that skips unreadable tasks, on a
    store that offers it: a CLI round's run left its 129 tasks behind, its clean-up's
    listing stopped by the user's damaged one."""
    from stores import CorruptCheckpointError, UnsupportedSchemaVersionError

    try:
        return list(store.list_checkpoints())
    except (CorruptCheckpointError, UnsupportedSchemaVersionError) as exc:
        if is_certify_task(str(getattr(exc, "task_id", ""))):
            raise
        skipped: list[BaseException] = []
        return list(store.list_checkpoints(on_unreadable=skipped.append))  # type: ignore[call-arg]
