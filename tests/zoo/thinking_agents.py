"""Agents with extended thinking on, in two designs, each with naive twins.

With thinking on, the API wants the assistant turn of an open tool loop passed back with
its ``thinking`` / ``redacted_thinking`` blocks as they came (the signature included);
thinking blocks of finished turns may be dropped. The sound designs:

- ``create``: ``messages.create`` with ``thinking={"type": "enabled", ...}``; each reply's
  ``content`` saved with ``model_dump()``; a write-ahead ledger for the tools;
- ``strip``: the same, sending each request without the thinking blocks of finished
  turns (the API allows it, and it saves tokens);
- ``stream``: ``messages.stream`` with ``thinking={"type": "adaptive"}``, saving
  ``get_final_message()``; a stream cut short is asked again.
- ``interleaved``: ``beta.messages.create`` with ``betas=["interleaved-thinking-2025-05-14"]``
  and a budget above ``max_tokens`` (interleaved thinking allows it): Claude thinks between
  the calls of a turn too; each reply's ``content`` saved with
  ``model_dump(mode="json", exclude_none=True)``.

The twins (each bug shows only on a resume or after a cut stream):

- ``drop_thinking``: keeps the full replies in memory but saves a compact history (text
  and ``tool_use`` only): a resumed tool loop is sent without its thinking;
- ``known_blocks``: saves the block types its serialiser knows (text, ``tool_use``,
  ``thinking``), and so drops ``redacted_thinking``: a resumed tool loop whose turn's
  reasoning came redacted is sent without it;
- ``no_signature``: on resume, "normalises" the loaded assistant turn, rebuilding each
  block from the fields it knows, and so loses the thinking block's signature;
- ``keep_cut``: when a stream is cut, keeps what arrived (a thinking block cut short) as
  an assistant prefill and asks the model to go on.
- ``first_thinking``: the ``interleaved`` design whose resume "tidies" each loaded turn to
  the shape a reply had before interleaved thinking: the thinking it opened with, then
  the rest without thinking. It drops the thinking between tool calls, which only
  interleaved thinking writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stores import Checkpoint, CheckpointStore

from ._base import Journal, is_results

MODEL = "claude-sonnet-4-5"
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"
_THINKING = ("thinking", "redacted_thinking")


def unanswered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of the last assistant turn that have no result yet."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return []
    uses = [b for b in messages[last]["content"] if b.get("type") == "tool_use"]
    answered = {b.get("tool_use_id") for m in messages[last + 1 :] if is_results(m) for b in m["content"]}
    return [u for u in uses if u["id"] not in answered]


def strip_finished_thinking(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history without the thinking blocks of finished turns: those before the last
    user message that is not tool results (the open tool loop keeps its own)."""
    start = max((i for i, m in enumerate(messages) if m["role"] == "user" and not is_results(m)), default=0)
    return [
        {**m, "content": [b for b in m["content"] if b.get("type") not in _THINKING]}
        if i < start and m["role"] == "assistant"
        else m
        for i, m in enumerate(messages)
    ]


#: The twins that save a compact history: the assistant blocks each one keeps.
_SAVED_BLOCKS: dict[str, tuple[str, ...]] = {
    "drop_thinking": ("text", "tool_use"),
    "known_blocks": ("text", "tool_use", "thinking"),
}


