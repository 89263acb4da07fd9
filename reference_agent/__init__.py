"""The reference checkpointed agent on the ``anthropic`` SDK.

>>> from reference_agent import FakeMessagesAPI, Plan, Toolbox, run
>>> from stores import open_store
>>> api = FakeMessagesAPI(Plan(steps=(), final_answer="done"))
>>> run("t1", "say done", client=api.client(), store=open_store("memory://"), tools=Toolbox([]))
'done'

Importing the package is light: the names that need the ``anthropic`` SDK or ``httpx2``
(the loop, the fake API) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    AgentStoppedError,
    ContextWindowExceededError,
    IntentNotRecordedError,
    IterationBudgetExceededError,
    ModelRefusalError,
    TaskFailedError,
    TaskOwnedElsewhereError,
    UnexpectedStopReasonError,
    UnresumableHistoryError,
)
from .repair import RepairReport, repair_history, repair_history_report, unknown_outcome_result
from .scripted import CannedModel, Plan, PlanModel, Step, ToolCall
from .toolbox import (
    TOOL_KINDS,
    Toolbox,
    ToolDefinitionError,
    ToolKind,
    ToolResult,
    ToolSpec,
    UnknownToolError,
    tool,
)
from .validation import InvalidHistoryError, validate_messages
from .world import Effect, World

if TYPE_CHECKING:
    from .agent import DEFAULT_MODEL, AgentEvent, idempotency_key_for, run
    from .demo_tools import demo_plan, demo_toolbox
    from .offline import FakeMessagesAPI, offline_client

__all__ = [
    "DEFAULT_MODEL",
    "TOOL_KINDS",
    "AgentEvent",
    "AgentStoppedError",
    "CannedModel",
    "ContextWindowExceededError",
    "Effect",
    "FakeMessagesAPI",
    "IntentNotRecordedError",
    "InvalidHistoryError",
    "IterationBudgetExceededError",
    "ModelRefusalError",
    "Plan",
    "PlanModel",
    "RepairReport",
    "Step",
    "TaskFailedError",
    "TaskOwnedElsewhereError",
    "ToolCall",
    "ToolDefinitionError",
    "ToolKind",
    "ToolResult",
    "ToolSpec",
    "Toolbox",
    "UnexpectedStopReasonError",
    "UnknownToolError",
    "UnresumableHistoryError",
    "World",
    "demo_plan",
    "demo_toolbox",
    "idempotency_key_for",
    "offline_client",
    "repair_history",
    "repair_history_report",
    "run",
    "tool",
    "unknown_outcome_result",
    "validate_messages",
]

_LAZY = {
    "DEFAULT_MODEL": ".agent",
    "AgentEvent": ".agent",
    "idempotency_key_for": ".agent",
    "run": ".agent",
    "demo_plan": ".demo_tools",
    "demo_toolbox": ".demo_tools",
    "FakeMessagesAPI": ".offline",
    "offline_client": ".offline",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'reference_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
