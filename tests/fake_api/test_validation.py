"""validate_messages: each rule of the Messages API, accepted and rejected."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import (
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

from reference_agent.validation import InvalidHistoryError, validate_messages


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(id_: str, name: str = "t", input_: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": {} if input_ is None else input_}


def result(id_: str, content: Any = "ok", *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": id_, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def thinking(sig: str | None = "sig") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "thinking", "thinking": "hmm"}
    if sig is not None:
        block["signature"] = sig
    return block


def rejected(messages: list[Any], **kwargs: Any) -> InvalidHistoryError:
    with pytest.raises(InvalidHistoryError) as info:
        validate_messages(messages, **kwargs)
    return info.value


# -- roles and merging -------------------------------------------------------------


def test_a_single_user_string_message_is_valid() -> None:
    validate_messages([{"role": "user", "content": "Hello"}])


def test_an_empty_history_is_rejected() -> None:
    assert rejected([]).path == "messages"


def test_the_first_message_must_come_from_the_user() -> None:
    err = rejected([assistant(text("hi")), user(text("x"))])
    assert str(err) == 'messages.0: first message must use the "user" role'


def test_an_unknown_role_is_rejected_with_its_path() -> None:
    err = rejected([user(text("a")), {"role": "system", "content": "x"}])
    assert str(err) == "messages.1.role: Input should be 'user' or 'assistant'"


def test_consecutive_user_messages_are_merged_like_the_api() -> None:
    validate_messages([user(text("a")), user(text("b")), assistant(text("c")), user(text("d"))])


def test_results_split_over_consecutive_user_messages_answer_the_calls() -> None:
    validate_messages(
        [
            user(text("go")),
            assistant(use("toolu_1"), use("toolu_2")),
            user(result("toolu_1")),
            user(result("toolu_2"), text("next")),
        ]
    )


def test_consecutive_assistant_messages_are_one_turn_for_pairing() -> None:
    validate_messages(
        [
            user(text("go")),
            assistant(text("thinking aloud")),
            assistant(use("toolu_1")),
            user(result("toolu_1")),
        ]
    )


def test_error_paths_name_the_original_message_index_after_merging() -> None:
    err = rejected(
        [user(text("go")), assistant(use("toolu_1")), user(result("toolu_1")), user(text(" "))]
    )
    assert err.path == "messages.3.content.0"


# -- tool_use / tool_result pairing ------------------------------------------------


def test_parallel_calls_answered_first_in_the_next_turn_are_valid() -> None:
    validate_messages(
        [
            user(text("go")),
            assistant(text("calling"), use("toolu_a"), use("toolu_b")),
            user(result("toolu_b"), result("toolu_a", is_error=True), text("and then?")),
        ]
    )


def test_an_unanswered_tool_use_is_rejected_with_the_api_wording() -> None:
    err = rejected(
        [user(text("go")), assistant(use("toolu_a"), use("toolu_b")), user(result("toolu_a"))]
    )
    assert str(err) == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
        "after: toolu_b. Each `tool_use` block must have a corresponding `tool_result` "
        "block in the next message."
    )


def test_a_history_ending_in_a_tool_use_is_rejected_as_unanswered() -> None:
    err = rejected([user(text("go")), assistant(use("toolu_a"))])
    assert "`tool_use` ids were found without `tool_result` blocks" in str(err)
    assert "toolu_a" in str(err)


def test_results_must_come_first_in_the_user_turn() -> None:
    err = rejected(
        [user(text("go")), assistant(use("toolu_a")), user(text("hi"), result("toolu_a"))]
    )
    assert err.path == "messages.2.content.1"
    assert "`tool_result` blocks must come first" in str(err)


def test_a_result_for_an_unknown_id_is_rejected_with_the_api_wording() -> None:
    err = rejected(
        [user(text("go")), assistant(use("toolu_a")), user(result("toolu_a"), result("toolu_x"))]
    )
    assert str(err) == (
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: "
        "toolu_x. Each `tool_result` block must have a corresponding `tool_use` block in "
        "the previous message."
    )


def test_a_result_for_a_call_two_turns_back_is_unexpected() -> None:
    err = rejected(
        [
            user(text("go")),
            assistant(use("toolu_a")),
            user(result("toolu_a")),
            assistant(text("done")),
            user(result("toolu_a")),
        ]
    )
    assert err.path == "messages.4.content.0"
    assert "unexpected `tool_use_id`" in str(err)


def test_a_result_in_the_first_message_is_unexpected() -> None:
    assert "unexpected `tool_use_id`" in str(rejected([user(result("toolu_a"))]))


def test_a_duplicate_result_is_rejected() -> None:
    err = rejected(
        [user(text("go")), assistant(use("toolu_a")), user(result("toolu_a"), result("toolu_a"))]
    )
    assert str(err) == (
        "messages.2.content.1: each tool_use must have a single result. Found multiple "
        "`tool_result` blocks with id: toolu_a"
    )


# -- ids -----------------------------------------------------------------------------


def test_tool_use_ids_must_be_unique_in_the_conversation() -> None:
    err = rejected(
        [
            user(text("go")),
            assistant(use("toolu_a")),
            user(result("toolu_a")),
            assistant(use("toolu_a")),
            user(result("toolu_a")),
        ]
    )
    assert str(err) == "messages.3.content.0: `tool_use` ids must be unique"


@pytest.mark.parametrize("bad_id", ["toolu 1", "toolu.1", "", "tööl"])
def test_tool_use_ids_must_match_the_api_pattern(bad_id: str) -> None:
    err = rejected([user(text("go")), assistant(use(bad_id)), user(result(bad_id))])
    assert str(err) == "messages.1.content.0.id: String should match pattern '^[a-zA-Z0-9_-]+$'"


def test_tool_use_input_must_be_an_object() -> None:
    err = rejected(
        [user(text("go")), assistant(use("toolu_a", input_=[1])), user(result("toolu_a"))]
    )
    assert err.path == "messages.1.content.0.input"


# -- empty content -------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", []])
def test_an_empty_user_message_is_rejected(content: Any) -> None:
    err = rejected([{"role": "user", "content": content}])
    assert str(err) == (
        "messages.0: all messages must have non-empty content except for the optional "
        "final assistant message"
    )


def test_an_empty_text_block_is_rejected() -> None:
    err = rejected([user(text(""))])
    assert str(err) == "messages.0.content.0: text content blocks must be non-empty"


def test_a_whitespace_text_block_is_rejected() -> None:
    err = rejected([user(text("ok")), assistant(text(" \n")), user(text("x"))])
    assert str(err) == "messages.1.content.0: text content blocks must contain non-whitespace text"


def test_an_empty_text_inside_a_tool_result_is_rejected() -> None:
    err = rejected(
        [user(text("go")), assistant(use("toolu_a")), user(result("toolu_a", [text("")]))]
    )
    assert err.path == "messages.2.content.0.content.0"


def test_an_empty_tool_result_content_is_allowed() -> None:
    validate_messages([user(text("go")), assistant(use("toolu_a")), user(result("toolu_a", []))])


# -- final turn and prefill ----------------------------------------------------------


def test_a_final_assistant_message_is_rejected_by_default() -> None:
    err = rejected([user(text("go")), assistant(text("The answer is"))])
    assert str(err) == (
        "messages.1: This model does not support assistant message prefill. "
        "The conversation must end with a user message."
    )


def test_a_prefill_is_accepted_when_allowed() -> None:
    validate_messages([user(text("go")), assistant(text("The answer is"))], allow_prefill=True)


def test_an_empty_final_assistant_prefill_is_accepted_when_allowed() -> None:
    validate_messages([user(text("go")), {"role": "assistant", "content": []}], allow_prefill=True)


def test_a_prefill_never_contains_tool_use() -> None:
    err = rejected([user(text("go")), assistant(use("toolu_a"))], allow_prefill=True)
    assert "`tool_use` ids were found without `tool_result` blocks" in str(err)


def test_a_prefill_cannot_end_with_whitespace() -> None:
    err = rejected([user(text("go")), assistant(text("The answer is "))], allow_prefill=True)
    assert (
        str(err)
        == "messages.1.content.0: final assistant content cannot end with trailing whitespace"
    )


# -- thinking ------------------------------------------------------------------------


def test_thinking_blocks_with_signatures_are_carried_back() -> None:
    validate_messages(
        [user(text("go")), assistant(thinking(), use("toolu_a")), user(result("toolu_a"))],
        thinking=True,
    )


def test_a_thinking_block_without_signature_is_rejected() -> None:
    err = rejected([user(text("go")), assistant(thinking(None), text("x")), user(text("y"))])
    assert str(err) == "messages.1.content.0.thinking.signature: Field required"


def test_a_redacted_thinking_block_needs_its_data() -> None:
    err = rejected(
        [user(text("go")), assistant({"type": "redacted_thinking"}, text("x")), user(text("y"))]
    )
    assert err.path == "messages.1.content.0.redacted_thinking.data"


def test_an_assistant_turn_cannot_end_with_thinking() -> None:
    err = rejected([user(text("go")), assistant(text("x"), thinking()), user(text("y"))])
    assert (
        str(err)
        == "messages.1.content.1: The final block in an assistant message cannot be `thinking`."
    )


def test_with_thinking_enabled_the_last_tool_loop_turn_must_start_with_thinking() -> None:
    err = rejected(
        [user(text("go")), assistant(text("calling"), use("toolu_a")), user(result("toolu_a"))],
        thinking=True,
    )
    assert err.path == "messages.1.content.0.type"
    assert str(err).startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`."
    )


def test_with_thinking_enabled_a_plain_user_turn_needs_no_thinking() -> None:
    validate_messages([user(text("go")), assistant(text("hi")), user(text("bye"))], thinking=True)


def test_without_thinking_enabled_a_tool_loop_needs_no_thinking() -> None:
    validate_messages([user(text("go")), assistant(use("toolu_a")), user(result("toolu_a"))])


# -- server tools --------------------------------------------------------------------


def server_use(id_: str) -> dict[str, Any]:
    return {"type": "server_tool_use", "id": id_, "name": "web_search", "input": {"query": "q"}}


def server_result(id_: str) -> dict[str, Any]:
    return {"type": "web_search_tool_result", "tool_use_id": id_, "content": []}


def test_a_server_tool_use_paired_in_the_same_turn_is_valid() -> None:
    validate_messages(
        [
            user(text("go")),
            assistant(server_use("srvtoolu_1"), server_result("srvtoolu_1"), text("found")),
            user(text("ok")),
        ]
    )


def test_a_server_tool_use_without_its_result_is_rejected() -> None:
    err = rejected(
        [user(text("go")), assistant(server_use("srvtoolu_1"), text("x")), user(text("ok"))]
    )
    assert err.path == "messages.1.content.0"
    assert "srvtoolu_1" in str(err)


def test_a_server_tool_result_before_its_use_is_rejected() -> None:
    err = rejected(
        [
            user(text("go")),
            assistant(server_result("srvtoolu_1"), server_use("srvtoolu_1")),
            user(text("ok")),
        ]
    )
    assert err.path == "messages.1.content.0"


def test_a_server_tool_result_in_a_user_turn_is_rejected() -> None:
    err = rejected([user(text("go"), server_result("srvtoolu_1"))])
    assert err.path == "messages.0.content.1.type"


def test_a_tool_use_in_a_user_turn_is_rejected() -> None:
    assert rejected([user(use("toolu_a"))]).path == "messages.0.content.0.type"


def test_a_tool_result_in_an_assistant_turn_is_rejected() -> None:
    assert rejected([user(text("go")), assistant(result("toolu_a")), user(text("x"))]).path == (
        "messages.1.content.0.type"
    )


# -- SDK objects ---------------------------------------------------------------------


def test_sdk_model_objects_are_accepted_as_content() -> None:
    validate_messages(
        [
            user(text("go")),
            {
                "role": "assistant",
                "content": [
                    ThinkingBlock(type="thinking", thinking="hmm", signature="s"),
                    RedactedThinkingBlock(type="redacted_thinking", data="d"),
                    TextBlock(type="text", text="calling"),
                    ToolUseBlock(type="tool_use", id="toolu_a", name="t", input={"x": 1}),
                ],
            },
            user(result("toolu_a")),
        ],
        thinking=True,
    )


def test_sdk_model_objects_are_checked_like_dicts() -> None:
    err = rejected(
        [
            user(text("go")),
            {
                "role": "assistant",
                "content": [ToolUseBlock(type="tool_use", id="toolu_a", name="t", input={})],
            },
        ]
    )
    assert "toolu_a" in str(err)


def test_the_error_is_a_value_error_with_path_and_detail() -> None:
    err = rejected([user(text(""))])
    assert isinstance(err, ValueError)
    assert (err.path, err.detail) == (
        "messages.0.content.0",
        "text content blocks must be non-empty",
    )


def test_an_empty_prefill_after_a_thinking_free_turn_is_judged_on_its_own() -> None:
    validate_messages(
        [
            user(text("go")),
            assistant(text("a")),
            user(text("b")),
            {"role": "assistant", "content": ""},
        ],
        allow_prefill=True,
    )


def test_a_merged_assistant_turn_ending_with_thinking_is_rejected() -> None:
    err = rejected([user(text("go")), assistant(text("x")), assistant(thinking()), user(text("y"))])
    assert err.path == "messages.2.content.0"
