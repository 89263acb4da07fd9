"""What the harness saw of a run, in order: the evidence the oracles judge.

The harness observes an agent only from outside: the model client's transport, the
toolbox and the checkpoint store. Each observation becomes an :class:`Event` in one
:class:`Timeline`, numbered in the order it happened across every attempt (the first run
and each resume after a crash), so that "an effect before a crash before the next durable
write" is a question about sequence numbers.

>>> timeline = Timeline()
>>> timeline.start_attempt()
1
>>> timeline.add("crash", point="before_model_call", occurrence=1).kind
'crash'
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Event", "EventKind", "Timeline"]

EventKind = Literal[
    "attempt_start",
    "attempt_end",
    "model_request",
    "model_response",
    "model_delivered",
    "api_fault",
    "crash",
    "held",
    "tool_call",
    "tool_error",
    "effect",
    "store_load",
    "store_save",
    "store_save_failed",
    "store_delete",
    "store_outage",
    "store_delay",
]


@dataclass
class Event:
    """One observation: ``seq`` orders events across attempts; ``data`` depends on kind.

    ``model_request``: ``index``, ``messages``; ``model_response``: ``index``, ``status``,
    ``tool_uses`` (list of ``(id, name, input)``), ``streamed`` when the reply streams;
    ``model_delivered``: ``index``, once a streamed reply was read to its end (until then
    the agent holds at most part of it); ``crash``: ``point``, ``occurrence``;
    ``tool_call``: ``tool``, ``input``, ``key``; ``effect``: ``tool``, ``input``, ``key``;
    ``store_save``: ``task_id``, ``version``, ``iteration``, ``status``, ``messages``;
    ``store_load``: ``found``, ``version``, ``iteration``, ``task_id``.
    """

    seq: int
    attempt: int
    kind: EventKind
    data: dict[str, Any] = field(default_factory=dict)
    #: ``time.monotonic_ns()`` when it happened: one clock for every process on the host,
    #: so process mode can merge the parent's and the child's events.
    t: int = 0


def _short(value: Any, limit: int = 90) -> str:
    """``value`` on one line: a text's line breaks and other control characters escaped
    (``\\n``), so that a multi-line answer keeps the timeline's layout; cut at ``limit``."""
    if isinstance(value, str):
        text = value if value.isprintable() else json.dumps(value, ensure_ascii=False)[1:-1]
    else:
        text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: The events that change what a resume starts from: the store's state or the world's.
_CHANGES = frozenset({"effect", "store_save", "store_delete"})


