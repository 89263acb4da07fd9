"""The checkpoint schema: what an agent saves so that it can resume after a crash."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "SCHEMA_VERSION",
    "ActionRecord",
    "ActionState",
    "Checkpoint",
    "CheckpointStatus",
    "CheckpointSummary",
    "RecordedResult",
    "utcnow",
]

#: The newest checkpoint schema this code reads and writes.
SCHEMA_VERSION = 1

CheckpointStatus = Literal["running", "completed", "failed"]
ActionState = Literal["intent", "done", "unknown"]


def utcnow() -> _dt.datetime:
    """The current time, timezone-aware in UTC."""
    return _dt.datetime.now(_dt.timezone.utc)


class RecordedResult(BaseModel):
    """The outcome of a tool call, as it becomes a ``tool_result`` block."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    content: str | list[dict[str, Any]]
    is_error: bool = False


class ActionRecord(BaseModel):
    """One irreversible tool call in the write-ahead ledger.

    ``intent`` is saved before the effect, ``done`` (with ``result``) after it. An
    ``intent`` found on resume means the outcome is unknown to the agent; ``unknown`` is
    how the agent records that it answered the model so.
    """

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    tool_use_id: str
    tool_name: str
    input: dict[str, Any]
    idempotency_key: str
    state: ActionState = "intent"
    result: RecordedResult | None = None
    recorded_at: _dt.datetime = Field(default_factory=utcnow)


class Checkpoint(BaseModel):
    """Everything a checkpointed agent needs to resume a task.

    ``messages`` is the Messages API ``messages`` array exactly as it is sent (JSON-safe
    dicts), so thinking signatures and any block type survive byte for byte.
    ``version`` is the compare-and-set token: 0 for a checkpoint never saved, and the
    stored version after every successful save.

    >>> cp = Checkpoint(task_id="t1", goal="file the report")
    >>> cp.version, cp.status
    (0, 'running')
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False, ser_json_inf_nan="constants")

    schema_version: int = SCHEMA_VERSION
    task_id: str = Field(min_length=1)
    goal: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    completed_tasks: list[str] = Field(default_factory=list)
    artifacts: dict[str, Any] = Field(default_factory=dict)
    iteration: int = Field(default=0, ge=0)
    status: CheckpointStatus = "running"
    final_answer: str | None = None
    actions: list[ActionRecord] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: _dt.datetime = Field(default_factory=utcnow)
    updated_at: _dt.datetime = Field(default_factory=utcnow)
    version: int = Field(default=0, ge=0)

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if value < 1:
            raise ValueError("schema_version must be >= 1")
        return value

    def action(self, tool_use_id: str) -> ActionRecord | None:
        """The ledger entry for ``tool_use_id``, if any."""
        for record in self.actions:
            if record.tool_use_id == tool_use_id:
                return record
        return None


class CheckpointSummary(BaseModel):
    """A checkpoint's identity and state without its history, as listings return it."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    status: CheckpointStatus
    #: Held to the checkpoint's own bounds: a head whose iteration was edited to -3 was
    #: listed as a sound task that a load (and the CLI's ``status``) called corrupt.
    iteration: int = Field(ge=0)
    version: int = Field(ge=0)
    metadata: dict[str, Any]
    updated_at: _dt.datetime
