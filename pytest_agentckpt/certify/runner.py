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

from .context import (
    FULL,
    QUICK,
    CertifyContext,
    ContractFailed,
    NotApplicable,
    NotCheckable,
)
from .contracts import CONTRACTS, Contract, contract_by_id
from .factory import FactoryError, StoreFactory
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

    @property
    def passed(self) -> bool:
        """True when certified: every required contract that ran was checked and passed."""
        return self.exit_code() == EXIT_CERTIFIED

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
            "exit_code": self.exit_code(),
            "started_at": self.started_at,
            "seconds": round(self.seconds, 2),
            "results": [r.as_dict() for r in self.results],
            "figures": self.figures,
        }


#: Called with ("start", contract id, None) and ("done", contract id, result).
Progress = Callable[[str, str, "ContractResult | None"], None]


def _run_bounded(function: Callable[[], Any], timeout: float) -> tuple[bool, Any, BaseException | None]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = function()
        except BaseException as exc:  # reported as the contract's result
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True, name="agentckpt-certify")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return False, None, None
    return True, box.get("value"), box.get("error")


def run_contract(ctx: CertifyContext, contract: Contract) -> ContractResult:
    """Run one contract within the budget's time limit."""
    started = time.monotonic()
    finished, note, error = _run_bounded(lambda: contract.check(ctx), ctx.budget.contract_timeout)
    seconds = time.monotonic() - started

    def result(outcome: Outcome, summary: str, details: str = "", reproduce: str = "") -> ContractResult:
        return ContractResult(contract.id, contract.title, contract.required, outcome, summary,
                              details, reproduce, seconds)

    if not finished:
        return result(Outcome.ERROR, f"did not finish within {ctx.budget.contract_timeout:.0f}s "
                      "(a store call may hang)", reproduce=ctx.reproduce(contract.id))
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
    return result(Outcome.ERROR, f"{type(error).__name__}: {error}", trace, ctx.reproduce(contract.id))


def certify(
    factory: StoreFactory | str,
    *,
    quick: bool = False,
    seed: int | None = None,
    only: Iterable[str] | None = None,
    figures: bool = True,
    progress: Progress | None = None,
    scratch: bool = False,
) -> CertificationReport:
    """Run the contracts (all, or ``only`` those named) against stores from ``factory``.

    An empty ``only`` is a ``ValueError`` (it would otherwise run every contract).

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
    seed = random.randrange(2**32) if seed is None else seed
    ctx = CertifyContext(factory=factory, seed=seed, budget=QUICK if quick else FULL,
                         scratch=scratch)
    started = time.monotonic()
    try:
        probe = ctx.prepare()
        try:
            info = probe.info()
        except Exception as exc:
            raise FactoryError(
                f"{factory.spec} made a store whose info() failed: {type(exc).__name__}: {exc}"
            ) from None
        report = CertificationReport(
            factory=factory.spec, backend=info.backend, store_url=info.url, seed=seed, quick=quick,
            started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
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
            finished, value, error = _run_bounded(lambda: measure_figures(ctx), ctx.budget.contract_timeout)
            if finished and error is None:
                report.figures.update(value)
            else:
                report.figures["error"] = "timed out" if not finished else f"{type(error).__name__}: {error}"
            report.figures.update(ctx.figures)
            if ctx.refusal is not None:
                raise ctx.refusal
            if progress:
                progress("done", "figures", None)
    finally:
        ctx.close()
    report.seconds = time.monotonic() - started
    return report
