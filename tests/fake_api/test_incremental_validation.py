"""RequestValidator: a request that extends the last valid one checks only what it adds;
any other request gets the full check, with the errors validate_messages gives."""

from __future__ import annotations

import copy
import json
from typing import Any

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import CannedModel, thinking_block
from reference_agent.validation import InvalidHistoryError, RequestValidator, validate_messages


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def use(id_: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": "t", "input": {}}


def result(id_: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id_, "content": content}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def loop(turns: int) -> list[dict[str, Any]]:
    """A valid tool loop: a user goal, then ``turns`` (tool_use, tool_result) pairs."""
    messages = [user(text("go"))]
    for n in range(turns):
        messages += [assistant(text(f"step {n}"), use(f"toolu_{n}")), user(result(f"toolu_{n}"))]
    return messages


def error_of(check: Any, messages: Any, **kwargs: Any) -> str | None:
    try:
        check(messages, **kwargs)
    except InvalidHistoryError as exc:
        return str(exc)
    return None


def primed(messages: list[dict[str, Any]]) -> RequestValidator:
    validator = RequestValidator()
    assert validator.validate(copy.deepcopy(messages)) == 0
    return validator


def test_an_extension_checks_only_the_new_messages() -> None:
    validator = primed(loop(3))
    assert validator.validate(loop(4)) == 7
    assert validator.validate(loop(5)) == 9
    # The same request again (a retry): nothing new to check.
    assert validator.validate(loop(5)) == 11


def test_an_error_in_the_new_messages_is_the_full_checks_error() -> None:
    validator = primed(loop(3))
    bad = [*loop(3), assistant(use("toolu_1")), user(result("toolu_1"))]  # a reused id
    expected = error_of(validate_messages, bad)
    assert expected == "messages.7.content.0: `tool_use` ids must be unique"
    assert error_of(validator.validate, bad) == expected
    # A failed request leaves nothing to resume from: the next one is checked in full.
    assert validator.validate(loop(4)) == 0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # an earlier message edited
        (lambda m: m[3]["content"].__setitem__(0, text(" ")), "messages.3.content.0: text content blocks must contain non-whitespace text"),
        # a message removed
        (lambda m: m.pop(4), "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message."),
        # a tool_result changed to answer another call
        (lambda m: m[2]["content"].__setitem__(0, result("toolu_9")), "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."),
        # a tool_result's content changed to something invalid
        (lambda m: m[4]["content"].__setitem__(0, result("toolu_1", [text("")])), "messages.4.content.0.content.0: text content blocks must be non-empty"),
        # the first message replaced
        (lambda m: m.__setitem__(0, assistant(text("hi"))), 'messages.0: first message must use the "user" role'),
    ],
)
def test_a_changed_prefix_gets_the_full_check(change: Any, expected: str) -> None:
    validator = primed(loop(3))
    changed = loop(4)
    change(changed)
    assert error_of(validate_messages, changed) == expected
    assert error_of(validator.validate, changed) == expected


def test_a_changed_but_valid_prefix_is_checked_from_the_first_message() -> None:
    validator = primed(loop(3))
    edited = loop(4)
    edited[2]["content"][0]["content"] = "another result"
    assert validator.validate(edited) == 0
    shorter = loop(2)
    assert validator.validate(shorter) == 0


def test_an_empty_final_assistant_message_is_not_resumed_from() -> None:
    # Let through as a final prefill, the same empty message is an error once followed.
    validator = RequestValidator()
    prefill = [user(text("go")), {"role": "assistant", "content": []}]
    validator.validate(prefill, allow_prefill=True)
    followed = [*prefill, user(text("more"))]
    expected = error_of(validate_messages, followed)
    assert expected is not None and expected.startswith("messages.1: all messages must have non-empty content")
    assert error_of(validator.validate, followed) == expected


def test_the_end_of_the_array_is_checked_with_each_requests_options() -> None:
    validator = primed(loop(1))
    ending = [*loop(1), assistant(text("prefill"))]
    assert error_of(validator.validate, ending) == error_of(validate_messages, ending)
    validator = primed(loop(1))
    assert validator.validate(ending, allow_prefill=True) == 3
    # thinking: the last assistant turn of a tool loop must open with thinking.
    validator = primed(loop(1))
    expected = error_of(validate_messages, loop(2), thinking=True)
    assert expected is not None
    assert error_of(validator.validate, loop(2), thinking=True) == expected


# -- against validate_messages, request after request ----------------------------------

