"""An agent we did not design: LangGraph's prebuilt ReAct agent on LangChain's ChatAnthropic,
checkpointed by LangGraph's own SqliteSaver, fitted to ``fuzz`` as a team using LangGraph
would fit it (the fuzz client handed to ChatAnthropic, the toolbox's tools wrapped as
LangChain tools).

LangGraph checkpoints after each step of the graph. A crash inside the tools step leaves
the last checkpoint before it, so a resume runs every tool call of that turn again: with
idempotency keys derived from the tool call id (``keyed``) a repeat is harmless; an
unkeyed irreversible tool is performed twice (``no_duplicate_effect``).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.prebuilt import create_react_agent



def key_for(task_id: str, call_id: str) -> str:
    """The idempotency key of one tool call: the same on every resume of the task."""
    return "lg-" + hashlib.sha256(f"{task_id}:{call_id}".encode()).hexdigest()[:16]


class ToolboxTool(BaseTool):
    """One tool of the toolbox ``fuzz`` hands the agent, as a LangChain tool."""

    box: Any
    task_id: str
    keyed: bool = True

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        # LangGraph's ToolNode passes the whole tool call: its id makes the key.
        call_id, args = input["id"], input["args"]
        key = key_for(self.task_id, call_id) if self.keyed and self.box.spec(self.name).idempotent else None
        result = self.box.call(self.name, args, idempotency_key=key)
        return ToolMessage(
            content=result.content, tool_call_id=call_id, name=self.name, status="error" if result.is_error else "success"
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # invoke() does the work
        raise NotImplementedError


def make_run(db: Path, *, keyed: bool = True) -> Any:
    """The agent's ``run``; its LangGraph checkpoints go to the SQLite file ``db``."""
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        llm = ChatAnthropic(model="claude-sonnet-4-5", api_key="unused", max_retries=2)  # type: ignore[call-arg]
        # The fuzz client in place of the one ChatAnthropic makes, with the options it gives
        # its own (timeout=None: no client-side refusal of a long non-streaming request).
        llm.__dict__["_client"] = client.with_options(timeout=None, max_retries=llm.max_retries)
        lc_tools = [
            ToolboxTool(
                name=d["name"], description=d.get("description") or d["name"], args_schema=d["input_schema"],
                box=tools, task_id=task_id, keyed=keyed,
            )
            for d in tools.definitions()
        ]
        agent = create_react_agent(llm, lc_tools, checkpointer=saver)
        config: Any = {"configurable": {"thread_id": task_id}, "recursion_limit": 60}
        if agent.get_state(config).values:
            result = agent.invoke(None, config)  # resume from LangGraph's last checkpoint
        else:
            result = agent.invoke({"messages": [("user", goal)]}, config)
        return str(result["messages"][-1].content)

    return run
