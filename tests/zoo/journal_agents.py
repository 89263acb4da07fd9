"""Journal replay, as durable-execution frameworks (Temporal, DBOS, Restate) run a workflow.

Every step is appended to a journal kept in the checkpoint (``artifacts["journal"]``): a
model reply, the intent of an irreversible call, a tool's result. A resume replays the
journal from the start, taking the recorded reply or result where the live run made the
call, and goes live at the first step not recorded. An irreversible call whose intent is
recorded and its result not was cut off by a crash: a keyed one is made again with its
key, an unkeyed one is answered "outcome unknown". Keys come from the journal position of
the reply and the call's place in it, stable across replays.

``new_ids_on_replay``: the replay gives each recorded call a fresh ``tool_use`` id, paired
consistently with its result (the API accepts ids a client writes). Sound: its keys do not
come from the ids. An outside round's agent of this design was reported as a duplicate of
its own making, where the same crash left the unkeyed call in doubt for the agent that
keeps the ids: the scripted model did not count a call answered under a foreign id as
asked, so its new ask looked like the old one.

``keys_from_ids``: the twin that also derives its keys from the ``tool_use`` id: a replay
with fresh ids makes a keyed call again under another key. Caught by ``no_duplicate_effect``.
"""

from __future__ import annotations

import uuid
from typing import Any

from stores import Checkpoint

MODEL = "claude-sonnet-4-5"
UNKNOWN = "outcome unknown (the agent restarted during the call): check before repeating it"


def journal_agent(*, new_ids_on_replay: bool = False, keys_from_ids: bool = False) -> Any:
    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        cp = store.load(task_id)
        if cp is None:
            cp = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}],
                                       artifacts={"journal": []}))
        if cp.status == "completed":
            return cp.final_answer or ""
        journal: list[dict[str, Any]] = list(cp.artifacts.get("journal", []))
        messages: list[dict[str, Any]] = [{"role": "user", "content": goal}]
        at = 0  # the next journal entry to replay; past the end, the run is live

        def record(entry: dict[str, Any], history: list[dict[str, Any]], **fields: Any) -> None:
            nonlocal cp, at
            journal.append(entry)
            at += 1
            update = {"artifacts": {"journal": list(journal)}, "messages": history,
                      "iteration": sum(1 for e in journal if e["t"] == "reply"), **fields}
            cp = store.save(cp.model_copy(update=update))

        for _ in range(30):
            if at < len(journal):
                content = journal[at]["content"]
                at += 1
                if new_ids_on_replay:
                    content = [dict(b, id=f"toolu_{uuid.uuid4().hex[:20]}") if b["type"] == "tool_use" else b
                               for b in content]
            else:
                reply = client.messages.create(model=MODEL, max_tokens=1024, messages=messages,
                                               tools=tools.definitions())
                content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
                uses = [b for b in content if b["type"] == "tool_use"]
                if not uses:
                    answer = "".join(b.get("text", "") for b in content)
                    record({"t": "reply", "content": content}, [*messages, {"role": "assistant", "content": content}],
                           status="completed", final_answer=answer)
                    return answer
                record({"t": "reply", "content": content}, [*messages, {"role": "assistant", "content": content}])
            reply_at = at - 1
            messages.append({"role": "assistant", "content": content})
            results: list[dict[str, Any]] = []
            for place, use in enumerate(b for b in content if b["type"] == "tool_use"):
                spec = tools.spec(use["name"])
                key = f"{task_id}/{use['id']}" if keys_from_ids else f"{task_id}/reply{reply_at}/call{place}"
                intended = at < len(journal) and journal[at]["t"] == "intent"
                if intended:
                    at += 1
                elif spec.irreversible:
                    record({"t": "intent"}, [*messages, {"role": "user", "content": results}] if results else list(messages))
                if at < len(journal) and journal[at]["t"] == "result":
                    entry = journal[at]
                    at += 1
                    results.append({"type": "tool_result", "tool_use_id": use["id"], "content": entry["content"],
                                    **({"is_error": True} if entry["is_error"] else {})})
                    continue
                if intended and spec.irreversible and not spec.idempotent:
                    block = {"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True}
                else:
                    block = tools.call(use["name"], use["input"],
                                       idempotency_key=key if spec.idempotent else None).to_block(use["id"])
                results.append(block)
                record({"t": "result", "content": block["content"], "is_error": bool(block.get("is_error"))},
                       [*messages, {"role": "user", "content": list(results)}])
            messages.append({"role": "user", "content": results})
        raise RuntimeError("turn budget spent")

    return run
