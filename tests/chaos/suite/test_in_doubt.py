"""A team's support bot, written apart from the reference agent, and its tests.

The bot runs its own loop and keeps a journal of its irreversible calls in
``checkpoint.metadata``: an intent before the call, its result after. On resume, a call
journalled without a result is run again when the tool honours idempotency keys, and
answered "outcome unknown" when it does not (``email_customer``). The scripted model then
asks for that e-mail again, so a crash right after the e-mail went out sends a second one,
and the test that asserts exactly one e-mail fails there whatever the bot does: no agent
can know whether an unkeyed effect happened. Chaos mode reports those points in doubt,
with the unsafe tool, and fails only what the bot itself got wrong:

- ``sound``: passes (its in-doubt points are reported, not failed);
- ``key_per_attempt``: derives the refund's key from the attempt, so a resume refunds
  again under a new key: fails (``no_duplicate_effect``, and the payments assertion);
- ``gives_up``: answers "could not confirm" once an outcome is unknown: fails at the
  in-doubt points all the same, since its answer is wrong with the repeat left out too.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from pytest_agentckpt import Plan, Step, ToolCall
from reference_agent.toolbox import Toolbox, tool
from stores import Checkpoint, CheckpointStore

ATTEMPTS = itertools.count()


class SupportBot:
    def __init__(self, client: Any, store: CheckpointStore, tools: Any, bug: str) -> None:
        self.client, self.store, self.tools, self.bug = client, store, tools, bug
        self.attempt = next(ATTEMPTS)

    def handle(self, ticket_id: str, text: str) -> str:
        cp = self.store.load(ticket_id)
        if cp is None:
            cp = self.store.save(Checkpoint(task_id=ticket_id, goal=text, messages=[{"role": "user", "content": text}]))
        if cp.status == "completed":
            return cp.final_answer or ""
        for _ in range(20):
            if cp.messages[-1]["role"] == "assistant":
                cp = self._run_tools(cp)  # a turn whose tools had not all run: finish it
                continue
            reply = self.client.messages.create(
                model="claude-sonnet-4-5", max_tokens=1024, messages=cp.messages, tools=self.tools.definitions()
            )
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            cp.messages.append({"role": "assistant", "content": content})
            cp.iteration += 1
            if reply.stop_reason != "tool_use":
                cp.status = "completed"
                cp.final_answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
                if self.bug == "gives_up" and cp.metadata.get("unknown"):
                    cp.final_answer = "could not confirm the e-mail"
                self.store.save(cp)
                return cp.final_answer
            cp = self.store.save(cp)
        raise RuntimeError("too many turns")

    def _run_tools(self, cp: Checkpoint) -> Checkpoint:
        results = []
        for block in cp.messages[-1]["content"]:
            if block["type"] != "tool_use":
                continue
            entry = cp.metadata.setdefault("journal", {}).get(block["id"])
            kind = self.tools.spec(block["name"]).kind
            if entry and entry["result"] is not None:
                content, is_error = entry["result"], entry["is_error"]
            elif entry and kind == "unkeyed":
                cp.metadata["unknown"] = True
                content, is_error = "outcome unknown: the bot stopped while this ran; check before retrying", True
            else:
                if kind != "read_only":
                    cp.metadata["journal"][block["id"]] = {"result": None}
                    cp = self.store.save(cp)
                key = f"{cp.task_id}/{block['id']}"
                if self.bug == "key_per_attempt":
                    key += f"/{self.attempt}"
                result = self.tools.call(block["name"], block["input"], idempotency_key=key)
                content, is_error = result.content, result.is_error
                if kind != "read_only":
                    cp.metadata["journal"][block["id"]] = {"result": content, "is_error": is_error}
            results.append({"type": "tool_result", "tool_use_id": block["id"], "content": content, "is_error": is_error})
        cp.messages.append({"role": "user", "content": results})
        return self.store.save(cp)


@pytest.fixture
def payments() -> dict[str, int]:
    return {}


@pytest.fixture
def outbox() -> list[str]:
    return []


@pytest.fixture
def agentckpt_tools(payments: dict[str, int], outbox: list[str]) -> Toolbox:
    @tool()
    def lookup_order(order: str) -> str:
        """Look an order up."""
        return f"order {order}: 30 EUR, paid"

    @tool(irreversible=True, idempotent=True)
    def issue_refund(order: str, amount: int, idempotency_key: str | None = None) -> str:
        """Refund an order (the payment API drops a repeat with the same key)."""
        payments.setdefault(idempotency_key or f"no key {len(payments)}", amount)
        return f"refunded {amount} EUR on {order}"

    @tool(irreversible=True)
    def email_customer(text: str) -> str:
        """E-mail the customer (no idempotency key)."""
        outbox.append(text)
        return "sent"

    return Toolbox([lookup_order, issue_refund, email_customer])


MAIL = "Your refund of 30 EUR is on its way"
PLAN = Plan(
    steps=(
        Step(calls=(ToolCall("lookup_order", {"order": "A7"}),)),
        Step(calls=(ToolCall("issue_refund", {"order": "A7", "amount": 30}),)),
        Step(calls=(ToolCall("email_customer", {"text": MAIL}),)),
    ),
    final_answer="refunded and told the customer",
)


@pytest.mark.parametrize("bug", ["sound", "key_per_attempt", "gives_up"])
@pytest.mark.agentckpt_model(plan=PLAN)
def test_refund_and_one_email(
    anthropic_client: Any,
    checkpoint_store: CheckpointStore,
    agentckpt_tools: Toolbox,
    payments: dict[str, int],
    outbox: list[str],
    bug: str,
) -> None:
    answer = SupportBot(anthropic_client, checkpoint_store, agentckpt_tools, bug).handle("T-1", "Refund order A7")
    assert answer == "refunded and told the customer"
    assert list(payments.values()) == [30]
    assert outbox == [MAIL]
