"""The toolbox contract that agents, the reference agent and the harness share."""

from __future__ import annotations

import pytest

from reference_agent.toolbox import Toolbox, ToolResult, ToolSpec, tool


@tool(irreversible=True, idempotent=True)
def send_email(to: str, body: str, idempotency_key: str | None = None) -> str:
    """Send an e-mail."""
    return f"sent to {to} with key {idempotency_key}"


@tool()
def lookup(query: str, limit: int = 3) -> list[dict[str, str]]:
    """Search."""
    return [{"type": "text", "text": f"{query}:{limit}"}]


@tool()
def explode() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


class Crash(BaseException):
    pass


@tool()
def crash() -> str:
    """Simulates a process crash."""
    raise Crash


BOX = Toolbox([send_email, lookup, explode, crash])


def test_definitions_are_what_messages_create_takes() -> None:
    # As the SDK's beta_tool builds them (without pydantic's titles, without the key).
    definition = BOX.definitions()[0]
    assert definition == {
        "name": "send_email",
        "description": "Send an e-mail.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "body"],
        },
    }


def test_optional_parameters_are_not_required() -> None:
    schema = BOX.spec("lookup").input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"] == {"type": "integer", "default": 3}


def test_spec_carries_resume_flags() -> None:
    assert (BOX.spec("send_email").irreversible, BOX.spec("send_email").idempotent) == (True, True)
    assert (BOX.spec("lookup").irreversible, BOX.spec("lookup").idempotent) == (False, False)


def test_idempotency_key_reaches_only_tools_that_honour_keys() -> None:
    result = BOX.call("send_email", {"to": "a@b", "body": "x"}, idempotency_key="k1")
    assert result == ToolResult("sent to a@b with key k1")
    assert BOX.call("lookup", {"query": "q"}, idempotency_key="ignored").content == [
        {"type": "text", "text": "q:3"}
    ]


def test_tool_exception_becomes_an_error_result() -> None:
    assert BOX.call("explode", {}) == ToolResult("RuntimeError: disk on fire", is_error=True)


def test_invalid_input_becomes_an_error_result_naming_the_tool() -> None:
    result = BOX.call("lookup", {"nope": 1})
    assert result.is_error and "invalid input for lookup" in str(result.content)


def test_unknown_tool_is_an_error_result_listing_the_tools() -> None:
    result = BOX.call("nothing", {})
    assert result.is_error and "no tool named 'nothing'" in str(result.content)


def test_crash_is_not_swallowed() -> None:
    with pytest.raises(Crash):
        BOX.call("crash", {})


def test_result_block_marks_errors_only_when_they_are_errors() -> None:
    assert ToolResult("ok").to_block("toolu_1") == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "ok",
    }
    assert ToolResult("bad", is_error=True).to_block("toolu_1")["is_error"] is True


def test_replace_functions_instruments_every_tool() -> None:
    calls: list[str] = []

    def wrap(spec: ToolSpec):  # type: ignore[no-untyped-def]
        def wrapped(**kwargs: object) -> object:
            calls.append(spec.name)
            return spec.function(**kwargs)

        return wrapped

    wrapped = BOX.replace_functions(wrap)
    wrapped.call("lookup", {"query": "q"})
    assert calls == ["lookup"] and wrapped.spec("lookup").irreversible is False


@pytest.mark.parametrize("name", ["has space", "", "ünï"])
def test_bad_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        ToolSpec(name=name, description="d", input_schema={"type": "object"}, function=print)


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools are named 'lookup'"):
        Toolbox([lookup, lookup])