_BLOCKS = st.sampled_from(
    [
        ("user", text("hi")),
        ("user", text(" ")),
        ("user", result("toolu_a")),
        ("user", result("toolu_b")),
        ("user", result("toolu_a", [text("")])),
        ("assistant", text("ok")),
        ("assistant", use("toolu_a")),
        ("assistant", use("toolu_b")),
        ("assistant", use("bad id")),
        ("assistant", thinking_block("hm")),
        ("user", use("toolu_c")),
        ("assistant", result("toolu_a")),
    ]
)


@st.composite
def conversations(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """A series of requests, each an extension of the last, a cut or an edit of it."""
    requests: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = [user(text("go"))]
    for _ in range(draw(st.integers(1, 8))):
        action = draw(st.sampled_from(["extend", "extend", "extend", "cut", "edit"]))
        current = copy.deepcopy(current)
        if action == "extend" or len(current) < 2:
            for _ in range(draw(st.integers(1, 3))):
                role, block = draw(_BLOCKS)
                current.append({"role": role, "content": [copy.deepcopy(block)]})
        elif action == "cut":
            del current[draw(st.integers(0, len(current) - 1))]
        else:
            i = draw(st.integers(0, len(current) - 1))
            role, block = draw(_BLOCKS)
            current[i] = {"role": role, "content": [copy.deepcopy(block)]}
        if current:
            requests.append(current)
    return requests


@settings(max_examples=300, deadline=None)
@given(conversations(), st.booleans(), st.booleans())
def test_every_request_gets_validate_messages_verdict(
    requests: list[list[dict[str, Any]]], allow_prefill: bool, thinking: bool
) -> None:
    validator = RequestValidator()
    for messages in requests:
        # Parsed afresh each time, as the fake API parses each request body.
        fresh = json.loads(json.dumps(messages))
        expected = error_of(validate_messages, messages, allow_prefill=allow_prefill, thinking=thinking)
        got = error_of(validator.validate, fresh, allow_prefill=allow_prefill, thinking=thinking)
        assert got == expected


# -- through the fake API ----------------------------------------------------------------


def test_the_fake_answers_a_changed_prefix_with_the_full_checks_400() -> None:
    api = FakeMessagesAPI(CannedModel(["a", "b", "c"]))
    client = api.client(max_retries=0)
    client.messages.create(model="m", max_tokens=8, messages=loop(3))
    edited = loop(4)
    edited[4]["content"][0]["tool_use_id"] = "toolu_0"  # answers a call of another turn
    expected = error_of(validate_messages, edited)
    assert expected is not None
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(model="m", max_tokens=8, messages=edited)
    assert raised.value.body["error"]["message"] == expected  # type: ignore[index]
    # After the refusal the valid extension is still served.
    reply = client.messages.create(model="m", max_tokens=8, messages=loop(4))
    assert reply.content[0].text == "b"


def test_the_fake_checks_an_edited_thinking_signature_in_the_prefix() -> None:
    thought = thinking_block("plan")
    first = [user(text("go")), assistant(thought, use("toolu_1")), user(result("toolu_1"))]
    api = FakeMessagesAPI(CannedModel(["a", "b"]))
    client = api.client(max_retries=0)
    client.messages.create(model="m", max_tokens=8, messages=first)
    edited = copy.deepcopy(first)
    edited[1]["content"][0]["thinking"] = "another plan"
    edited += [assistant(text("more")), user(text("go on"))]
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(model="m", max_tokens=8, messages=edited)
    assert raised.value.body["error"]["message"] == (  # type: ignore[index]
        "messages.1.content.0: Invalid `signature` in `thinking` block"
    )


class EditingModel:
    """A test's own model that edits the request it is given (blanks the first message)."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(len(request["messages"]))
        request["messages"][0]["content"] = ""  # would be invalid, were it the fake's copy
        return {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}


def test_a_model_that_edits_its_request_does_not_change_what_the_fake_validates_next() -> None:
    model = EditingModel()
    api = FakeMessagesAPI(model=model)
    client = api.client(max_retries=0)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Hi"}]
    for turn in range(3):
        reply = client.messages.create(model="m", max_tokens=16, messages=history)
        history += [{"role": "assistant", "content": reply.content[0].text},
                    {"role": "user", "content": f"more {turn}"}]
    assert model.seen == [1, 3, 5]
    assert [e.status for e in api.exchanges] == [200, 200, 200]
    assert api.exchanges[0].request["messages"][0]["content"] == "Hi"
