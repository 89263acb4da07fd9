"""Agents importable by name, for process mode (a child process imports them)."""

from __future__ import annotations

import functools
from typing import Any

import reference_agent
from stores import CheckpointStore

from ..buggy_agents import checkpoint_after_result
from ..zoo._base import agent
from ..zoo.agents import SOUND, TWINS, OwnStatus
from ..zoo.history_agents import drafting_agent, taskgroup_agent

#: The reference agent, with no backoff between its own save retries.
reference = functools.partial(reference_agent.run, retry_backoff=0.0)

#: Checkpoints after a tool's result instead of around its effect (caught by no_duplicate_effect).
buggy = checkpoint_after_result.run


class _NeverAcceptsTheAnswer:
    """A client whose ``messages.create`` asks again for as long as the model answers
    without a tool call: the agent never gets its final answer."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.messages = self

    def create(self, **params: Any) -> Any:
        while True:
            reply = self._client.messages.create(**params)
            if any(block.type == "tool_use" for block in reply.content):
                return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def hangs_on_resume(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """The reference agent, except that a resumed run hangs (as on a lock a dead process held)."""
    import time

    if store.load(task_id) is not None:
        time.sleep(3600)
    return reference(task_id, goal, client=client, store=store, tools=tools)


def runaway_after_resume(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """The reference agent, but once resumed it loops on the model forever (a runaway)."""
    before = store.load(task_id)
    if before is not None and before.status == "running":
        client = _NeverAcceptsTheAnswer(client)
    return reference(task_id, goal, client=client, store=store, tools=tools)


def runaway(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """Never accepts an answer, crash-free run included."""
    while True:
        client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": goal}])


#: The zoo's agent that keeps its history in its own format (``history=unwrap``), its twin
#: (re-asks the model for a reply its checkpoint holds), and the agent that deletes its
#: checkpoint on success (``ignore_oracles=["completed_idempotent"]``).
own_state = SOUND["own_state"]
own_state_twin = TWINS["own_state"]
forgets_completion = SOUND["forgets_completion"]
#: Keeps its completion in its own session as well; its checkpoint's status stays "running".
own_status = agent(OwnStatus)

#: Saves a streamed reply as it arrives (a draft, dropped on resume), and its twin that
#: drops a whole reply found on load as well and asks again (recorded_work_not_redone).
drafts = drafting_agent()
drafts_drop_whole = drafting_agent(drops_whole_reply=True)

#: An ``async def run`` (AsyncAnthropic; a turn's calls in an asyncio.TaskGroup): process
#: mode awaits it with the async client, as memory mode does.
taskgroup = taskgroup_agent()
