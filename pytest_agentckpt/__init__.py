"""pytest-agentckpt: prove that LLM agents survive crashes.

The public surface lives here; internals are in the submodules. Importing this package
is light: names are imported from their submodule on first use.

>>> from pytest_agentckpt import validate_messages
>>> validate_messages([{"role": "user", "content": "Hello"}])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reference_agent.offline import Exchange, FakeMessagesAPI, offline_client
    from reference_agent.scripted import (
        CannedModel,
        Plan,
        PlanModel,
        ScriptedModel,
        Step,
        ToolCall,
        message_json,
    )
    from reference_agent.toolbox import TOOL_KINDS, Toolbox, ToolResult, ToolSpec, tool
    from reference_agent.validation import InvalidHistoryError, validate_messages
    from reference_agent.world import Effect, World

    from ._subagents import sub_agent_plans
    from ._takeover import TakeoverFailure, TakeoverStats, takeover
    from .fake_api import instant_retries, intercept_httpx2, respx_mock, respx_transport
    from .faults import (
        DEFAULT_FAULT_KINDS,
        FAULT_KINDS,
        FAULT_POINTS,
        ApiFault,
        Crash,
        CrashAt,
        FaultPlan,
        FaultyStore,
        StoreFault,
    )
    from .harness import (
        FuzzReport,
        NondeterministicFailure,
        NotCheckableWarning,
        OracleFailure,
        ResumeDriftWarning,
        UnsafeToolWarning,
        fuzz,
        replay,
    )
    from .oracles import ORACLES

# public name -> the module that defines it
_LAZY: dict[str, str] = {
    # validator (fixed names)
    "validate_messages": "reference_agent.validation",
    "InvalidHistoryError": "reference_agent.validation",
    # fake Messages API
    "FakeMessagesAPI": "reference_agent.offline",
    "Exchange": "reference_agent.offline",
    "offline_client": "reference_agent.offline",
    "intercept_httpx2": "pytest_agentckpt.fake_api",
    "respx_mock": "pytest_agentckpt.fake_api",
    "respx_transport": "pytest_agentckpt.fake_api",
    "instant_retries": "pytest_agentckpt.fake_api",
    # scripted models
    "ScriptedModel": "reference_agent.scripted",
    "PlanModel": "reference_agent.scripted",
    "CannedModel": "reference_agent.scripted",
    "Plan": "reference_agent.scripted",
    "Step": "reference_agent.scripted",
    "ToolCall": "reference_agent.scripted",
    "message_json": "reference_agent.scripted",
    # tools
    "tool": "reference_agent.toolbox",
    "Toolbox": "reference_agent.toolbox",
    "ToolSpec": "reference_agent.toolbox",
    "ToolResult": "reference_agent.toolbox",
    "TOOL_KINDS": "reference_agent.toolbox",
    # chaos harness
    "fuzz": "pytest_agentckpt.harness",
    "replay": "pytest_agentckpt.harness",
    "sub_agent_plans": "pytest_agentckpt._subagents",
    "FuzzReport": "pytest_agentckpt.harness",
    "OracleFailure": "pytest_agentckpt.harness",
    "UnsafeToolWarning": "pytest_agentckpt.harness",
    "ResumeDriftWarning": "pytest_agentckpt.harness",
    "NondeterministicFailure": "pytest_agentckpt.harness",
    "NotCheckableWarning": "pytest_agentckpt.harness",
    "Crash": "pytest_agentckpt.faults",
    "CrashAt": "pytest_agentckpt.faults",
    "ApiFault": "pytest_agentckpt.faults",
    "StoreFault": "pytest_agentckpt.faults",
    "FaultPlan": "pytest_agentckpt.faults",
    "FaultyStore": "pytest_agentckpt.faults",
    "FAULT_POINTS": "pytest_agentckpt.faults",
    "FAULT_KINDS": "pytest_agentckpt.faults",
    "DEFAULT_FAULT_KINDS": "pytest_agentckpt.faults",
    "ORACLES": "pytest_agentckpt.oracles",
    "takeover": "pytest_agentckpt._takeover",
    "TakeoverFailure": "pytest_agentckpt._takeover",
    "TakeoverStats": "pytest_agentckpt._takeover",
    "World": "reference_agent.world",
    "Effect": "reference_agent.world",
}

__all__ = [
    "DEFAULT_FAULT_KINDS",
    "FAULT_KINDS",
    "FAULT_POINTS",
    "ORACLES",
    "TOOL_KINDS",
    "ApiFault",
    "CannedModel",
    "Crash",
    "CrashAt",
    "Effect",
    "Exchange",
    "FakeMessagesAPI",
    "FaultPlan",
    "FaultyStore",
    "FuzzReport",
    "InvalidHistoryError",
    "NondeterministicFailure",
    "NotCheckableWarning",
    "OracleFailure",
    "Plan",
    "PlanModel",
    "ResumeDriftWarning",
    "ScriptedModel",
    "Step",
    "StoreFault",
    "TakeoverFailure",
    "TakeoverStats",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Toolbox",
    "UnsafeToolWarning",
    "World",
    "fuzz",
    "instant_retries",
    "intercept_httpx2",
    "message_json",
    "offline_client",
    "replay",
    "respx_mock",
    "respx_transport",
    "sub_agent_plans",
    "takeover",
    "tool",
    "validate_messages",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
