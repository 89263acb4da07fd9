"""Certify a checkpoint store: the contract suite behind ``agentckpt certify``.

>>> from pytest_agentckpt.certify import certify
>>> report = certify("pytest_agentckpt.certify.builtin:memory", quick=True,
...                  only=["delete_idempotent"], figures=False)
>>> report.passed
True

Certification writes only in namespaces of its own and deletes only what it wrote; a
store that already holds someone's checkpoints is refused unless ``scratch=True``.
The same contracts run as pytest tests (``pytest --agentckpt-certify MODULE:FACTORY``).
See ``docs/certify.md`` for what each contract means and the hooks a store can offer.
"""

from __future__ import annotations

from .context import Budget, CertifyContext, ContractFailed, NotApplicable, NotCheckable
from .contracts import CONTRACTS, Contract, contract_by_id
from .factory import FactoryError, StoreFactory, StoreNotEmptyError
from .hooks import CAPABILITIES, StoreHooks, SupportsCorruption, SupportsRestart, SupportsSchemaBump
from .runner import (
    EXIT_CERTIFIED,
    EXIT_FAILED,
    EXIT_NOT_CHECKABLE,
    EXIT_USAGE,
    CertificationReport,
    ContractResult,
    Outcome,
    certify,
    run_contract,
)

__all__ = [
    "CAPABILITIES",
    "CONTRACTS",
    "EXIT_CERTIFIED",
    "EXIT_FAILED",
    "EXIT_NOT_CHECKABLE",
    "EXIT_USAGE",
    "Budget",
    "CertificationReport",
    "CertifyContext",
    "Contract",
    "ContractFailed",
    "ContractResult",
    "FactoryError",
    "NotApplicable",
    "NotCheckable",
    "Outcome",
    "StoreFactory",
    "StoreHooks",
    "StoreNotEmptyError",
    "SupportsCorruption",
    "SupportsRestart",
    "SupportsSchemaBump",
    "certify",
    "contract_by_id",
    "run_contract",
]
