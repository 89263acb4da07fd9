"""A small async checkpointed agent, correct for tools that are reversible or honour keys.

It saves after every model reply and every tool result and, on resume, runs the calls a
crash left pending with the same idempotency key: safe exactly when a repeated call has
no second effect, which is what ``toolkit.safe_toolbox`` offers.
"""

from __future__ import annotations

from typing import Any

from stores import Checkpoint, CheckpointStore


async def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    checkpoint = store.load(task_id)
    if checkpoint is None:
        checkpoint = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
    if checkpoint.status == "completed":
        return checkpoint.final_answer or ""
    messages = checkpoint.messages
    pending = _pending(messages)
    while True:
        if pending:
            if messages[-1]["role"] == "assistant":
                messages.append({"role": "user", "content": []})
            for use in pending:
                result = tools.call(use["name"], use["input"], idempotency_key=f"{task_id}:{use['id']}")
                messages[-1]["content"].append(result.to_block(use["id"]))
                checkpoint = store.save(checkpoint.model_copy(update={"messages": messages}))
        reply = await client.messages.create(
            model="async-agent", max_tokens=512, messages=messages, tools=tools.definitions()
        )
        content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
        messages.append({"role": "assistant", "content": content})
        iteration = checkpoint.iteration + 1
        pending = [b for b in content if b["type"] == "tool_use"]
        if not pending:
            answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
            store.save(
                checkpoint.model_copy(
                    update={"messages": messages, "iteration": iteration, "status": "completed", "final_answer": answer}
                )
            )
            return answer
        checkpoint = store.save(checkpoint.model_copy(update={"messages": messages, "iteration": iteration}))


def _pending(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls of the last assistant turn that have no result yet."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            content = messages[index]["content"]
            uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            answered = set()
            for later in messages[index + 1 :]:
                if isinstance(later["content"], list):
                    answered |= {b.get("tool_use_id") for b in later["content"] if b.get("type") == "tool_result"}
            return [u for u in uses if u["id"] not in answered]
    return []
