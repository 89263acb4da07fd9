"""Repair of a loaded history, so that the Messages API accepts it after a crash.

A run that dies between a ``tool_use`` and its ``tool_result`` leaves a history the API
rejects (HTTP 400). :func:`repair_history` fixes exactly that damage and nothing else:

- every ``tool_use`` is answered by exactly one ``tool_result``, placed first in the next
  user message; results already present are kept as they are;
- a missing result is taken from the ledger of irreversible actions when the outcome was
  recorded; otherwise the call is answered with an error saying that its outcome is
  UNKNOWN and must be verified before any retry, never "please retry", because the
  action may already have happened;
- results that answer no ``tool_use`` of the previous message (orphans) and duplicates
  are dropped, and so are messages left empty;
- messages before the first damage are returned unchanged, and repair is idempotent.

>>> history = [
...     {"role": "user", "content": "send the report"},
...     {"role": "assistant", "content": [
...         {"type": "tool_use", "id": "toolu_1", "name": "send", "input": {}}]},
... ]
>>> repaired = repair_history(history, [])
>>> repaired[-1]["content"][0]["is_error"], "UNKNOWN" in repaired[-1]["content"][0]["content"]
(True, True)
>>> repair_history(repaired, []) == repaired
True
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stores import ActionRecord

from .toolbox import ToolResult

__all__ = [
    "RepairReport",
    "RepairStep",
    "answer_pending",
    "pending_tool_uses",
    "repair_history",
    "repair_history_report",
    "unknown_outcome_result",
]

RepairKind = Literal[
    "answered_from_ledger",
    "answered_unknown",
    "left_pending",
    "dropped_orphan_result",
    "dropped_duplicate_result",
    "moved_results_first",
    "dropped_empty_message",
    "dropped_cut_thinking",
]


def unknown_outcome_result(tool_name: str, tool_use_id: str) -> ToolResult:
    """The error result for a call whose outcome nobody recorded.

    It says what is known (the call may or may not have happened) and what to do (verify
    before any retry); it never invites a blind retry.

    >>> unknown_outcome_result("send", "toolu_1").content.startswith("UNKNOWN OUTCOME")
    True
    """
    return ToolResult(
        f"UNKNOWN OUTCOME: the call to {tool_name} (tool_use_id {tool_use_id}) was interrupted "
        "by a crash before its outcome was recorded. It may or may not have taken effect. "
        "Do not call it again until you have verified whether it happened; if you cannot "
        "verify it, report the outcome as unknown.",
        is_error=True,
    )


@dataclass(frozen=True)
class RepairStep:
    """One change repair made (or one call it left to the caller)."""

    kind: RepairKind
    message_index: int
    tool_use_id: str | None = None
    tool_name: str | None = None

    def describe(self) -> str:
        """One line for a timeline or a log."""
        call = f"{self.tool_name} ({self.tool_use_id})" if self.tool_use_id else ""
        return {
            "answered_from_ledger": f"answered {call} with the outcome recorded in the ledger",
            "answered_unknown": f"answered {call}: outcome UNKNOWN, to be verified before any retry",
            "left_pending": f"left {call} pending for the agent to settle",
            "dropped_orphan_result": f"dropped a tool_result for {self.tool_use_id} that answers no tool_use",
            "dropped_duplicate_result": f"dropped a second tool_result for {self.tool_use_id}",
            "moved_results_first": "moved tool_result blocks to the start of their user message",
            "dropped_empty_message": "dropped an empty message",
            "dropped_cut_thinking": "dropped thinking blocks left at the end of a reply cut short",
        }[self.kind] + f" (message {self.message_index})"


@dataclass(frozen=True)
class RepairReport:
    """What :func:`repair_history_report` did.

    ``pending`` holds the ``tool_use`` blocks of the last assistant message left
    unanswered when ``keep_pending=True``; ``first_damage`` is the index of the first
    input message that was not returned unchanged (``None`` when nothing changed);
    ``origins[n]`` is the index of the input message that output message ``n`` was made
    from (``None`` for a message the repair added).
    """

    steps: tuple[RepairStep, ...] = ()
    pending: tuple[dict[str, Any], ...] = ()
    first_damage: int | None = None
    messages_in: int = 0
    messages_out: int = 0
    origins: tuple[int | None, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the repaired history differs from the input."""
        return self.first_damage is not None

    def describe(self) -> list[str]:
        """Human-readable lines, one per step."""
        return [step.describe() for step in self.steps]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form, for ``--json`` output and events."""
        return {
            "changed": self.changed,
            "first_damage": self.first_damage,
            "messages_in": self.messages_in,
            "messages_out": self.messages_out,
            "steps": [
                {
                    "kind": s.kind,
                    "message_index": s.message_index,
                    "tool_use_id": s.tool_use_id,
                    "tool_name": s.tool_name,
                }
                for s in self.steps
            ],
            "pending": [b.get("id") for b in self.pending],
        }


_THINKING = frozenset({"thinking", "redacted_thinking"})


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _is_empty(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return content is None or content == "" or content == []


def _tool_uses(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    if message.get("role") != "assistant":
        return []
    return [b for b in _blocks(message) if b.get("type") == "tool_use"]


def _ledger(actions: Iterable[ActionRecord | Mapping[str, Any]]) -> dict[str, ActionRecord]:
    ledger: dict[str, ActionRecord] = {}
    for action in actions:
        record = action if isinstance(action, ActionRecord) else ActionRecord.model_validate(action)
        ledger[record.tool_use_id] = record
    return ledger


class _Repairer:
    def __init__(self, ledger: dict[str, ActionRecord], keep_pending: bool) -> None:
        self.ledger = ledger
        self.keep_pending = keep_pending
        self.steps: list[RepairStep] = []
        self.pending: list[dict[str, Any]] = []
        self.first_damage: int | None = None

    def damaged(self, index: int) -> None:
        if self.first_damage is None or index < self.first_damage:
            self.first_damage = index

    def answer(self, tool_use: Mapping[str, Any], index: int) -> dict[str, Any]:
        tool_use_id = str(tool_use.get("id"))
        name = str(tool_use.get("name"))
        record = self.ledger.get(tool_use_id)
        if record is not None and record.state in ("done", "unknown") and record.result is not None:
            self.steps.append(RepairStep("answered_from_ledger", index, tool_use_id, name))
            result = ToolResult(copy.deepcopy(record.result.content), record.result.is_error)
        else:
            self.steps.append(RepairStep("answered_unknown", index, tool_use_id, name))
            result = unknown_outcome_result(name, tool_use_id)
        return result.to_block(tool_use_id)

    def reply(
        self,
        tool_uses: list[dict[str, Any]],
        message: dict[str, Any] | None,
        index: int,
        at_tail: bool,
    ) -> dict[str, Any] | None:
        """The user message answering ``tool_uses``, built from ``message`` (or None)."""
        wanted = [str(b.get("id")) for b in tool_uses]
        original = _blocks(message) if message is not None else []
        results: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        seen: set[str] = set()
        for block in original:
            if block.get("type") != "tool_result":
                others.append(block)
                continue
            tool_use_id = str(block.get("tool_use_id"))
            if tool_use_id in seen:
                self.steps.append(RepairStep("dropped_duplicate_result", index, tool_use_id))
            elif tool_use_id not in wanted:
                self.steps.append(RepairStep("dropped_orphan_result", index, tool_use_id))
            else:
                seen.add(tool_use_id)
                results.append(block)
        for tool_use in tool_uses:
            tool_use_id = str(tool_use.get("id"))
            if tool_use_id in seen:
                continue
            if self.keep_pending and at_tail:
                self.pending.append(copy.deepcopy(tool_use))
                self.steps.append(
                    RepairStep("left_pending", index, tool_use_id, str(tool_use.get("name")))
                )
            else:
                results.append(self.answer(tool_use, index))
        content = results + others
        if message is not None and content == original and isinstance(message.get("content"), list):
            return message
        if message is None and not content:
            return None  # every call left pending: nothing to add, nothing damaged
        kinds = [b.get("type") == "tool_result" for b in original]
        if any(not a and b for a, b in itertools.pairwise(kinds)):
            self.steps.append(RepairStep("moved_results_first", index))
        self.damaged(index)
        if not content:
            return None
        fixed: dict[str, Any] = dict(message) if message is not None else {"role": "user"}
        fixed["content"] = content
        return fixed


def repair_history_report(
    messages: Sequence[Mapping[str, Any]],
    actions: Iterable[ActionRecord | Mapping[str, Any]] = (),
    *,
    keep_pending: bool = False,
) -> tuple[list[dict[str, Any]], RepairReport]:
    """Repair ``messages`` using the ledger ``actions``; also say what was done.

    With ``keep_pending=True`` the unanswered calls of the *last* assistant message are
    left unanswered and listed in ``report.pending``, for an agent that settles them
    itself (re-running reversible tools, re-running idempotent ones with the same key)
    and then adds the results with :func:`answer_pending`.

    >>> msgs, report = repair_history_report([{"role": "user", "content": "hi"}])
    >>> report.changed
    False
    """
    source = [copy.deepcopy(dict(m)) for m in messages]
    fixer = _Repairer(_ledger(actions), keep_pending)
    out: list[dict[str, Any]] = []
    origins: list[int | None] = []
    i, n = 0, len(source)
    while i < n:
        message = source[i]
        role = message.get("role")
        if _is_empty(message):
            fixer.steps.append(RepairStep("dropped_empty_message", i))
            fixer.damaged(i)
            i += 1
            continue
        if role == "assistant":
            blocks = _blocks(message)
            cut = len(blocks)
            while cut and blocks[cut - 1].get("type") in _THINKING:
                cut -= 1
            if cut < len(blocks):
                # A reply cut after its thinking: the API rejects an assistant message that
                # ends with thinking, and what followed the thinking is lost anyway.
                fixer.steps.append(RepairStep("dropped_cut_thinking", i))
                fixer.damaged(i)
                if not cut:
                    i += 1
                    continue
                message = {**message, "content": blocks[:cut]}
            out.append(message)
            origins.append(i)
            tool_uses = _tool_uses(message)
            if not tool_uses:
                i += 1
                continue
            following = source[i + 1] if i + 1 < n else None
            if following is not None and _is_empty(following):
                # A user message cut to nothing: answer the calls in its place.
                fixer.steps.append(RepairStep("dropped_empty_message", i + 1))
                fixer.damaged(i + 1)
                following, i = None, i + 1
                if i + 1 < n:
                    following = source[i + 1]
            if following is not None and following.get("role") == "user":
                reply = fixer.reply(tool_uses, following, i + 1, at_tail=(i + 2 >= n))
                if reply is not None:
                    out.append(reply)
                    origins.append(i + 1)
                i += 2
            else:
                reply = fixer.reply(tool_uses, None, i + 1, at_tail=following is None)
                if reply is not None:
                    out.append(reply)
                    origins.append(None)
                i += 1
            continue
        # A user message that does not follow a tool_use turn: any result in it is an orphan.
        blocks = _blocks(message)
        kept = [b for b in blocks if b.get("type") != "tool_result"]
        if len(kept) != len(blocks):
            for block in blocks:
                if block.get("type") == "tool_result":
                    fixer.steps.append(
                        RepairStep("dropped_orphan_result", i, str(block.get("tool_use_id")))
                    )
            fixer.damaged(i)
            if not kept:
                fixer.steps.append(RepairStep("dropped_empty_message", i))
                i += 1
                continue
            message = {**message, "content": kept}
        out.append(message)
        origins.append(i)
        i += 1
    report = RepairReport(
        steps=tuple(fixer.steps),
        pending=tuple(fixer.pending),
        first_damage=fixer.first_damage,
        messages_in=n,
        messages_out=len(out),
        origins=tuple(origins),
    )
    return out, report


def repair_history(
    messages: Sequence[Mapping[str, Any]],
    actions: Iterable[ActionRecord | Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """A copy of ``messages`` that the Messages API accepts, using the ledger ``actions``.

    See the module docstring for the rules; :func:`repair_history_report` also says what
    was changed.

    >>> repair_history([{"role": "user", "content": "hi"}], [])
    [{'role': 'user', 'content': 'hi'}]
    """
    return repair_history_report(messages, actions)[0]


def pending_tool_uses(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of the last assistant turn that have no result yet.

    >>> pending_tool_uses([{"role": "user", "content": "hi"}])
    []
    """
    if not messages:
        return []
    last = messages[-1]
    if last.get("role") == "assistant":
        return [dict(b) for b in _tool_uses(last)]
    if len(messages) < 2 or messages[-2].get("role") != "assistant":
        return []
    answered = {
        str(b.get("tool_use_id")) for b in _blocks(last) if b.get("type") == "tool_result"
    }
    return [dict(b) for b in _tool_uses(messages[-2]) if str(b.get("id")) not in answered]


def answer_pending(
    messages: Sequence[Mapping[str, Any]], results: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with ``results`` (``tool_result`` blocks) answering the last turn.

    They join a trailing user message that already holds some results (after those
    results, before any other block), or form a new user message.

    >>> msgs = [{"role": "user", "content": "go"},
    ...         {"role": "assistant", "content": [
    ...             {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}]
    >>> answer_pending(msgs, [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}])[-1]
    {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 't1', 'content': 'ok'}]}
    """
    out = [dict(m) for m in messages]
    if not results:
        return out
    if out and out[-1].get("role") == "user" and len(out) >= 2 and _tool_uses(out[-2]):
        blocks = _blocks(out[-1])
        head = [b for b in blocks if b.get("type") == "tool_result"]
        tail = [b for b in blocks if b.get("type") != "tool_result"]
        out[-1] = {**out[-1], "content": head + list(results) + tail}
    else:
        out.append({"role": "user", "content": list(results)})
    return out
