"""A supervisor with handoffs, written as a class with an explicit state machine: a design
from outside the project (written from the docs alone, as a user would).

Two desks share one conversation (a handoff, Swarm style): ``triage`` and ``billing``, each
with its own system prompt; the model hands over with the ``transfer`` tool. The state
machine

    ROUTING -> CALLING_MODEL -> RUNNING_TOOLS -> CALLING_MODEL ... -> DONE

and the whole state (phase, active desk, the open turn's calls, the cursor into them, the
results so far) is a dataclass kept in ``checkpoint.metadata["desk"]``. The results reach
``checkpoint.messages`` only once the turn's calls are all answered. Calls that change the
world are written ahead in ``checkpoint.actions``. Each request sends the first message
and the last four, the window starting at an assistant turn. With ``budget``, the agent
refuses a model turn past it (the stored iteration counts them, across restarts) and
raises on a failed save, as a sound agent may. With ``plans_first``, a planning call that
offers no tools opens the conversation (its text is kept in the history).

Twins (class switches):

- ``cursor_before_call``: the cursor is advanced and saved before the call runs, so a
  crash in the call leaves it unanswered (``valid_sequence``);
- ``drops_open_turn``: a resume in RUNNING_TOOLS drops the open turn, saves the shorter
  history, and asks the model again (``recorded_work_not_redone``, read-only tools too);
- ``forgets_desk``: the active desk is not loaded back, so a resume goes on under the
  triage prompt. The scripted model answers alike whatever the prompt, so no oracle
  fails; ``fuzz`` warns (``ResumeDriftWarning``).
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pytest_agentckpt import Toolbox
from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult

MODEL = "claude-sonnet-4-5"
WINDOW = 4
PROMPTS = {
    "triage": "You are the triage desk. Look things up; hand billing work to billing with transfer.",
    "billing": "You are the billing desk. Charge customers and notify them; hand back with transfer.",
}


def lookup(sku: Literal["A1", "B2", "C3"]) -> str:
    """Look a product up in the catalogue."""
    return f"{sku}: in stock, 10 EUR"


def set_status(order: Literal["O-1", "O-2"], status: Literal["packed", "shipped"]) -> str:
    """Set an order's status (overwrites it)."""
    return f"{order} is {status}"


def charge(customer: Literal["ann", "bob"], amount: int, idempotency_key: str | None = None) -> str:
    """Charge a customer's card; the payment API drops a repeat with the same key."""
    return f"charged {customer} {amount} EUR"


def notify(to: Literal["ann", "bob"], text: Literal["shipped", "delayed"]) -> str:
    """Send an SMS to a customer (no idempotency key)."""
    return f"sms '{text}' to {to}"


def transfer(to: Literal["triage", "billing"]) -> str:
    """Hand the conversation to another desk."""
    return f"transferred to {to}"


def desk_tools() -> Toolbox:
    return Toolbox.from_functions(
        lookup, set_status, charge, notify, transfer,
        kinds={"set_status": "repeat_safe", "charge": "keyed", "notify": "unkeyed"},
        inputs={"charge": [{"customer": "ann", "amount": 10}, {"customer": "bob", "amount": 25}]},
    )


def read_only_desk_tools() -> Toolbox:
    return Toolbox.from_functions(lookup, transfer)


class Phase(str, enum.Enum):
    ROUTING = "routing"
    CALLING_MODEL = "calling_model"
    RUNNING_TOOLS = "running_tools"
    DONE = "done"


@dataclass
class DeskState:
    phase: Phase = Phase.ROUTING
    specialist: str = "triage"
    pending: list[dict[str, Any]] = field(default_factory=list)  # the open turn's tool_use blocks
    cursor: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)  # its tool_result blocks so far

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "phase": self.phase.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeskState:
        return cls(Phase(d["phase"]), d["specialist"], list(d["pending"]), d["cursor"], list(d["results"]))