class ThinkingLoop(Journal):
    """One attempt: the checkpoint, a write-ahead ledger for the tools, one model call."""

    def __init__(self, task_id: str, cp: Checkpoint, store: CheckpointStore, tools: Any, bug: str | None) -> None:
        self.task_id, self.cp, self.store, self.tools, self.bug = task_id, cp, store, tools, bug

    def save(self) -> None:
        kept = _SAVED_BLOCKS.get(self.bug or "")
        if kept is None:
            self.cp = self.store.save(self.cp)
            return
        full = self.cp.messages
        self.cp.messages = [
            {**m, "content": [b for b in m["content"] if b.get("type") in kept]}
            if m["role"] == "assistant"
            else m
            for m in full
        ]
        self.cp = self.store.save(self.cp)
        self.cp.messages = full


    def normalise(self) -> None:
        """The ``no_signature`` twin's repair of a loaded history: each assistant block
        rebuilt from the fields the agent knows (the signature is not one of them)."""
        known = ("type", "text", "id", "name", "input", "thinking", "data")
        for m in self.cp.messages:
            if m["role"] == "assistant":
                m["content"] = [{k: b[k] for k in known if k in b} for b in m["content"]]

    def first_thinking_only(self) -> None:
        """The ``first_thinking`` twin's repair of a loaded history: each assistant turn
        keeps the thinking it opened with and loses the thinking after it."""
        for m in self.cp.messages:
            if m["role"] == "assistant" and m["content"] and m["content"][0].get("type") in _THINKING:
                m["content"] = [m["content"][0], *(b for b in m["content"][1:] if b.get("type") not in _THINKING)]

    def ask(self, client: Any, stream: bool, interleaved: bool = False) -> Any:
        messages = strip_finished_thinking(self.cp.messages) if self.bug == "strip" else self.cp.messages
        common: dict[str, Any] = {"model": MODEL, "max_tokens": 4096, "tools": self.tools.definitions()}
        if interleaved:
            # With interleaved thinking the budget spans the whole turn: it may pass max_tokens.
            return client.beta.messages.create(
                messages=messages, thinking={"type": "enabled", "budget_tokens": 8000},
                betas=[INTERLEAVED_BETA], **common,
            )
        if not stream:
            return client.messages.create(
                messages=messages, thinking={"type": "enabled", "budget_tokens": 1024}, **common
            )
        prefill: list[dict[str, Any]] = []
        for attempt in range(4):
            try:
                with client.messages.stream(messages=messages + prefill, thinking={"type": "adaptive"}, **common) as s:
                    for _event in s:
                        pass
                    return s.get_final_message()
            except Exception:
                if attempt == 3:
                    raise
                partial = s.current_message_snapshot.content
                if self.bug == "keep_cut" and partial:
                    prefill = [{"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True) for b in partial]}]
        raise AssertionError("unreachable")

    def finish(self, reply: Any) -> str | None:
        content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
        self.cp.messages.append({"role": "assistant", "content": content})
        self.cp.iteration += 1
        if reply.stop_reason == "tool_use":
            self.save()
            return None
        answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
        self.cp.status, self.cp.final_answer = "completed", answer
        self.save()
        return answer


def thinking_agent(design: str, bug: str | None = None) -> Callable[..., str]:
    """``run(task_id, goal, *, client, store, tools)`` of a design (``create``, ``strip``,
    ``stream`` or ``interleaved``), with a twin's ``bug`` if given."""

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        cp = store.load(task_id)
        resumed = cp is not None
        if cp is None:
            cp = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        if cp.status == "completed":
            return cp.final_answer or ""
        loop = ThinkingLoop(task_id, cp, store, tools, bug or ("strip" if design == "strip" else None))
        if resumed and bug == "no_signature":
            loop.normalise()
        if resumed and bug == "first_thinking":
            loop.first_thinking_only()
        stream, interleaved = design == "stream", design == "interleaved"
        while True:
            for use in unanswered(loop.cp.messages):
                loop.settle(use)
            reply = loop.ask(client, stream, interleaved)
            for _ in range(3):  # a reply cut by max_tokens is asked again, not kept
                if reply.stop_reason != "max_tokens":
                    break
                reply = loop.ask(client, stream, interleaved)
            answer = loop.finish(reply)
            if answer is not None:
                return answer

    return run


SOUND: dict[str, Callable[..., str]] = {d: thinking_agent(d) for d in ("create", "strip", "stream", "interleaved")}
TWINS: dict[str, Callable[..., str]] = {
    "drop_thinking": thinking_agent("create", "drop_thinking"),
    "known_blocks": thinking_agent("create", "known_blocks"),
    "no_signature": thinking_agent("create", "no_signature"),
    "keep_cut": thinking_agent("stream", "keep_cut"),
    "first_thinking": thinking_agent("interleaved", "first_thinking"),
}
