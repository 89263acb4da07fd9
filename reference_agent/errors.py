"""Why the reference agent stopped without an answer.

Every stop is an :class:`AgentStoppedError` carrying the task id; the checkpoint is left
in a state from which the task can be resumed (or inspected, when it failed for good).

>>> str(TaskOwnedElsewhereError("t1", "checkpoint moved on"))
"task 't1': another worker owns this task (checkpoint moved on); this worker stopped without writing"
"""

from __future__ import annotations

from stores import CorruptCheckpointError

from .validation import InvalidHistoryError

__all__ = [
    "AgentStoppedError",
    "ContextWindowExceededError",
    "IntentNotRecordedError",
    "IterationBudgetExceededError",
    "ModelRefusalError",
    "TaskFailedError",
    "TaskOwnedElsewhereError",
    "UnexpectedStopReasonError",
    "UnresumableHistoryError",
]


class AgentStoppedError(RuntimeError):
    """The agent stopped before it had an answer; ``task_id`` names the task."""

    def __init__(self, task_id: str, message: str) -> None:
        super().__init__(f"task {task_id!r}: {message}")
        self.task_id = task_id


class TaskOwnedElsewhereError(AgentStoppedError):
    """A compare-and-set save lost: another worker wrote this task's checkpoint."""

    def __init__(self, task_id: str, detail: str, *, deleted: bool = False) -> None:
        super().__init__(
            task_id,
            "the task's checkpoint was deleted while this worker ran it (by a delete or a "
            "clean-up job); this worker stopped without writing, rather than create the task "
            "anew"
            if deleted
            else f"another worker owns this task ({detail}); this worker stopped without writing",
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


class UnresumableHistoryError(CorruptCheckpointError, InvalidHistoryError):
    """A stored history that no repair makes valid for the Messages API.

    Raised on resume before any request and before anything is written: the stored data is
    left as it is. It is a :class:`~stores.CorruptCheckpointError` (delete the task, or
    restore it) and an :class:`~reference_agent.InvalidHistoryError` (``path`` and
    ``detail`` say what the API would refuse).

    >>> error = UnresumableHistoryError("t1", InvalidHistoryError("messages.0.role", "bad role"))
    >>> isinstance(error, ValueError), error.path
    (True, 'messages.0.role')
    """

    def __init__(self, task_id: str, problem: InvalidHistoryError) -> None:
        reason = f"its message history cannot be resumed, even repaired ({problem})"
        # Both bases set their own message: take the store's wording, whole.
        Exception.__init__(self, str(CorruptCheckpointError(task_id, reason)))
        self.task_id = task_id
        self.reason = reason
        self.path = problem.path
        self.detail = problem.detail
