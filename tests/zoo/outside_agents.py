"""Agents in the designs of public code on the SDK, with persistence added as their
authors would add it; each with the naive twin a team using that design would write.

=============================  ==================================  ==========================
design                         the twin's bug                      caught by
=============================  ==================================  ==========================
``computer_use`` (the          on resume, tells the model in a     ``valid_sequence`` (five
computer-use demo's sampling   user turn of its own that the run   breakpoints: the loop
loop: cache marks on the last  was interrupted                     moves one mark per turn)
3 user turns, in place, saved
with the history)
``screenshots`` (the same      on resume, drops a reply whose      ``recorded_work_not_redone``
loop keeping only the latest   calls have no results and asks
screenshots in each request;   again
every one kept in the save)
``sdk_objects`` (cookbook      its results table is its ledger:    ``no_duplicate_effect``
style: ``content:              a call with no result is run
response.content``, the        again, unkeyed ones too
replies pickled, tool results
in a table of their own)
``trajectory`` (mini-swe-      on resume, drops a reply without    ``recorded_work_not_redone``
agent style: its own message   its observation ("the step did      (read-only tools),
dicts, the system prompt       not happen") and asks again         ``no_duplicate_effect``
first, observations cut)
=============================  ==================================  ==========================
"""

from __future__ import annotations

import base64
import copy
import inspect
import pickle
from typing import Any, Literal

from anthropic.types import Message

from pytest_agentckpt import Toolbox
from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult

# -- the computer-use demo's loop -------------------------------------------------------------

#: A 1x1 PNG: what the screenshot tool sends back, as the demo's ``computer`` tool does.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
SYSTEM_PROMPT = "You are utilising an Ubuntu virtual machine with a bash tool and a file editor."


def screenshot() -> list[dict[str, Any]]:
    """Take a screenshot of the desktop."""
    return [
        {"type": "text", "text": "the desktop"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
    ]


def bash(command: Literal["make install", "rm -rf build"]) -> str:
    """Run a shell command."""
    return f"$ {command}: ok"


def create_file(path: Literal["notes.md", "todo.md"], file_text: Literal["a", "b"]) -> str:
    """Create or overwrite a file with this text."""
    return f"{path} written"


def desktop_tools() -> Toolbox:
    """The demo's tool groups in three tools: a screenshot (read-only), bash (nothing
    tells a repeat from a new command) and the editor's ``create`` (an overwrite)."""
    return Toolbox.from_functions(screenshot, bash, create_file, kinds={"bash": "unkeyed", "create_file": "repeat_safe"})


def _inject_prompt_caching(messages: list[dict[str, Any]]) -> None:
    """The demo's breakpoints: on the last block of the 3 most recent user turns (one is
    left for the system prompt); the mark of the turn before them is removed, and the
    scan stops there: the loop adds one turn per request."""
    breakpoints_remaining = 3
    for message in reversed(messages):
        if message["role"] == "user" and isinstance(content := message["content"], list):
            if breakpoints_remaining:
                breakpoints_remaining -= 1
                content[-1]["cache_control"] = {"type": "ephemeral"}
            else:
                content[-1].pop("cache_control", None)
                break


def _keep_recent_images(messages: list[dict[str, Any]], images_to_keep: int, min_removal_threshold: int) -> None:
    """The demo's screenshot filter: all but the last ``images_to_keep`` images of tool
    results are removed, in chunks of ``min_removal_threshold``."""
    results = [
        block
        for message in messages
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "tool_result"
    ]
    total = sum(1 for r in results for c in r.get("content", []) if isinstance(c, dict) and c.get("type") == "image")
    to_remove = total - images_to_keep
    to_remove -= to_remove % min_removal_threshold
    for result in results:
        if isinstance(result.get("content"), list):
            kept = []
            for part in result["content"]:
                if isinstance(part, dict) and part.get("type") == "image" and to_remove > 0:
                    to_remove -= 1
                    continue
                kept.append(part)
            result["content"] = kept


def _response_to_params(response: Any) -> list[dict[str, Any]]:
    """The demo's conversion of a reply into params: non-empty text, tool uses dumped."""
    params: list[dict[str, Any]] = []
    for block in response.content:
        if block.type == "text":
            if block.text:
                params.append({"type": "text", "text": block.text})
        else:
            params.append(block.model_dump(exclude_none=True))
    return params


def _make_api_tool_result(content: str | list[dict[str, Any]], is_error: bool, tool_use_id: str) -> dict[str, Any]:
    """The demo's tool result: a list of text and image blocks, ``is_error`` always set
    (an error's text as the string content)."""
    parts: str | list[dict[str, Any]]
    if is_error:
        parts = content if isinstance(content, str) else str(content)
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}] if content else []
    else:
        parts = list(content)
    return {"type": "tool_result", "content": parts, "tool_use_id": tool_use_id, "is_error": is_error}