def _window(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(messages) <= WINDOW + 1:
        return messages
    start = len(messages) - WINDOW
    while start < len(messages) and messages[start]["role"] != "assistant":
        start += 1  # never open the tail on a user turn of tool results
    return messages[:1] + messages[start:]


def _block(use_id: str, content: Any, is_error: bool) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": content}
    return {**block, "is_error": True} if is_error else block


class Desk:
    budget: int | None = None
    plans_first = False  # a planning call without tools opens the conversation
    cursor_before_call = False  # twin
    drops_open_turn = False  # twin
    forgets_desk = False  # twin

    def __init__(self, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.client, self.store, self.tools = client, store, tools

    def _save(self) -> None:
        self.cp.metadata["desk"] = self.state.to_dict()
        self.cp = self.store.save(self.cp)

    def run(self, task_id: str, goal: str) -> str:
        self.task_id = task_id
        loaded = self.store.load(task_id)
        if loaded is None:
            self.cp = Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}])
            self.state = DeskState()
            self._save()
        else:
            self.cp, self.state = loaded, DeskState.from_dict(loaded.metadata["desk"])
            if self.forgets_desk:
                self.state.specialist = "triage"  # BUG: the active desk is not loaded back
        if self.drops_open_turn and self.state.phase is Phase.RUNNING_TOOLS:
            # BUG: "a half-done turn is unreliable: drop it and ask again"
            self.cp.messages.pop()
            self.state = DeskState(Phase.CALLING_MODEL, self.state.specialist)
            self._save()
        while self.state.phase is not Phase.DONE:
            if self.state.phase is Phase.ROUTING:
                self.state.specialist = "billing" if "charge" in goal.lower() else "triage"
                if self.plans_first:
                    self._plan()
                self.state.phase = Phase.CALLING_MODEL
                self._save()
            elif self.state.phase is Phase.CALLING_MODEL:
                self._call_model()
            else:
                self._run_tools()
        return self.cp.final_answer or ""

    def _plan(self) -> None:
        """A planning call that offers no tools: its text opens the conversation."""
        reply = self.client.messages.create(
            model=MODEL, max_tokens=1024, system=PROMPTS[self.state.specialist],
            messages=[{"role": "user", "content": f"Write a short plan for: {self.cp.goal}"}],
        )
        plan = "".join(getattr(block, "text", "") for block in reply.content)
        self.cp.messages += [
            {"role": "assistant", "content": f"Plan: {plan}"},
            {"role": "user", "content": "Carry out the plan."},
        ]

    def _call_model(self) -> None:
        if self.budget is not None and self.cp.iteration >= self.budget:
            raise RuntimeError(f"budget of {self.budget} model turns spent")
        reply = self.client.messages.create(
            model=MODEL, max_tokens=1024, system=PROMPTS[self.state.specialist],
            messages=_window(self.cp.messages), tools=self.tools.definitions(),
        )
        content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
        self.cp.messages.append({"role": "assistant", "content": content})
        self.cp.iteration += 1
        if reply.stop_reason != "tool_use":
            self.cp.final_answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
            self.cp.status = "completed"
            self.state.phase = Phase.DONE
        else:
            self.state = DeskState(Phase.RUNNING_TOOLS, self.state.specialist, [b for b in content if b["type"] == "tool_use"])
        self._save()

    def _run_tools(self) -> None:
        state = self.state
        while state.cursor < len(state.pending):
            use = state.pending[state.cursor]
            if self.cursor_before_call:
                state.cursor += 1  # BUG: a crash in the call leaves it unanswered
                self._save()
                state.results.append(self._settle(use, fresh=True))
            else:
                state.results.append(self._settle(use, fresh=False))
                state.cursor += 1
            self._save()
        self.cp.messages.append({"role": "user", "content": list(state.results)})
        self.state = DeskState(Phase.CALLING_MODEL, state.specialist)
        self._save()

    def _settle(self, use: dict[str, Any], *, fresh: bool) -> dict[str, Any]:
        name, args, use_id = use["name"], use.get("input") or {}, use["id"]
        if name == "transfer":
            self.state.specialist = args["to"]
        kind = self.tools.spec(name).kind if name in self.tools else "read_only"
        if kind == "read_only":
            result = self.tools.call(name, args)
            return _block(use_id, result.content, result.is_error)
        record = None if fresh else self.cp.action(use_id)
        if record is not None and record.result is not None:
            return _block(use_id, record.result.content, record.result.is_error)
        if record is not None and kind == "unkeyed":
            record.state = "unknown"
            record.result = RecordedResult(
                content=f"The outcome of {name} is unknown (the agent stopped while it ran). "
                "Check whether it happened before doing it again.",
                is_error=True,
            )
            return _block(use_id, record.result.content, True)
        if record is None:
            record = ActionRecord(tool_use_id=use_id, tool_name=name, input=args, idempotency_key=f"{self.task_id}:{use_id}")
            self.cp.actions.append(record)
            self._save()
        result = self.tools.call(name, args, idempotency_key=record.idempotency_key)
        record.state, record.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
        return _block(use_id, result.content, result.is_error)


def desk_agent(**switches: Any) -> Any:
    design = type("Desk", (Desk,), switches)

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return design(client, store, tools).run(task_id, goal)

    return run
