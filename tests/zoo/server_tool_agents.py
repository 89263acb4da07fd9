"""Agents that offer a server tool (web search) next to their own tools, with naive twins.

The API runs a server tool itself, inside the assistant turn: a reply holds the
``server_tool_use`` block and its result (``web_search_tool_result``) together, and a long
server tool loop may stop with ``stop_reason: "pause_turn"``, to be continued by sending
the paused reply back, as it came, as the last message. The sound designs:

- ``create``: ``messages.create``; each reply's blocks saved with
  ``model_dump(mode="json", exclude_none=True)``; a paused reply is saved and sent back,
  its continuation appended as a message of its own; a write-ahead ledger and keys for
  the client tools;
- ``merge``: the same, merging a continuation into the paused message (one assistant
  message per turn);
- ``strip``: the same as ``create``, sending each request without the server tool blocks
  of finished turns (the use and its result together, which the API allows);
- ``stream``: ``messages.stream`` and ``get_final_message()``; a stream cut short is asked
  again;
- ``think``: ``create`` with extended thinking on (a paused turn opens with its thinking,
  which the merged turn keeps first).

The twins:

- ``repair_server``: on resume, answers every ``*_tool_use`` block of the last turn that has
  no ``tool_result`` and no ledger record with an "interrupted" error result, the
  ``server_tool_use`` (whose result is in the assistant message) included;
- ``known_blocks``: saves the block types its serializer knows (text, ``tool_use``), and so
  drops both server tool blocks (a saved paused reply comes back empty);
- ``use_only``: saves every ``*_tool_use`` block but not ``web_search_tool_result``;
- ``pause_as_end``: takes a ``pause_turn`` reply for the end of the task;
- ``resume_as_final``: on resume, takes a saved last assistant message for the final answer
  (a crash "between the final reply and its completed save"), though it was a paused turn;
- ``runs_server``: runs a ``server_tool_use`` as a client tool and answers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stores import Checkpoint, CheckpointStore, RecordedResult

from ._base import Journal, is_results

MODEL = "claude-sonnet-4-5"
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
_SERVER = ("server_tool_use", "web_search_tool_result")



def last_turn(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[str]]:
    """The blocks of the last assistant turn (consecutive assistant messages, as the API
    merges them) and the ids the messages after it answer."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return [], set()
    first = last
    while first > 0 and messages[first - 1]["role"] == "assistant":
        first -= 1
    blocks = [b for m in messages[first : last + 1] for b in m["content"]]
    answered = {b.get("tool_use_id") for m in messages[last + 1 :] if is_results(m) for b in m["content"]}
    return blocks, answered


def unanswered(messages: list[dict[str, Any]], kinds: Callable[[str], bool] = lambda t: t == "tool_use") -> list[dict[str, Any]]:
    """The blocks of the last assistant turn whose type ``kinds`` accepts with no result."""
    blocks, answered = last_turn(messages)
    return [b for b in blocks if kinds(str(b.get("type"))) and b["id"] not in answered]