class Timeline:
    """An append-only list of :class:`Event`, with attempt numbering."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.attempt = 0
        #: Durable changes so far (saves, deletes, tool effects): points met between two
        #: changes leave the same stored state and the same world to resume from.
        self.changes = 0
        #: The numbers of the changes no save made: tool effects and deletes.
        self.unsaved: set[int] = set()
        # Tools run in threads: numbering and appending must be one step.
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def start_attempt(self, note: str = "") -> int:
        """Open the next attempt (the first run is attempt 1) and return its number."""
        self.attempt += 1
        self.add("attempt_start", note=note)
        return self.attempt

    def add(self, kind: EventKind, **data: Any) -> Event:
        """Record an event of ``kind`` in the current attempt."""
        with self._lock:
            event = Event(len(self.events), self.attempt, kind, data, time.monotonic_ns())
            self.events.append(event)
            if kind in _CHANGES:
                self.changes += 1
                if kind != "store_save":
                    self.unsaved.add(self.changes)
        return event

    def merge(self, events: Iterable[Event]) -> None:
        """Add events recorded elsewhere (another process) and re-number all in time order."""
        merged = sorted([*self.events, *events], key=lambda e: (e.t, e.seq))
        self.events = [Event(i, e.attempt, e.kind, e.data, e.t) for i, e in enumerate(merged)]

    def of(self, *kinds: EventKind) -> list[Event]:
        """The events of the given kinds, in order."""
        return [event for event in self.events if event.kind in kinds]

    def describe(self, event: Event, *, task: bool = False) -> str:
        """One readable line for ``event``; ``task``: name the checkpoint a load or save was of."""
        line = self._describe(event)
        if task and event.kind in ("store_load", "store_save") and event.data.get("task_id") is not None:
            line += f" [{event.data['task_id']}]"
        return line

    def _describe(self, event: Event) -> str:
        d = event.data
        kind = event.kind
        if kind == "attempt_start":
            note = d.get("note") or ("resume" if event.attempt > 1 else "")
            return f"--- attempt {event.attempt} starts" + (f" ({note})" if note else "")
        if kind == "attempt_end":
            return f"--- attempt {event.attempt} ends: {d.get('outcome')} {_short(d.get('detail', ''))}"
        if kind == "model_request":
            n = len(d.get("messages", ()))
            return f"model request #{d['index']} ({n} messages, last: {_last_summary(d.get('messages'))})"
        if kind == "model_response":
            uses = ", ".join(f"{name}({_short(inp, 40)}) id={tid}" for tid, name, inp in d.get("tool_uses", ()))
            what = f"tool_use: {uses}" if uses else f"text: {_short(d.get('text', ''), 50)}"
            return f"model response #{d['index']} status {d.get('status')} -> {what}"
        if kind == "model_delivered":
            return f"model response #{d['index']} read to its end (the stream is whole)"
        if kind == "api_fault":
            outage = " (API outage: longer than the SDK retries)" if d.get("outage") else ""
            return f"API fault {d.get('fault')} on request #{d.get('index')}{outage}"
        if kind == "crash":
            return f"CRASH at {d['point']} (occurrence {d['occurrence']})"
        if kind == "held":
            if "version" in d:  # worker B, paused after a save while it runs the task
                return f"HELD after its save of version {d['version']}: worker B pauses while running the task"
            return f"HELD at {d['point']} (occurrence {d['occurrence']}): another worker takes the task over"
        if kind == "tool_call":
            return f"tool call {d['tool']}({_short(d['input'], 60)}) key={d.get('key')}"
        if kind == "tool_error":
            return f"tool {d['tool']} answered an error: {_short(d.get('content', ''), 60)}"
        if kind == "effect":
            note = f" ({d['unreported']})" if d.get("unreported") else ""
            return f"effect {d['tool']}({_short(d['input'], 60)}) key={d.get('key')}{note}"
        if kind == "store_load":
            if not d.get("found"):
                return "checkpoint load: none"
            return f"checkpoint load: version {d.get('version')}, iteration {d.get('iteration')}"
        if kind == "store_save":
            # No history where the harness looks (an agent with its own state format): None.
            messages = d.get("messages", ())
            held = "history not found" if messages is None else f"{len(messages)} messages"
            return (
                f"checkpoint written: version {d.get('version')}, iteration {d.get('iteration')}, "
                f"status {d.get('status')}, {held}"
            )
        if kind == "store_save_failed":
            return f"checkpoint write failed: {_short(d.get('error', ''))}"
        if kind == "store_delete":
            return f"checkpoint deleted ({d.get('task_id')})"
        if kind == "store_outage":
            return f"store outage injected on {d.get('operation')}"
        if kind == "store_delay":
            return f"store delay {d.get('seconds')}s on {d.get('operation')}"
        return f"{kind} {_short(d)}"

    def format(
        self,
        *,
        marks: dict[int, str] | None = None,
        limit: int = 200,
    ) -> str:
        """The timeline as text, with ``marks`` (seq -> note) shown on their lines.

        Long timelines keep the marked events and those around them, within ``limit``.
        """
        marks = marks or {}
        lines = []
        shown = self._shown(marks, limit)
        # An agent that keeps several checkpoints: each load and save says which.
        tasks = {e.data.get("task_id") for e in self.events if e.kind in ("store_load", "store_save")}
        several = len(tasks - {None}) > 1
        previous = -1
        for event in self.events:
            if event.seq not in shown:
                continue
            if event.seq != previous + 1 and previous >= 0:
                lines.append("      ...")
            previous = event.seq
            note = f"   <-- {marks[event.seq]}" if event.seq in marks else ""
            lines.append(f"  {event.seq:4d} [a{event.attempt}] {self.describe(event, task=several)}{note}")
        return "\n".join(lines)

    def _shown(self, marks: dict[int, str], limit: int) -> set[int]:
        if len(self.events) <= limit:
            return {event.seq for event in self.events}
        keep: set[int] = set()
        for seq in marks:
            keep.update(range(max(0, seq - 5), seq + 3))
        for event in self.events:
            if event.kind in ("crash", "held", "attempt_start", "attempt_end"):
                keep.add(event.seq)
        return {seq for seq in keep if seq < len(self.events)}


def _last_summary(messages: Iterable[Any] | None) -> str:
    items = list(messages or ())
    if not items:
        return "none"
    last = items[-1]
    if not isinstance(last, dict):
        return "?"
    content = last.get("content")
    if isinstance(content, str):
        return f"{last.get('role')} text"
    kinds = [block.get("type", "?") for block in content or () if isinstance(block, dict)]
    return f"{last.get('role')} [{', '.join(kinds)}]"
