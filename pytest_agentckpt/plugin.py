"""pytest wiring: registers the fixture modules and the plugin's hooks.

Kept thin and import-light (heavy imports happen inside fixtures), like Hypothesis's own
plugin. Each concern registers its options and fixtures from its own module under
``pytest_agentckpt.fixtures``.
"""

from __future__ import annotations

import importlib

import pytest

_FIXTURE_MODULES = (
    "pytest_agentckpt.fixtures.backends",
    "pytest_agentckpt.fixtures.api",
    "pytest_agentckpt.fixtures.harness",
    "pytest_agentckpt.fixtures.certify",
    "pytest_agentckpt.fixtures.chaos",
)


@pytest.hookimpl
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    # Registering from here (the earliest hook) lets each module add its own options.
    for name in _FIXTURE_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        if not pluginmanager.is_registered(module):
            pluginmanager.register(module, name)
