"""Run the contracts against a store factory and collect results and figures.

Every contract runs in a worker thread with a time limit, so a store call that hangs
turns into an ``error`` result instead of a run that never ends.
"""

from __future__ import annotations

import datetime as _dt
import enum
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from stores import ConflictError, CorruptCheckpointError, StoreInfo, UnsupportedSchemaVersionError

from .context import (
    FULL,
    QUICK,
    CertifyContext,
    ContractFailed,
    NotApplicable,
    NotCheckable,
)
from .contracts import CONTRACTS, Contract, contract_by_id
from .factory import FactoryError, StoreFactory, is_certify_task
from .figures import measure_figures

__all__ = [
    "EXIT_CERTIFIED",
    "EXIT_FAILED",
    "EXIT_NOT_CHECKABLE",
    "EXIT_USAGE",
    "CertificationReport",
    "ContractResult",
    "Outcome",
    "certify",
    "run_contract",
]

#: Exit statuses of ``agentckpt certify``: certified; a required contract failed or
#: errored; a usage error or a refused store; required contracts not checked.
EXIT_CERTIFIED, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_CHECKABLE = 0, 1, 2, 3


class Outcome(str, enum.Enum):
    """How a contract went. Only ``passed`` is a pass."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NOT_CHECKABLE = "not checkable"
    NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class ContractResult:
    """The result of one contract: what failed and how to reproduce it, or a note."""

    contract: str
    title: str
    required: bool
    outcome: Outcome
    summary: str
    details: str = ""
    reproduce: str = ""
    seconds: float = 0.0
    #: For ``not checkable``: what would make it checkable (a hook, shared processes).
    needs: str = ""

    @property
    def blocking(self) -> bool:
        """A required contract that failed or could not run."""
        return self.required and self.outcome in (Outcome.FAILED, Outcome.ERROR)

    @property
    def unchecked(self) -> bool:
        """A required contract the run could not check: it is not a pass."""
        return self.required and self.outcome in (Outcome.NOT_CHECKABLE, Outcome.NOT_APPLICABLE)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "contract": self.contract,
            "title": self.title,
            "required": self.required,
            "outcome": self.outcome.value,
            "summary": self.summary,
            "details": self.details,
            "reproduce": self.reproduce,
            "needs": self.needs,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class CertificationReport:
    """Everything one run found."""

    factory: str
    backend: str
    store_url: str
    seed: int
    quick: bool
    results: list[ContractResult] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    seconds: float = 0.0
    #: Required contracts the run left out (``only``): a run that left any out passed
    #: at most what it ran, and is not a certification.
    not_run: list[str] = field(default_factory=list)
    #: Set when the clean-up could not delete every checkpoint the run wrote: what was
    #: left and how to remove it (their task ids all start with the run's id).
    left_behind: str | None = None

    @property
    def passed(self) -> bool:
        """Every required contract that ran was checked and passed (exit status 0).

        With ``only``, that is not a certification: see :attr:`certified`.
        """
        return self.exit_code() == EXIT_CERTIFIED

    @property
    def certified(self) -> bool:
        """Every required contract ran, was checked and passed."""
        return self.passed and not self.not_run

    def exit_code(self, *, strict: bool = False) -> int:
        """0 certified, 1 a required contract failed, 3 one was not checkable.

        ``strict`` holds the optional contracts the store declares to the same rule.

        >>> report = CertificationReport("m:f", "memory", "memory://", seed=1, quick=True)
        >>> report.exit_code()
        0
        """
        def judged(result: ContractResult) -> bool:
            return result.required or (strict and result.outcome is not Outcome.NOT_APPLICABLE)

        if any(r.outcome in (Outcome.FAILED, Outcome.ERROR) and judged(r) for r in self.results):
            return EXIT_FAILED
        if any(r.unchecked or (strict and judged(r) and r.outcome is Outcome.NOT_CHECKABLE)
               for r in self.results):
            return EXIT_NOT_CHECKABLE
        return EXIT_CERTIFIED

    def result(self, contract_id: str) -> ContractResult:
        """The result of ``contract_id``."""
        for result in self.results:
            if result.contract == contract_id:
                return result
        raise KeyError(contract_id)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "factory": self.factory,
            "backend": self.backend,
            "store_url": self.store_url,
            "seed": self.seed,
            "quick": self.quick,
            "passed": self.passed,
            "certified": self.certified,
            "not_run": list(self.not_run),
            "exit_code": self.exit_code(),
            "started_at": self.started_at,
            "seconds": round(self.seconds, 2),
            "results": [r.as_dict() for r in self.results],
            "figures": self.figures,
            "left_behind": self.left_behind,
        }


#: Called with ("start", contract id, None) and ("done", contract id, result).
Progress = Callable[[str, str, "ContractResult | None"], None]


#: After Ctrl-C, how long the run waits for the check under way to stop writing.
STOP_GRACE = 15.0


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``still_running`` if the check under way did not stop in time
    (it may have written after the clean-up)."""

    def __init__(self, run_id: str, still_running: bool) -> None:
        super().__init__()
        self.run_id = run_id
        self.still_running = still_running


