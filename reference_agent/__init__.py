"""The reference checkpointed agent on the ``anthropic`` SDK."""

from __future__ import annotations

from .toolbox import ToolResult, ToolSpec, Toolbox, UnknownToolError, tool

__all__ = ["ToolResult", "ToolSpec", "Toolbox", "UnknownToolError", "tool"]