UNKNOWN = "The run stopped before the outcome of this command was recorded: check before running it again."


class SamplingLoop:
    """The computer-use demo's ``sampling_loop`` (async, ``client.beta.messages
    .with_raw_response.create``, a ``BetaMessageParam`` list mutated in place), with a
    checkpoint: the messages saved after each reply and after each turn's results, and a
    write-ahead record in ``checkpoint.actions`` for each call that changes the world.

    ``caching``: the demo's path on the Anthropic API: marks on the 3 latest user turns,
    made in place, so saved with the history, and one on the system prompt.
    ``only_n_most_recent_images``: its path elsewhere: older screenshots removed; a team
    that keeps every screenshot in the saved session (for the replay in its UI) removes
    them from a copy sent with each request.
    """

    caching = True
    only_n_most_recent_images: int | None = None
    #: Bug: on resume, a user turn of its own says the run was interrupted.
    resume_note = False
    #: Bug: on resume, a reply whose calls have no results is dropped and asked for again.
    reask_unanswered = False

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    async def run(self) -> str:
        loaded = self.store.load(self.task_id)
        if loaded is None:
            self.cp = Checkpoint(task_id=self.task_id, goal=self.goal)
            self.cp.messages = [{"role": "user", "content": [{"type": "text", "text": self.goal}]}]
            self.save()
        elif loaded.status == "completed":
            return loaded.final_answer or ""
        else:
            self.cp = loaded
            last = self.cp.messages[-1]
            if last["role"] == "assistant" and any(b["type"] == "tool_use" for b in last["content"]):
                if self.reask_unanswered:
                    self.cp.messages.pop()  # BUG: the checkpoint holds this reply
                else:
                    await self.run_tools(last["content"])
            if self.resume_note:
                # BUG: a second user turn since the last request; the demo's caching moves one mark.
                note = "(The session was interrupted and resumed; continue the task.)"
                self.cp.messages.append({"role": "user", "content": [{"type": "text", "text": note}]})
        messages = self.cp.messages
        system: dict[str, Any] = {"type": "text", "text": SYSTEM_PROMPT}
        while self.cp.iteration < 40:
            if self.caching:
                _inject_prompt_caching(messages)
                system["cache_control"] = {"type": "ephemeral"}
            sent = messages
            if self.only_n_most_recent_images:
                sent = copy.deepcopy(messages)
                _keep_recent_images(sent, self.only_n_most_recent_images, min_removal_threshold=1)
            raw = await self.client.beta.messages.with_raw_response.create(
                max_tokens=1024, messages=sent, model="claude-sonnet-4-5", system=[system],
                tools=self.tools.definitions(), betas=["prompt-caching-2024-07-31"] if self.caching else [],
            )
            response = await raw.parse()
            params = _response_to_params(response)
            messages.append({"role": "assistant", "content": params})
            self.cp.iteration += 1
            if not any(b["type"] == "tool_use" for b in params):
                answer = "".join(b["text"] for b in params if b["type"] == "text")
                self.cp.status, self.cp.final_answer = "completed", answer
                self.save()
                return answer
            self.save()
            await self.run_tools(params)
        raise RuntimeError("iteration budget exhausted")

    async def run_tools(self, params: list[dict[str, Any]]) -> None:
        results = [await self.run_tool(b) for b in params if b["type"] == "tool_use"]
        self.cp.messages.append({"content": results, "role": "user"})
        self.save()

    async def run_tool(self, use: dict[str, Any]) -> dict[str, Any]:
        spec = self.tools.spec(use["name"])
        record = self.cp.action(use["id"])
        if record is not None and record.result is not None:
            return _make_api_tool_result(record.result.content, record.result.is_error, use["id"])
        if record is not None and spec.kind == "unkeyed":
            return _make_api_tool_result(UNKNOWN, True, use["id"])
        if spec.kind != "read_only" and record is None:
            record = ActionRecord(
                tool_use_id=use["id"], tool_name=use["name"], input=use["input"], idempotency_key=f"{self.task_id}:{use['id']}"
            )
            self.cp.actions.append(record)
            self.save()  # write-ahead: the intent is durable before the call
        done = self.tools.call(use["name"], use["input"])
        if inspect.isawaitable(done):
            done = await done
        if record is not None:
            record.state = "done"
            record.result = RecordedResult(content=done.content, is_error=done.is_error)
            self.save()
        return _make_api_tool_result(done.content, done.is_error, use["id"])


