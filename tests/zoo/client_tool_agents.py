"""Agents whose tools are Anthropic-defined client tools: the text editor
(``text_editor_20250728``), bash (``bash_20250124``) and the memory tool
(``memory_20250818``), declared in the request by type and run by the agent itself.

The coding agent edits files of its own (kept in memory, so each scenario is alike: a
missing file reads as ``"a\\n"``, and the plans' ``str_replace`` of ``a`` by ``ab`` always
applies, and applied twice changes the file twice). Its write-ahead ledger, per command:
a ``view`` runs again, an interrupted ``create`` is made again (an overwrite), an
interrupted ``str_replace``/``insert``/bash command is answered "outcome unknown".

Its naive twin treats the editor as repeat-safe: on resume it applies an interrupted
``str_replace`` or ``insert`` again, and the file gets the edit twice.
"""

from __future__ import annotations

from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool

from pytest_agentckpt import Toolbox
from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult

EDITOR = {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}
BASH = {"type": "bash_20250124", "name": "bash"}
UNKNOWN = "Outcome unknown: the run stopped before this edit or command was recorded; view the file before redoing it."


class Files:
    """A project's files, in memory."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def edit(self, **command: Any) -> str:
        path = str(command.get("path") or command.get("old_path"))
        text = self.files.get(path, "a\n")
        kind = command["command"]
        if kind == "view":
            return text
        if kind == "create":
            self.files[path] = command["file_text"]
            return f"created {path}"
        if kind == "str_replace":
            if command["old_str"] not in text:
                raise ValueError(f"no match for {command['old_str']!r} in {path}")
            self.files[path] = text.replace(command["old_str"], command["new_str"], 1)
            return f"edited {path}"
        if kind == "insert":
            lines = text.splitlines(keepends=True)
            lines.insert(min(command["insert_line"], len(lines)), command["insert_text"] + "\n")
            self.files[path] = "".join(lines)
            return f"inserted into {path}"
        if kind == "delete":
            self.files.pop(path, None)
            return f"deleted {path}"
        if kind == "rename":
            self.files[str(command["new_path"])] = self.files.pop(path, text)
            return f"renamed {path}"
        raise ValueError(f"unknown command {kind!r}")


def run_bash(command: str | None = None, restart: bool = False) -> str:
    return "bash restarted" if restart else f"$ {command}\nok"


EDITS = [
    {"command": "view", "path": "app.py"},
    {"command": "create", "path": "app.py", "file_text": "a\n"},
    {"command": "str_replace", "path": "app.py", "old_str": "a", "new_str": "ab"},
    {"command": "insert", "path": "app.py", "insert_line": 0, "insert_text": "import os"},
]


def coding_tools() -> Toolbox:
    """The editor and bash, each by type; kinds per command come with the type."""
    files = Files()
    return Toolbox.from_functions(
        {"str_replace_based_edit_tool": (files.edit, EDITOR), "bash": (run_bash, BASH)},
        inputs={"str_replace_based_edit_tool": EDITS, "bash": [{"command": "make test"}, {"restart": True}]},
    )


class MemoryFiles(BetaAbstractMemoryTool):
    """The SDK's memory tool interface over :class:`Files` (paths under ``/memories``)."""

    def __init__(self) -> None:
        super().__init__()
        self.store = Files()

    def view(self, command: Any) -> str:
        return self.store.edit(**command.model_dump())

    def create(self, command: Any) -> str:
        return self.store.edit(**command.model_dump())

    def str_replace(self, command: Any) -> str:
        return self.store.edit(**command.model_dump())

    def insert(self, command: Any) -> str:
        return self.store.edit(**command.model_dump())

    def delete(self, command: Any) -> str:
        return self.store.edit(**command.model_dump())

    def rename(self, command: Any) -> str:
        return self.store.edit(**command.model_dump())


MEMORY_EDITS = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "a\n"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "a", "new_str": "ab"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "user likes tea"},
    {"command": "delete", "path": "/memories/old.md"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/prefs.md"},
]


def memory_tools() -> Toolbox:
    """The SDK's memory tool object as it is."""
    return Toolbox.from_functions(MemoryFiles(), inputs={"memory": MEMORY_EDITS})


class CodingLoop:
    """A checkpointed loop over client tools, the ledger per command's kind."""

    #: Bug: the editor's intents are re-applied on resume, as if every command were repeat-safe.
    editor_repeat_safe = False
    betas: tuple[str, ...] = ()

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def run(self) -> str:
        loaded = self.store.load(self.task_id)
        if loaded is None:
            self.cp = Checkpoint(task_id=self.task_id, goal=self.goal, messages=[{"role": "user", "content": self.goal}])
            self.save()
        elif loaded.status == "completed":
            return loaded.final_answer or ""
        else:
            self.cp = loaded
        while self.cp.iteration < 40:
            last = self.cp.messages[-1]
            if last["role"] == "assistant":
                self.answer([b for b in last["content"] if b["type"] == "tool_use"])
            reply = self.client.beta.messages.create(
                model="claude-sonnet-4-5", max_tokens=1024, messages=self.cp.messages,
                tools=self.tools.definitions(), betas=list(self.betas),
            )
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            self.cp.messages.append({"role": "assistant", "content": content})
            self.cp.iteration += 1
            if reply.stop_reason != "tool_use":
                self.cp.status = "completed"
                self.cp.final_answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
                self.save()
                return self.cp.final_answer
            self.save()
        raise RuntimeError("iteration budget exhausted")

    def kind(self, use: dict[str, Any]) -> str:
        if self.editor_repeat_safe and use["name"] != "bash":
            return "repeat_safe"  # BUG: str_replace and insert are not
        return str(self.tools.spec(use["name"]).kind_of(use["input"]))

    def answer(self, uses: list[dict[str, Any]]) -> None:
        results = []
        for use in uses:
            kind, record = self.kind(use), self.cp.action(use["id"])
            if record is not None and record.result is not None:
                result = {"type": "tool_result", "tool_use_id": use["id"], "content": record.result.content}
                results.append({**result, "is_error": True} if record.result.is_error else result)
                continue
            if record is not None and kind == "unkeyed":
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True})
                continue
            if kind != "read_only" and record is None:
                record = ActionRecord(tool_use_id=use["id"], tool_name=use["name"], input=use["input"],
                                      idempotency_key=f"{self.task_id}:{use['id']}")
                self.cp.actions.append(record)
                self.save()  # write-ahead: the intent is durable before the edit
                record = self.cp.action(use["id"])
            done = self.tools.call(use["name"], use["input"])
            if record is not None:
                record.state = "done"
                record.result = RecordedResult(content=done.content, is_error=done.is_error)
                self.save()
            results.append(done.to_block(use["id"]))
        self.cp.messages.append({"role": "user", "content": results})
        self.save()


class MemoryLoop(CodingLoop):
    betas = ("context-management-2025-06-27",)


def _agent(design: type[CodingLoop], **switches: Any) -> Any:
    loop = type(design.__name__, (design,), switches) if switches else design

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return loop(task_id, goal, client, store, tools).run()

    return run


SOUND = {"coding": _agent(CodingLoop), "memory": _agent(MemoryLoop)}
TWINS = {"coding": _agent(CodingLoop, editor_repeat_safe=True), "memory": _agent(MemoryLoop, editor_repeat_safe=True)}
TOOLS = {"coding": coding_tools, "memory": memory_tools}