def _run_bounded(function: Callable[[], Any], timeout: float,
                 ctx: CertifyContext | None = None) -> tuple[bool, Any, BaseException | None]:
    box: dict[str, Any] = {}
    # The end is waited for on an Event, not with Thread.join: a join that a Ctrl-C
    # interrupts leaves the thread looking finished (is_alive() False, every later join
    # returning at once, on Python 3.11), so the clean-up ran while the check still wrote.
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = function()
        except BaseException as exc:  # reported as the contract's result
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=target, daemon=True, name="agentckpt-certify")
    worker.start()
    try:
        done.wait(timeout)
    except KeyboardInterrupt:
        if ctx is None:
            raise
        # Stop the check at its next step and wait for it, so that the clean-up that
        # follows sees everything it wrote.
        ctx.stopping.set()
        _wait_through_interrupts(done, STOP_GRACE)
        raise Interrupted(ctx.run_id, still_running=not done.is_set()) from None
    if not done.is_set():
        return False, None, None
    return True, box.get("value"), box.get("error")


def _wait_through_interrupts(done: threading.Event, timeout: float, presses: int = 2) -> bool:
    """Wait up to ``timeout`` for ``done``, through up to ``presses`` more Ctrl-Cs (a second
    press, or the signal the other members of a process group got too); whether it is set."""
    deadline = time.monotonic() + timeout
    while not done.is_set() and time.monotonic() < deadline:
        try:
            done.wait(max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt:
            presses -= 1
            if presses < 0:
                break
    return done.is_set()


def _close_shielded(ctx: CertifyContext) -> bool:
    """Run the clean-up (bounded like the rest: a store that hangs must not hang it for
    ever); whether it removed everything the run wrote. A Ctrl-C during it does not
    abandon it, up to two presses: abandoned, the run's tasks stayed behind while the run
    said it had deleted them."""
    done = threading.Event()
    box: dict[str, bool] = {}

    def close() -> None:
        try:
            ctx.close()
            box["closed"] = True
        finally:
            done.set()

    threading.Thread(target=close, daemon=True, name="agentckpt-certify-clean-up").start()
    return _wait_through_interrupts(done, ctx.budget.contract_timeout) and box.get("closed", False) and not ctx.clean_up_failed


#: The contracts that damage stored data on purpose (through the store's hooks).
_DAMAGES_DATA = frozenset({"corruption_reported", "newer_schema_refused"})


def run_contract(ctx: CertifyContext, contract: Contract) -> ContractResult:
    """Run one contract within the budget's time limit."""
    started = time.monotonic()
    finished, note, error = _run_bounded(lambda: contract.check(ctx), ctx.budget.contract_timeout, ctx)
    seconds = time.monotonic() - started
    if finished:
        # Its instances are done with (one that went over the limit may still use its own).
        ctx.close_made()

    def result(outcome: Outcome, summary: str, details: str = "", reproduce: str = "") -> ContractResult:
        return ContractResult(contract.id, contract.title, contract.required, outcome, summary,
                              details, reproduce, seconds)

    if not finished:
        limit = ctx.budget.contract_timeout
        shrinking = (
            " (or Hypothesis found a failure and is shrinking it to the smallest program: it "
            "reports the failure once the shrink ends, and a store slower than a millisecond a "
            "call makes that take minutes)"
            if contract.id == "model_based" else ""
        )
        return result(Outcome.ERROR, f"did not finish within {limit:g}s, the limit per contract: "
                      f"a store call may hang, or the store is slow{shrinking}; a slow store needs a "
                      f"higher limit (--timeout SECONDS, e.g. --timeout {limit * 4:g})",
                      reproduce=ctx.reproduce(contract.id))
    if error is None:
        return result(Outcome.PASSED, str(note))
    if isinstance(error, ContractFailed):
        return result(Outcome.FAILED, error.summary, error.details,
                      error.reproduce or ctx.reproduce(contract.id))
    if isinstance(error, NotCheckable):
        return replace(result(Outcome.NOT_CHECKABLE, str(error)), needs=error.needs)
    if isinstance(error, NotApplicable):
        return result(Outcome.NOT_APPLICABLE, str(error))
    trace = "".join(traceback.format_exception(error))
    foreign = str(getattr(error, "task_id", ""))
    if isinstance(error, CorruptCheckpointError | UnsupportedSchemaVersionError) and foreign and not is_certify_task(foreign):
        # With --scratch, beside someone's data: their damaged checkpoint stopped a
        # listing. Not the store's fault, and not certification's doing (a CLI round was
        # told the store had called certification's own writing corrupt).
        return result(
            Outcome.ERROR,
            f"a checkpoint certification did not write ({foreign!r}) cannot be read, and the "
            f"store's listing raised on it ({type(error).__name__}): certification writes beside "
            "what a --scratch store holds and lists it. Delete or repair that checkpoint, or "
            "certify an empty store (a namespace of its own)",
            trace, ctx.reproduce(contract.id),
        )
    if isinstance(error, CorruptCheckpointError) and contract.id not in _DAMAGES_DATA:
        # Certification damaged nothing here: the store called its own writing corrupt.
        return result(
            Outcome.FAILED,
            f"the store called a checkpoint that certification saved, and did not damage, "
            f"corrupt ({error}). CorruptCheckpointError is for stored data no save would "
            "have written; this was left by the store's own operations: a delete that "
            "removed part of a task (its head but not its messages, say), or a save that "
            "wrote part of one; or an instance reads through a view of its own that another "
            "instance's save made out of date (a cached pointer, index or file name whose "
            "data that save replaced)",
            trace, ctx.reproduce(contract.id),
        )
    if isinstance(error, ConflictError):
        # A contract saves from the checkpoint its previous save returned (or creates the
        # task new): unless another of its writers saved meanwhile, the store disagrees
        # with itself about the version.
        return result(
            Outcome.ERROR,
            f"{type(error).__name__}: {error}. The contract saved from the checkpoint its "
            "previous save returned (or created the task new): unless another writer of the "
            "contract saved this task meanwhile, the store disagrees with itself about the "
            "version (save returns another version than it stored, or a deleted task still "
            "counts as existing). See round_trip and delete_idempotent",
            trace, ctx.reproduce(contract.id),
        )
    return result(Outcome.ERROR, f"{type(error).__name__}: {error}", trace, ctx.reproduce(contract.id))


#: The longest time limit a contract may have: a day. A longer one (``inf`` included) is
#: refused, since the waits it bounds cannot take it (and no store needs it).
MAX_TIMEOUT = 86400.0


def certify(
    factory: StoreFactory | str,
    *,
    quick: bool = False,
    seed: int | None = None,
    only: Iterable[str] | None = None,
    figures: bool = True,
    progress: Progress | None = None,
    scratch: bool = False,
    timeout: float | None = None,
) -> CertificationReport:
    """Run the contracts (all, or ``only`` those named) against stores from ``factory``.

    An empty ``only`` is a ``ValueError`` (it would otherwise run every contract). A run
    with ``only`` that leaves required contracts out is not a certification: the report
    lists them in ``not_run`` and ``certified`` is false.

    ``timeout`` is the limit in seconds for each contract, for the figures and for the
    first call of the factory and the first listing (default: 60 with ``quick``, else
    180); a slow store needs more.

    Every store is made in a namespace of the run's own and the run deletes only what it
    wrote. A store that already holds checkpoints it did not write raises
    :class:`~.factory.StoreNotEmptyError` before anything is written, unless ``scratch``
    (then it writes beside them and still deletes only its own); a factory that fails
    raises :class:`~.factory.FactoryError`.

    >>> report = certify("pytest_agentckpt.certify.builtin:memory", quick=True,
    ...                  only=["compare_and_set"], figures=False)
    >>> report.passed, report.result("compare_and_set").outcome.value
    (True, 'passed')
    """
    if isinstance(factory, str):
        factory = StoreFactory.from_spec(factory)
    if only is not None:
        only = list(only)
        if not only:
            raise ValueError(
                "only is empty: name the contracts to run, or pass None to run them all"
            )
    # A contract named twice runs once, in the order first named.
    contracts = [contract_by_id(c) for c in dict.fromkeys(only)] if only is not None else list(CONTRACTS)
    if timeout is not None and not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(
            f"timeout must be a positive number of seconds, at most {MAX_TIMEOUT:g} (a day), not {timeout!r}"
        )
    seed = random.randrange(2**32) if seed is None else seed
    ctx = new_context(factory, seed=seed, quick=quick, scratch=scratch, timeout=timeout)
    started = time.monotonic()
    interrupted: KeyboardInterrupt | None = None
    try:
        info = _prepare(ctx)
        report = CertificationReport(
            factory=factory.spec, backend=info.backend, store_url=info.url, seed=seed, quick=quick,
            started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            not_run=[c.id for c in CONTRACTS if c.required and c not in contracts],
        )
        for contract in contracts:
            if progress:
                progress("start", contract.id, None)
            outcome = run_contract(ctx, contract)
            if ctx.refusal is not None:  # a store met mid-run held someone else's data
                raise ctx.refusal
            report.results.append(outcome)
            if progress:
                progress("done", contract.id, outcome)
        if figures:
            if progress:
                progress("start", "figures", None)
            finished, value, error = _run_bounded(lambda: measure_figures(ctx),
                                                  ctx.budget.contract_timeout, ctx)
            if finished and error is None:
                report.figures.update(value)
            else:
                report.figures["error"] = "timed out" if not finished else f"{type(error).__name__}: {error}"
            report.figures.update(ctx.figures)
            if ctx.refusal is not None:
                raise ctx.refusal
            if progress:
                progress("done", "figures", None)
    except KeyboardInterrupt as exc:
        interrupted = exc
        raise
    finally:
        cleaned = _close_shielded(ctx)
        if interrupted is not None:
            # What the CLI says of the interrupted run: whether its tasks may remain.
            interrupted.cleaned = cleaned  # type: ignore[attr-defined]
            interrupted.run_id = ctx.run_id  # type: ignore[attr-defined]
    report.seconds = time.monotonic() - started
    if not cleaned:
        # (Set here, not in the clean-up: a run that failed before its report was made,
        # its first listing refused, say, has no report to say it in.)
        report.left_behind = (
            f"the clean-up could not delete every checkpoint this run wrote: their task ids "
            f"start with {ctx.run_id + '-'!r} (list them with list_checkpoints and delete "
            "them; a damaged checkpoint of someone else's may have stopped the listing)"
        )
    return report


def new_context(
    factory: StoreFactory,
    *,
    seed: int,
    quick: bool,
    scratch: bool,
    timeout: float | None,
    scratch_hint: str = "--scratch",
) -> CertifyContext:
    """A run's context from what the user chose: the budget, and the options a failure's
    ``reproduce:`` line repeats (the CLI's names, whichever form the run was started in)."""
    budget = QUICK if quick else FULL
    if timeout is not None:
        budget = replace(budget, contract_timeout=float(timeout))
    options = [*(["--quick"] if quick else []), *(["--scratch"] if scratch else []),
               *([f"--timeout {timeout:g}"] if timeout is not None else [])]
    return CertifyContext(factory=factory, seed=seed, budget=budget, scratch=scratch,
                          scratch_hint=scratch_hint, reproduce_options=" ".join(options))


def _prepare(ctx: CertifyContext, option: str = "--timeout") -> StoreInfo:
    """Make a first store, list it and read its info, within the time limit (``option``
    names the setting that raises it, in the message of a run that hit it)."""
    spec, limit = ctx.factory.spec, ctx.budget.contract_timeout

    def first() -> StoreInfo:
        probe = ctx.prepare()
        try:
            return probe.info()
        except Exception as exc:
            raise FactoryError(
                f"{spec} made a store whose info() failed: {type(exc).__name__}: {exc}"
            ) from None

    finished, info, error = _run_bounded(first, limit, ctx)
    if not finished:
        raise FactoryError(
            f"{spec}: calling the factory and listing the store it made did not finish within "
            f"{limit:g}s, so nothing was certified: the factory or the store's first call hangs "
            "(is its backend reachable? does the factory wait for something?); if the store is "
            f"only slow, raise the limit with {option} SECONDS"
        )
    if error is not None:
        raise error
    assert isinstance(info, StoreInfo)
    return info
