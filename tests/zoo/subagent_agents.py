"""The zoo's orchestrators, written from the user docs in a project outside this one: a
research lead that hands sub-tasks to sub-agents through a `delegate` tool. Each sub-agent is a conversation of its own, checkpointed under
f"{task_id}/sub/{tool_use_id}" in the same store; its tool calls go through the same
toolbox. The lead records each finished sub-task in completed_tasks, its answer in
artifacts["answers"]. Irreversible tools go through a write-ahead ledger (cp.actions).
"""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stores import ActionRecord, Checkpoint, RecordedResult, open_store

DELEGATE = {
    "name": "delegate",
    "description": "Hand a self-contained sub-task to a research sub-agent; returns its answer.",
    "input_schema": {
        "type": "object",
        "properties": {"task": {"type": "string", "description": "what the sub-agent must do"}},
        "required": ["task"],
    },
}
UNKNOWN = "Outcome unknown: the run stopped before this action's outcome was recorded. Check before retrying."
LEAD_SYSTEM = "You are the lead researcher. Delegate sub-tasks with the delegate tool."
SUB_SYSTEM = "You are a research sub-agent. Do the task you are given and answer it."


def key_for(task_id: str, tool_use_id: str) -> str:
    return hashlib.sha256(f"{task_id}:{tool_use_id}".encode()).hexdigest()[:24]


def _blocks(reply: Any) -> list[dict[str, Any]]:
    return [b.model_dump(mode="json", exclude_none=True) for b in reply.content]


