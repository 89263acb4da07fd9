"""Agents that meet ``max_tokens`` replies and forced ``tool_choice``: sound ones and twins.

Each is the checkpointed loop of ``tests/buggy_agents/_loop.py`` (load, repair, ask, save,
run tools with a write-ahead ledger) with its own way to read a reply:

- ``cut``: what it does with a reply cut by ``max_tokens``. Sound: ``retry`` (drop it,
  ask again with a larger ``max_tokens``), ``continue`` (a cut text is sent back as a
  prefill and the continuation appended; a cut tool call is dropped and asked again),
  ``note`` (keep its text, drop its tool calls, ask the model to go on, as the reference
  agent does), ``raise`` (fail the attempt; the harness resumes it). Buggy: ``ignore``
  (reads the reply as if it were whole: runs a cut tool call, returns a cut answer).
- ``finish``: ``text`` (the answer is the final text), ``submit`` (after the final text,
  the structured answer is asked for with ``tool_choice`` forcing ``submit``), ``any``
  (every request forces a tool with ``tool_choice: any``; the answer is ``submit``'s).
- ``parallel``: ``False`` sends ``disable_parallel_tool_use``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stores import CheckpointStore

from ..buggy_agents._loop import Bugs, _Agent

SUBMIT = {
    "name": "submit",
    "description": "Give the final answer.",
    "input_schema": {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    },
}


class CutByMaxTokensError(RuntimeError):
    """The reply was cut by the token limit (the ``raise`` agent)."""


def _text(content: list[dict[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


class _StopAgent(_Agent):
    def __init__(self, *args: Any, cut: str, finish: str, parallel: bool) -> None:
        super().__init__(*args)
        self.cut, self.finish, self.parallel = cut, finish, parallel
        self.max_tokens = 1024

    def ask(self, choice: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], str | None]:
        kwargs: dict[str, Any] = {
            "model": "stop-agent",
            "max_tokens": self.max_tokens,
            "messages": self.cp.messages,
            "tools": [*self.tools.definitions(), *([SUBMIT] if self.finish != "text" else [])],
        }
        if choice is None and self.finish == "any":
            choice = {"type": "any"}
        if not self.parallel:
            choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
        if choice is not None:
            kwargs["tool_choice"] = choice
        reply = self.client.messages.create(**kwargs)
        content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
        return content, reply.stop_reason

    def whole(self, choice: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """A reply that was not cut (or, for ``ignore``, whatever came)."""
        while True:
            content, stop = self.ask(choice)
            if stop != "max_tokens" or self.cut == "ignore":
                return content, stop
            if self.cut == "raise":
                raise CutByMaxTokensError("the reply was cut by max_tokens")
            if self.cut == "retry":
                self.max_tokens *= 2
                continue
            uses = [b for b in content if b.get("type") == "tool_use"]
            kept = [b for b in content if b.get("type") == "text" and b.get("text")]
            if self.cut == "continue" and not uses and kept:
                # Send the cut text back as a prefill; the model writes the rest.
                self.cp.messages.append({"role": "assistant", "content": kept})
                try:
                    rest, stop = self.ask(choice)
                finally:
                    self.cp.messages.pop()
                return [{"type": "text", "text": _text(kept) + _text(rest)}], stop
            # note (and continue, for a cut tool call): keep the text, never the calls.
            if kept:
                self.cp.messages.append({"role": "assistant", "content": kept})
            self.cp.messages.append(
                {"role": "user", "content": "Your reply was cut off; go on, and repeat any tool call in full."}
            )

    def loop(self) -> str:
        while self.cp.iteration < self.max_iterations:
            content, _ = self.whole()
            self.cp.iteration += 1
            uses = [b for b in content if b.get("type") == "tool_use"]
            submitted = [b for b in uses if b.get("name") == "submit"]
            if submitted:
                return self.complete(str(submitted[0]["input"].get("answer", "")))
            self.cp.messages.append({"role": "assistant", "content": content})
            if not uses:
                if self.finish == "submit":
                    self.cp.messages.append({"role": "user", "content": "Now submit that answer."})
                    forced, _ = self.whole({"type": "tool", "name": "submit"})
                    answer = next(b for b in forced if b.get("type") == "tool_use")["input"]["answer"]
                    return self.complete(str(answer))
                return self.complete(_text(content))
            self.save()
            self.cp.messages.append({"role": "user", "content": []})
            self.run_tools(uses)
        raise RuntimeError("iteration budget exhausted")

    def complete(self, answer: str) -> str:
        self.cp.status, self.cp.final_answer = "completed", answer
        self.save()
        return answer


def stop_agent(*, cut: str = "retry", finish: str = "text", parallel: bool = True) -> Callable[..., str]:
    """An agent of the fixed contract that reads replies as described above."""

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        agent = _StopAgent(task_id, goal, client, store, tools, Bugs(), 30, cut=cut, finish=finish, parallel=parallel)
        return agent.run()

    run.__qualname__ = f"stop_agent_{cut}_{finish}_{'parallel' if parallel else 'serial'}"
    return run


# Importable by name, for process mode.
retry_agent = stop_agent(cut="retry")
ignoring_twin = stop_agent(cut="ignore")