def sampling_agent(**switches: Any) -> Any:
    """``async run(task_id, goal, *, client, store, tools)`` for the loop (and its bugs)."""
    design = type("SamplingLoop", (SamplingLoop,), switches) if switches else SamplingLoop

    async def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return await design(task_id, goal, client, store, tools).run()

    return run


# -- a cookbook loop keeping SDK objects ------------------------------------------------------


class CookbookLoop:
    """The cookbooks' tool loop: ``messages.append({"role": "assistant", "content":
    response.content})`` (the SDK's own block objects in the history), made durable as
    its team did: the replies pickled into ``artifacts["replies"]`` and the tool results
    in a table of their own (``artifacts["results"]``, one entry per ``tool_use`` id, saved
    as each call ends); the history is rebuilt from both on load. Calls that change the
    world are recorded in ``artifacts["started"]`` before they run.
    """

    #: Bug: the results table is the ledger: a call with no result is run again.
    no_started = False

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def run(self) -> str:
        self.cp = self.store.load(self.task_id) or Checkpoint(
            task_id=self.task_id, goal=self.goal, artifacts={"replies": [], "results": {}, "started": []}
        )
        if self.cp.status == "completed":
            return self.cp.final_answer or ""
        replies: list[Message] = [pickle.loads(base64.b64decode(r)) for r in self.cp.artifacts["replies"]]
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.goal}]
        for reply in replies:
            messages.append({"role": "assistant", "content": reply.content})
            messages.append({"role": "user", "content": [self.result(b) for b in reply.content if b.type == "tool_use"]})
        while self.cp.iteration < 40:
            response = self.client.messages.create(
                model="claude-sonnet-4-5", max_tokens=1024, tools=self.tools.definitions(), messages=messages
            )
            self.cp.iteration += 1
            if response.stop_reason != "tool_use":
                answer = "".join(b.text for b in response.content if b.type == "text")
                self.cp.status, self.cp.final_answer = "completed", answer
                self.save()
                return answer
            self.cp.artifacts["replies"].append(base64.b64encode(pickle.dumps(response)).decode())
            self.save()
            messages.append({"role": "assistant", "content": response.content})
            messages.append({"role": "user", "content": [self.result(b) for b in response.content if b.type == "tool_use"]})
        raise RuntimeError("iteration budget exhausted")

    def result(self, use: Any) -> dict[str, Any]:
        """The result of ``use``: from the table, or made now (recorded first if it
        changes the world; an unkeyed call started before answered "outcome unknown")."""
        table: dict[str, Any] = self.cp.artifacts["results"]
        if use.id not in table:
            spec = self.tools.spec(use.name)
            started: list[str] = self.cp.artifacts["started"]
            if spec.kind == "unkeyed" and use.id in started and not self.no_started:
                table[use.id] = {"content": UNKNOWN, "is_error": True}
            else:
                if spec.kind != "read_only" and use.id not in started and not self.no_started:
                    started.append(use.id)
                    self.save()
                done = self.tools.call(use.name, use.input, idempotency_key=f"{self.task_id}:{use.id}")
                table[use.id] = {"content": done.content, "is_error": done.is_error}
            self.save()
        entry = table[use.id]
        return {"type": "tool_result", "tool_use_id": use.id, "content": entry["content"], "is_error": entry["is_error"]}


def cookbook_agent(**switches: Any) -> Any:
    design = type("CookbookLoop", (CookbookLoop,), switches) if switches else CookbookLoop

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return design(task_id, goal, client, store, tools).run()

    return run