class Orchestrator:
    max_turns = 30
    parallel_subagents = False
    # bugs of the naive twins
    restart_subagent = False      # a sub-agent's checkpoint is ignored: it starts over
    delete_sub_on_success = False  # a sub-agent's checkpoint is deleted when it finishes
    save_reply_late = False       # the lead saves its reply only once its calls are answered
    ephemeral_subagent = False    # sub-agents keep their history in memory only
    reask_lead_reply = False      # on resume the lead drops its stored reply and asks again

    def __init__(self, client: Any, store: Any, tools: Any) -> None:
        self.client, self.store, self.tools = client, store, tools

    # -- one conversation ---------------------------------------------------------------
    def converse(self, task_id: str, prompt: str, *, lead: bool) -> str:
        cp = self.store.load(task_id)
        if cp is not None and self.restart_subagent and not lead and cp.status != "completed":
            cp = Checkpoint(task_id=task_id, goal=prompt, version=cp.version)  # BUG
            cp.messages = [{"role": "user", "content": prompt}]
            cp = self.store.save(cp)
        if cp is None:
            cp = self.store.save(Checkpoint(task_id=task_id, goal=prompt, messages=[{"role": "user", "content": prompt}]))
        if cp.status == "completed":
            return cp.final_answer or ""
        if self.reask_lead_reply and lead and cp.messages[-1]["role"] == "assistant":
            cp.messages.pop()  # BUG
        tools = self.tools.definitions() + ([DELEGATE] if lead else [])
        system = LEAD_SYSTEM if lead else SUB_SYSTEM
        while cp.iteration < self.max_turns:
            last = cp.messages[-1]
            uses = [b for b in last["content"] if b.get("type") == "tool_use"] if last["role"] == "assistant" else []
            if uses:
                cp = self.answer(cp, uses)
                continue
            reply = self.client.messages.create(
                model="claude-sonnet-4-5", max_tokens=2048, system=system, messages=cp.messages, tools=tools
            )
            content = _blocks(reply)
            cp.messages.append({"role": "assistant", "content": content})
            cp.iteration += 1
            if reply.stop_reason != "tool_use":
                answer = "".join(b.get("text", "") for b in content if b.get("type") == "text")
                cp.status, cp.final_answer = "completed", answer
                cp = self.store.save(cp)
                if self.delete_sub_on_success and not lead:
                    self.store.delete(task_id)  # BUG
                return answer
            if not (self.save_reply_late and lead):
                cp = self.store.save(cp)  # the reply (and its tool_use ids) is durable before any tool runs
        raise RuntimeError(f"{task_id}: no answer after {self.max_turns} turns")

    # -- answering a turn's calls -------------------------------------------------------
    def answer(self, cp: Checkpoint, uses: list[dict[str, Any]]) -> Checkpoint:
        results: dict[str, dict[str, Any]] = {}
        delegations = [u for u in uses if u["name"] == "delegate"]
        for use in uses:
            if use["name"] != "delegate":
                cp, results[use["id"]] = self.run_tool(cp, use)
        if self.parallel_subagents and len(delegations) > 1:
            with ThreadPoolExecutor(max_workers=len(delegations)) as pool:
                answers = list(pool.map(lambda u: self.delegate(cp, u), delegations))
            for use, sub_answer in zip(delegations, answers, strict=True):
                cp = self.record_delegation(cp, use, sub_answer)
                results[use["id"]] = {"type": "tool_result", "tool_use_id": use["id"], "content": sub_answer}
        else:
            for use in delegations:
                sub_answer = self.delegate(cp, use)
                cp = self.record_delegation(cp, use, sub_answer)
                results[use["id"]] = {"type": "tool_result", "tool_use_id": use["id"], "content": sub_answer}
        cp.messages.append({"role": "user", "content": [results[u["id"]] for u in uses]})
        return self.store.save(cp)

    def delegate(self, cp: Checkpoint, use: dict[str, Any]) -> str:
        if use["id"] in cp.completed_tasks:
            return str(cp.artifacts["answers"][use["id"]])
        if self.ephemeral_subagent:
            return type(self)(self.client, open_store("memory://"), self.tools).converse(
                f"{cp.task_id}/sub/{use['id']}", use["input"]["task"], lead=False)
        return self.converse(f"{cp.task_id}/sub/{use['id']}", use["input"]["task"], lead=False)

    def record_delegation(self, cp: Checkpoint, use: dict[str, Any], sub_answer: str) -> Checkpoint:
        if use["id"] in cp.completed_tasks:
            return cp
        cp.completed_tasks.append(use["id"])
        cp.artifacts.setdefault("answers", {})[use["id"]] = sub_answer
        return self.store.save(cp)

    def run_tool(self, cp: Checkpoint, use: dict[str, Any]) -> tuple[Checkpoint, dict[str, Any]]:
        spec = self.tools.spec(use["name"])
        if not spec.irreversible:
            result = self.tools.call(use["name"], use["input"])
            return cp, result.to_block(use["id"])
        record = cp.action(use["id"])
        if record is not None and record.state == "done" and record.result is not None:
            block = {"type": "tool_result", "tool_use_id": use["id"], "content": record.result.content}
            if record.result.is_error:
                block["is_error"] = True
            return cp, block
        if record is not None and not (spec.idempotent or spec.repeat_safe):
            record.state = "unknown"
            return self.store.save(cp), {"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True}
        if record is None:
            record = ActionRecord(tool_use_id=use["id"], tool_name=use["name"], input=use["input"],
                                  idempotency_key=key_for(cp.task_id, use["id"]))
            cp.actions.append(record)
            cp = self.store.save(cp)
            record = cp.action(use["id"])
            assert record is not None
        result = self.tools.call(use["name"], use["input"],
                                 idempotency_key=record.idempotency_key if spec.idempotent else None)
        record.state = "done"
        record.result = RecordedResult(content=result.content, is_error=result.is_error)
        return self.store.save(cp), result.to_block(use["id"])


def make_run(cls: type[Orchestrator] = Orchestrator, **switches: Any) -> Any:
    design = type(cls.__name__, (cls,), switches) if switches else cls

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        return design(client, store, tools).converse(task_id, goal, lead=True)

    return run


run = make_run()
run_parallel = make_run(parallel_subagents=True)
#: Each naive twin: its switches, as a user would write the bug.
TWINS = {
    "restart_subagent": make_run(restart_subagent=True),
    "delete_sub_on_success": make_run(delete_sub_on_success=True),
    "reask_lead_reply": make_run(reask_lead_reply=True),
    "save_reply_late": make_run(save_reply_late=True),
    "ephemeral_subagent": make_run(ephemeral_subagent=True),
    "parallel_ephemeral": make_run(ephemeral_subagent=True, parallel_subagents=True),
    "parallel_restart": make_run(restart_subagent=True, parallel_subagents=True),
}
