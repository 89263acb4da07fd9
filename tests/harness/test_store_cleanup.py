"""What a fuzz run leaves in the store it is given: nothing it made, nothing else touched.

Each scenario deletes its task's checkpoint and every checkpoint the agent saved under a key
made from the task id (a sub-agent's, a snapshot's). Before, those derived keys stayed: a
store given by URL filled up with them, and an agent that lists its snapshots slowed down
with every scenario. A key not made from the task id may be state the agent shares across
tasks, or a user's: it is left alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_agentckpt.harness import fuzz
from reference_agent.scripted import Plan
from stores import Checkpoint, open_store

from .toolkit import toolbox


def _agent(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
    cp = store.load(task_id)
    if cp is not None and cp.status == "completed":
        return cp.final_answer or ""
    for key in (f"{task_id}@1", f"{task_id}/sub/a"):
        if store.load(key) is None:
            store.save(Checkpoint(task_id=key, goal=goal))
    if store.load("shared-notes") is None:
        store.save(Checkpoint(task_id="shared-notes", goal="kept across tasks"))
    reply = client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": goal}])
    answer = "".join(block.text for block in reply.content if block.type == "text")
    store.save(Checkpoint(task_id=task_id, goal=goal, status="completed", final_answer=answer,
                          version=0 if cp is None else cp.version))
    return answer


def test_a_fuzz_run_deletes_the_checkpoints_its_scenarios_made_and_nothing_else(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    before = open_store(url)
    before.save(Checkpoint(task_id="users-own-task", goal="not the harness's"))
    before.close()
    fuzz(_agent, toolbox(), store=url, plans=[Plan((), "done")], max_examples=5, seed=1)
    store = open_store(url)
    try:
        left = sorted(summary.task_id for summary in store.list_checkpoints())
    finally:
        store.close()
    assert left == ["shared-notes", "users-own-task"]
