"""An agent loop that keeps its own session JSON and runs tools in a thread pool.

The design of small agent-loop libraries: the library owns a session document (its own
format, versioned), stores it as one JSON string in ``checkpoint.artifacts["session"]``,
and never touches ``checkpoint.messages``. The session holds the conversation
(``turns``) and a journal of the calls that change the world. Each turn's tool calls run
in a ``ThreadPoolExecutor``; a lock makes each update of the session and its save one
step, since the store's compare-and-set admits one writer at a time.

Sound because:

- a call that changes the world is journalled ``started`` (durably) before it runs and
  ``finished`` with its result after;
- on resume, every ``tool_use`` of the last turn without a result is settled: a
  ``finished`` entry gives the result, a repeat-safe or keyed call runs again (with the
  same key), a read runs again;
- finishing marks the checkpoint ``completed`` with the answer, and keeps it.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stores import Checkpoint, CheckpointStore

MODEL = "claude-sonnet-4-5"
FORMAT = "minisession/1"


# --8<-- [start:tools]
def read_file(path: str) -> str:
    """Read a text file of the project."""
    return f"contents of {path}"


def write_file(path: str, content: str) -> str:
    """Write ``content`` to ``path``, replacing the file."""
    return f"{len(content)} bytes written to {path}"


def open_ticket(title: str, idempotency_key: str | None = None) -> str:
    """Open a ticket in the tracker; a repeat with the same key opens nothing new."""
    return f"ticket opened: {title}"


# --8<-- [end:tools]


# --8<-- [start:session]
class Session:
    """The library's own state, saved whole as ``artifacts["session"]`` at every change."""

    def __init__(self, task_id: str, store: CheckpointStore, checkpoint: Checkpoint) -> None:
        self.task_id, self.store, self.checkpoint = task_id, store, checkpoint
        raw = checkpoint.artifacts.get("session")
        data = json.loads(raw) if raw else {"format": FORMAT, "turns": [], "journal": {}}
        if data.get("format") != FORMAT:
            raise ValueError(f"session of task {task_id} is {data.get('format')!r}, not {FORMAT}")
        self.turns: list[dict[str, Any]] = data["turns"]
        self.journal: dict[str, dict[str, Any]] = data["journal"]
        self.lock = threading.Lock()

    @classmethod
    def open(cls, task_id: str, goal: str, store: CheckpointStore) -> Session:
        checkpoint = store.load(task_id)
        if checkpoint is None:
            session = cls(task_id, store, Checkpoint(task_id=task_id, goal=goal))
            session.turns.append({"role": "user", "content": goal})
            session.save()
            return session
        return cls(task_id, store, checkpoint)

    def save(self, **fields: Any) -> None:
        document = json.dumps({"format": FORMAT, "turns": self.turns, "journal": self.journal})
        update = {"artifacts": {**self.checkpoint.artifacts, "session": document}, **fields}
        self.checkpoint = self.store.save(self.checkpoint.model_copy(update=update))


# --8<-- [end:session]


# --8<-- [start:loop]
def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    session = Session.open(task_id, goal, store)
    if session.checkpoint.status == "completed":
        return session.checkpoint.final_answer or ""
    with ThreadPoolExecutor(max_workers=4) as pool:
        while True:
            pending = _unanswered(session.turns)
            if pending:
                results = list(pool.map(lambda use: _settle(session, tools, use), pending))
                with session.lock:
                    _answer(session.turns, results)
                    session.save()
            reply = client.messages.create(
                model=MODEL, max_tokens=1024, messages=session.turns, tools=tools.definitions()
            )
            content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
            with session.lock:
                session.turns.append({"role": "assistant", "content": content})
                iteration = session.checkpoint.iteration + 1
                if reply.stop_reason != "tool_use":
                    answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
                    session.save(iteration=iteration, status="completed", final_answer=answer)
                    return answer
                session.save(iteration=iteration)


def _settle(session: Session, tools: Any, use: dict[str, Any]) -> dict[str, Any]:
    name, tool_input, use_id = use["name"], use.get("input") or {}, use["id"]
    spec = tools.spec(name) if name in tools else None
    if spec is None or not spec.irreversible:
        return tools.call(name, tool_input).to_block(use_id)  # type: ignore[no-any-return]
    with session.lock:
        entry = session.journal.get(use_id)
        if entry is not None and entry["state"] == "finished":
            return entry["result"]  # type: ignore[no-any-return]
        if entry is not None and spec.kind == "unkeyed":
            return {
                "type": "tool_result", "tool_use_id": use_id, "is_error": True,
                "content": f"{name} was started before a restart; its outcome is unknown. Check it first.",
            }
        entry = {"state": "started", "key": f"{session.task_id}/{use_id}"}
        session.journal[use_id] = entry
        session.save()  # durable before the effect
    block = tools.call(name, tool_input, idempotency_key=entry["key"]).to_block(use_id)
    with session.lock:
        session.journal[use_id] = {**entry, "state": "finished", "result": block}
        session.save()
    return block  # type: ignore[no-any-return]


# --8<-- [end:loop]


def _unanswered(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of the last model turn without a ``tool_result``."""
    if not turns or turns[-1]["role"] != "assistant":
        # This loop adds a turn's results in one step, so a history ending with a user
        # turn has every call of the model's last turn answered.
        return []
    return [b for b in turns[-1]["content"] if b.get("type") == "tool_use"]


def _answer(turns: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
    turns.append({"role": "user", "content": results})