def strip_finished_server_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history without the server tool blocks of finished turns: the assistant turns
    before the last one (the last, a paused turn going back or an open tool loop, keeps
    its own)."""
    first = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    while first > 0 and messages[first - 1]["role"] == "assistant":
        first -= 1
    out = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and i < first:
            kept = [b for b in m["content"] if b.get("type") not in _SERVER]
            if not kept:
                continue  # a paused turn of search only, finished: nothing left of it
            m = {**m, "content": kept}
        out.append(m)
    return out


#: The twins that save a compact history: which assistant blocks each one keeps.
_SAVED: dict[str, Callable[[str], bool]] = {
    "known_blocks": lambda t: t in ("text", "tool_use"),
    "use_only": lambda t: t == "text" or t.endswith("tool_use"),
}


class ServerToolLoop(Journal):
    """One attempt: the checkpoint, a write-ahead ledger for the client tools, one model call."""

    def __init__(self, task_id: str, cp: Checkpoint, store: CheckpointStore, tools: Any, design: str, bug: str | None) -> None:
        self.task_id, self.cp, self.store, self.tools, self.design, self.bug = task_id, cp, store, tools, design, bug

    def save(self) -> None:
        kept = _SAVED.get(self.bug or "")
        if kept is None:
            self.cp = self.store.save(self.cp)
            return
        full = self.cp.messages
        self.cp.messages = [
            {**m, "content": [b for b in m["content"] if kept(str(b.get("type")))]} if m["role"] == "assistant" else m
            for m in full
        ]
        self.cp = self.store.save(self.cp)
        self.cp.messages = full


    def repair(self) -> None:
        """The ``repair_server`` twin's repair of a loaded history: every ``*_tool_use`` of
        the last turn with neither a result nor a ledger record is answered "interrupted"."""
        for use in unanswered(self.cp.messages, lambda t: t.endswith("tool_use")):
            if self.cp.action(use["id"]) is None:
                self.answer(use["id"], RecordedResult(content="Interrupted before it ran: call it again.", is_error=True))

    def ask(self, client: Any) -> Any:
        messages = strip_finished_server_blocks(self.cp.messages) if self.design == "strip" else self.cp.messages
        common: dict[str, Any] = {"model": MODEL, "max_tokens": 4096, "tools": [*self.tools.definitions(), SEARCH]}
        if self.design == "think":
            common["thinking"] = {"type": "enabled", "budget_tokens": 1024}
        if self.design != "stream":
            return client.messages.create(messages=messages, **common)
        for attempt in range(4):
            try:
                with client.messages.stream(messages=messages, **common) as s:
                    for _event in s:
                        pass
                    return s.get_final_message()
            except Exception:
                if attempt == 3:
                    raise
        raise AssertionError("unreachable")

    def finish(self, reply: Any) -> str | None:
        content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
        last = self.cp.messages[-1]
        if self.design == "merge" and last["role"] == "assistant":
            # The continuation of a paused turn, merged into it: one message per turn.
            last["content"] = [*last["content"], *content]
        else:
            self.cp.messages.append({"role": "assistant", "content": content})
        self.cp.iteration += 1
        going_on = ("tool_use",) if self.bug == "pause_as_end" else ("tool_use", "pause_turn")
        if reply.stop_reason in going_on:
            self.save()
            return None
        answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
        self.cp.status, self.cp.final_answer = "completed", answer
        self.save()
        return answer


def server_tool_agent(design: str = "create", bug: str | None = None) -> Callable[..., str]:
    """``run(task_id, goal, *, client, store, tools)`` of a design (``create``, ``merge``,
    ``strip``, ``stream`` or ``think``), with a twin's ``bug`` if given."""

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        cp = store.load(task_id)
        resumed = cp is not None
        if cp is None:
            cp = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        if cp.status == "completed":
            return cp.final_answer or ""
        loop = ServerToolLoop(task_id, cp, store, tools, design, bug)
        if resumed and bug == "repair_server":
            loop.repair()
        if resumed and bug == "resume_as_final" and cp.messages[-1]["role"] == "assistant" and not unanswered(cp.messages):
            answer = "".join(b.get("text", "") for b in cp.messages[-1]["content"] if b.get("type") == "text")
            loop.cp.status, loop.cp.final_answer = "completed", answer
            loop.save()
            return answer
        client_tools: Callable[[str], bool] = (lambda t: t.endswith("tool_use")) if bug == "runs_server" else (lambda t: t == "tool_use")
        while True:
            for use in unanswered(loop.cp.messages, client_tools):
                loop.settle(use)
            reply = loop.ask(client)
            for _ in range(3):  # a reply cut by max_tokens is asked again, not kept
                if reply.stop_reason != "max_tokens":
                    break
                reply = loop.ask(client)
            answer = loop.finish(reply)
            if answer is not None:
                return answer

    return run


SOUND: dict[str, Callable[..., str]] = {d: server_tool_agent(d) for d in ("create", "merge", "strip", "stream", "think")}
TWINS: dict[str, Callable[..., str]] = {
    bug: server_tool_agent("create", bug)
    for bug in ("repair_server", "known_blocks", "use_only", "pause_as_end", "resume_as_final", "runs_server")
}
