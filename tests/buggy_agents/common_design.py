"""A faithful port of the common checkpointing design (DESIGN.md, "The problem").

KNOWN-BUGGY on purpose: the harness and the reference agent's process tests must catch
it. It follows the agent contract ``run(task_id, goal, *, client, store, tools) -> str``
and reproduces the design's choices one by one:

- one record per task, upserted whole: before each save it loads the record only to
  learn its version, which defeats compare-and-set exactly as an upsert does;
- a checkpoint after a tool batch only when ``iteration % 5 == 0``, storing
  ``iteration + 1``;
- any load error, or no record, means "no checkpoint": start fresh;
- on resume, pending ``tool_use`` blocks are answered with errors saying the tool was
  interrupted by a restart and asking the model to retry;
- a failed checkpoint write is logged and ignored;
- the checkpoint is deleted on success.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from reference_agent.toolbox import Toolbox
from stores import Checkpoint, CheckpointStore

if TYPE_CHECKING:
    import anthropic

logger = logging.getLogger(__name__)

MODEL = "claude-scripted"


def _upsert(store: CheckpointStore, checkpoint: Checkpoint) -> None:
    try:
        current = store.load(checkpoint.task_id)
    except Exception:
        current = None
    version = current.version if current is not None else 0
    store.save(checkpoint.model_copy(update={"version": version}))


def run(
    task_id: str,
    goal: str,
    *,
    client: anthropic.Anthropic,
    store: CheckpointStore,
    tools: Toolbox,
    max_iterations: int = 50,
) -> str:
    """The common design's loop (see the module docstring for its bugs)."""
    try:
        saved = store.load(task_id)
    except Exception:  # the bug: damage is taken for "no checkpoint"
        saved = None
    if saved is not None:
        messages = list(saved.messages)
        iteration = saved.iteration
        completed = list(saved.completed_tasks)
        last = messages[-1] if messages else {}
        if last.get("role") == "assistant" and isinstance(last.get("content"), list):
            pending = [b for b in last["content"] if b.get("type") == "tool_use"]
            if pending:
                messages.append({"role": "user", "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": b["id"],
                        "content": "The tool was interrupted by a restart. Please retry the call.",
                        "is_error": True,
                    }
                    for b in pending
                ]})
    else:
        messages = [{"role": "user", "content": goal}]
        iteration = 0
        completed = []

    while iteration < max_iterations:
        response = client.messages.create(
            model=MODEL, max_tokens=4096, messages=messages,  # type: ignore[arg-type]
            tools=tools.definitions(),  # type: ignore[arg-type]
        )
        content: list[dict[str, Any]] = [b.model_dump(mode="json") for b in response.content]
        messages.append({"role": "assistant", "content": content})
        if response.stop_reason != "tool_use":
            answer = "\n".join(b["text"] for b in content if b.get("type") == "text")
            store.delete(task_id)  # the bug: a re-run of the task id redoes everything
            return answer
        results = []
        for block in content:
            if block.get("type") == "tool_use":
                result = tools.call(block["name"], block["input"])
                results.append(result.to_block(block["id"]))
                completed.append(block["id"])
        messages.append({"role": "user", "content": results})
        iteration += 1
        if iteration % 5 == 0:
            try:
                _upsert(store, Checkpoint(
                    task_id=task_id, goal=goal, messages=messages,
                    completed_tasks=completed, iteration=iteration + 1,
                ))
            except Exception as exc:  # the bug: a lost checkpoint goes unnoticed
                logger.warning("checkpoint failed: %s", exc)
    raise RuntimeError(f"task {task_id!r}: max_iterations reached")