def rebuilt_history(cp: Checkpoint) -> list[dict[str, Any]]:
    """A cookbook agent's history, rebuilt from its checkpoint: what ``history=`` is told."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": cp.goal}]
    table = cp.artifacts.get("results", {})
    for encoded in cp.artifacts.get("replies", []):
        reply: Message = pickle.loads(base64.b64decode(encoded))
        messages.append({"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True) for b in reply.content]})
        results = [
            {"type": "tool_result", "tool_use_id": b.id, **table[b.id]} for b in reply.content if b.type == "tool_use" and b.id in table
        ]
        if results:
            messages.append({"role": "user", "content": results})
    return messages



# -- a mini-swe-agent style loop --------------------------------------------------------------

SYSTEM_TEMPLATE = "You are a helpful assistant that can interact with a computer."
#: Observations longer than this are cut before they are kept (and so sent and saved).
OBSERVATION_LIMIT = 40


class TrajectoryLoop:
    """mini-swe-agent's agent shape on the SDK's tool use: the history is its own list of
    dicts, the system prompt its first message (``role: "system"``), each reply kept with
    an ``extra`` key (the model's usage), each observation rendered from a template and
    cut to ``OBSERVATION_LIMIT`` characters; its model wrapper takes the system message
    out and keeps ``role`` and ``content`` of the others. The trajectory is kept as it is
    in ``checkpoint.messages`` (the info in ``artifacts["info"]``), saved after each query
    and after each observation, with a write-ahead record before a call that changes
    the world.
    """

    #: Bug: on resume, a last reply without its observation is taken for a step that did
    #: not happen (a step is a query and its observation) and dropped.
    drop_unfinished_step = False
    #: An "outcome unknown" answer sent as an observation like any other, not an error:
    #: the model takes it for done (see ``test_outside.py``).
    unknown_as_output = False

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools

    def add_message(self, role: str, content: Any, **kwargs: Any) -> None:
        self.cp.messages.append({"role": role, "content": content, **kwargs})

    def save(self, exit_status: str | None = None) -> None:
        self.cp.artifacts["info"] = {"exit_status": exit_status, "model_stats": {"api_calls": self.cp.iteration}}
        self.cp = self.store.save(self.cp)

    def run(self) -> str:
        loaded = self.store.load(self.task_id)
        if loaded is None:
            self.cp = Checkpoint(task_id=self.task_id, goal=self.goal)
            self.add_message("system", SYSTEM_TEMPLATE)
            self.add_message("user", f"Your task: {self.goal}.")
            self.save()
        elif loaded.status == "completed":
            return loaded.final_answer or ""
        else:
            self.cp = loaded
            last = self.cp.messages[-1]
            if last["role"] == "assistant":
                if self.drop_unfinished_step:
                    self.cp.messages.pop()  # BUG: the checkpoint holds this reply
                else:
                    self.observe(last["content"])
        while True:
            if self.cp.iteration >= 40:
                raise RuntimeError("LimitsExceeded")
            response = self.query()
            uses = [b for b in response if b["type"] == "tool_use"]
            if not uses:
                answer = "".join(b.get("text", "") for b in response)
                self.cp.status, self.cp.final_answer = "completed", answer
                self.save("Submitted")
                return answer
            self.save()
            self.observe(response)

    def query(self) -> list[dict[str, Any]]:
        system = self.cp.messages[0]["content"]
        messages = [{"role": m["role"], "content": m["content"]} for m in self.cp.messages[1:]]
        response = self.client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, system=system, messages=messages, tools=self.tools.definitions()
        )
        self.cp.iteration += 1
        content = [b.model_dump(mode="json", exclude_none=True) for b in response.content]
        self.add_message("assistant", content, extra={"usage": response.usage.model_dump(mode="json")})
        return content

    def observe(self, content: list[dict[str, Any]]) -> None:
        results = []
        for use in (b for b in content if b["type"] == "tool_use"):
            output = self.execute(use)
            if output is None:  # in doubt: told as an error, so that the model checks or retries
                results.append(
                    {"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN,
                     **({} if self.unknown_as_output else {"is_error": True})}
                )
                continue
            observation = f"Observation: {output}"
            if len(observation) > OBSERVATION_LIMIT:
                observation = observation[:OBSERVATION_LIMIT] + " [output truncated]"
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": observation})
        self.add_message("user", results)
        self.save()

    def execute(self, use: dict[str, Any]) -> str | None:
        """The command's output; ``None`` when its outcome is unknown."""
        spec = self.tools.spec(use["name"])
        record = self.cp.action(use["id"])
        if record is not None and record.result is not None:
            return str(record.result.content)
        if record is not None and spec.kind == "unkeyed":
            return None
        if spec.kind != "read_only" and record is None:
            record = ActionRecord(
                tool_use_id=use["id"], tool_name=use["name"], input=use["input"], idempotency_key=f"{self.task_id}:{use['id']}"
            )
            self.cp.actions.append(record)
            self.save()
        done = self.tools.call(use["name"], use["input"], idempotency_key=f"{self.task_id}:{use['id']}")
        if record is not None:
            record.state = "done"
            record.result = RecordedResult(content=done.content, is_error=done.is_error)
            self.save()
        return str(done.content)


def trajectory_agent(**switches: Any) -> Any:
    design = type("TrajectoryLoop", (TrajectoryLoop,), switches) if switches else TrajectoryLoop

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return design(task_id, goal, client, store, tools).run()

    return run

SOUND = {
    "computer_use": sampling_agent(),
    "screenshots": sampling_agent(caching=False, only_n_most_recent_images=1),
    "sdk_objects": cookbook_agent(),
    "trajectory": trajectory_agent(),
}

TWINS = {
    "computer_use": sampling_agent(resume_note=True),
    "screenshots": sampling_agent(caching=False, only_n_most_recent_images=1, reask_unanswered=True),
    "sdk_objects": cookbook_agent(no_started=True),
    "trajectory": trajectory_agent(drop_unfinished_step=True),
}

