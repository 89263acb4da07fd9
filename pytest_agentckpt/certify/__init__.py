"""Certify a checkpoint store: the contract suite behind ``agentckpt certify``.

>>> from pytest_agentckpt.certify import certify
>>> report = certify("pytest_agentckpt.certify.builtin:memory", quick=True,
...                  only=["delete_idempotent"], figures=False)
>>> report.passed
True

The same contracts run as pytest tests (``pytest --agentckpt-certify MODULE:FACTORY``).
See ``docs/certify.md`` for what each contract means and the hooks a store can offer.
"""

from __future__ import annotations

from .context import Budget, CertifyContext, ContractFailed, NotApplicable, NotCheckable
from .contracts import CONTRACTS, Contract, contract_by_id
from .factory import FactoryError, StoreFactory
from .hooks import CAPABILITIES, StoreHooks, SupportsCorruption, SupportsRestart, SupportsSchemaBump
from .runner import CertificationReport, ContractResult, Outcome, certify, run_contract

__all__ = [
    "CAPABILITIES",
    "CONTRACTS",
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
    "SupportsCorruption",
    "SupportsRestart",
    "SupportsSchemaBump",
    "certify",
    "contract_by_id",
    "run_contract",
]
