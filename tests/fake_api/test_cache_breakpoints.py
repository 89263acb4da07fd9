"""The fake rejects more than four cache_control breakpoints in a request, as the API does,
counting only the messages each request adds to the last one."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan((Step((ToolCall("look", {"q": "x"}),)),), "done")
TOOLS = [{"name": "look", "description": "Look.", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]
MARK = {"type": "ephemeral"}
LIMIT = "A maximum of 4 blocks with cache_control may be provided. Found 5."


def marked(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "cache_control": MARK}


def create(api: FakeMessagesAPI, messages: list[dict[str, Any]], **fields: Any) -> Any:
    return api.client(max_retries=0).messages.create(model="m", max_tokens=256, messages=messages, tools=TOOLS, **fields)  # type: ignore[arg-type]


def test_five_marks_are_refused_with_the_apis_message() -> None:
    api = FakeMessagesAPI(PLAN)
    four = [{"role": "user", "content": [marked(str(i)) for i in range(4)]}]
    assert create(api, four).stop_reason == "tool_use"
    with pytest.raises(anthropic.BadRequestError, match=LIMIT):
        create(api, four, system=[marked("s")])


def test_a_mark_left_behind_as_the_history_grows_is_counted() -> None:
    # The agent moves its mark onto the latest block each turn but forgets the old ones:
    # each request extends the last, so only the new messages are counted, and their marks
    # add up with the ones already sent.
    api = FakeMessagesAPI(PLAN)
    history: list[dict[str, Any]] = [{"role": "user", "content": [marked("go")]}]
    for turn in range(4):
        reply = create(api, history)
        use = next(b for b in reply.content if b.type == "tool_use") if reply.stop_reason == "tool_use" else None
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        results = [{"type": "tool_result", "tool_use_id": use.id, "content": "seen"}] if use else []
        history.append({"role": "user", "content": [*results, marked(f"turn {turn}")]})
        if turn == 2:
            break
    # 1 + 3 marks sent so far: one more is the fifth.
    history[-1]["content"].append(marked("one more"))
    with pytest.raises(anthropic.BadRequestError, match=LIMIT):
        create(api, history)


def test_a_mark_moved_onto_the_latest_block_stays_within_the_limit() -> None:
    api = FakeMessagesAPI(PLAN)
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    for _ in range(6):
        for message in history:  # remove the marks of earlier turns
            if isinstance(message["content"], list):
                for block in message["content"]:
                    block.pop("cache_control", None)
        history[-1]["content"][-1]["cache_control"] = MARK
        reply = create(api, history, system=[marked("s")])
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        if reply.stop_reason != "tool_use":
            history.append({"role": "user", "content": [{"type": "text", "text": "again"}]})
            continue
        use = next(b for b in reply.content if b.type == "tool_use")
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "seen"}]})
