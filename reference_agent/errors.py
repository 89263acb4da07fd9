"""Why the reference agent stopped without an answer.

Every stop is an :class:`AgentStoppedError` carrying the task id; the checkpoint is left
in a state from which the task can be resumed (or inspected, when it failed for good).

>>> str(TaskOwnedElsewhereError("t1", "checkpoint moved on"))
"task 't1': another worker owns this task (checkpoint moved on); this worker stopped without writing"
"""

from __future__ import annotations

__all__ = [
    "AgentStoppedError",
    "ContextWindowExceededError",
    "IntentNotRecordedError",
    "IterationBudgetExceededError",
    "ModelRefusalError",
    "TaskFailedError",
    "TaskOwnedElsewhereError",
    "UnexpectedStopReasonError",
]


class AgentStoppedError(RuntimeError):
    """The agent stopped before it had an answer; ``task_id`` names the task."""

    def __init__(self, task_id: str, message: str) -> None:
        super().__init__(f"task {task_id!r}: {message}")
        self.task_id = task_id


class TaskOwnedElsewhereError(AgentStoppedError):
    """A compare-and-set save lost: another worker wrote this task's checkpoint."""

    def __init__(self, task_id: str, detail: str) -> None:
        super().__init__(
            task_id,
            f"another worker owns this task ({detail}); this worker stopped without writing",
        )


class IntentNotRecordedError(AgentStoppedError):
    """The store stayed down while the agent tried to record an irreversible intent.

    The action was not performed; the task resumes from its last durable checkpoint.
    """


class IterationBudgetExceededError(AgentStoppedError):
    """The task used ``max_iterations`` model calls (counted across restarts)."""


class ModelRefusalError(AgentStoppedError):
    """The model refused the task (``stop_reason == "refusal"``)."""


class ContextWindowExceededError(AgentStoppedError):
    """The history no longer fits the model's context window."""


class UnexpectedStopReasonError(AgentStoppedError):
    """The model stopped for a reason this agent does not know."""


class TaskFailedError(AgentStoppedError):
    """The task's checkpoint says it failed earlier; running it again does not retry it."""
