"""A toolbox in one call: definitions from type hints and docstrings, as the SDK builds them."""

from __future__ import annotations

import functools
from typing import Literal

import anthropic
import pydantic
import pytest

from reference_agent.toolbox import (
    Toolbox,
    ToolDefinitionError,
    ToolResult,
    ToolSpec,
    tool,
)


def search(query: str, limit: int = 3, mode: Literal["fast", "full"] = "fast") -> str:
    """Search the notes.

    Returns the titles of matching notes.

    Args:
        query: words to look for
        limit: how many notes at most
    """
    return f"{query}:{limit}:{mode}"


def send_email(to: str, body: str, idempotency_key: str | None = None) -> str:
    """Send an e-mail."""
    return f"sent to {to} ({idempotency_key})"


class Address(pydantic.BaseModel):
    city: str
    title: str  # a property named like the schema keyword: kept


def ship(address: Address, note: str | None = None) -> str:
    """Ship a parcel."""
    return address.city


def _without_titles(node: object) -> object:
    if isinstance(node, dict):
        return {k: _without_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    return node


def test_a_plain_function_gets_the_definition_the_sdks_beta_tool_gives_it_without_titles() -> None:
    ours = Toolbox.from_functions(search).definitions()[0]
    sdk = anthropic.beta_tool(search).to_dict()
    assert ours["name"] == sdk["name"] == "search"
    assert ours["description"] == sdk["description"] == "Search the notes.\n\nReturns the titles of matching notes."
    assert ours["input_schema"] == _without_titles(sdk["input_schema"])
    props = ours["input_schema"]["properties"]
    assert props["query"] == {"type": "string", "description": "words to look for"}
    assert props["limit"] == {"type": "integer", "default": 3, "description": "how many notes at most"}
    assert props["mode"] == {"enum": ["fast", "full"], "type": "string", "default": "fast"}
    assert ours["input_schema"]["required"] == ["query"]
    assert ours["input_schema"]["additionalProperties"] is False


def test_the_idempotency_key_parameter_is_the_toolboxs_not_the_models() -> None:
    schema = Toolbox.from_functions(send_email, kinds={"send_email": "keyed"}).spec("send_email").input_schema
    assert set(schema["properties"]) == {"to", "body"} and schema["required"] == ["to", "body"]


def test_models_among_the_parameters_land_in_defs_and_a_property_named_title_survives() -> None:
    schema = Toolbox.from_functions(ship).spec("ship").input_schema
    assert schema["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert set(schema["$defs"]["Address"]["properties"]) == {"city", "title"}
    assert "title" not in schema["$defs"]["Address"]  # the keyword, dropped


def test_a_function_without_docstring_is_described_by_its_name() -> None:
    def ping(host: str) -> str:
        return host

    assert Toolbox.from_functions(ping).spec("ping").description == "ping"


def test_a_partial_is_read_from_its_signature() -> None:
    box = Toolbox.from_functions({"search_full": functools.partial(search, mode="full")})
    schema = box.spec("search_full").input_schema
    assert schema["required"] == ["query"]
    assert box.call("search_full", {"query": "q"}).content == "q:3:full"


def test_positional_only_parameters_are_refused_with_what_to_do() -> None:
    def f(a: int, /) -> str:
        return str(a)

    with pytest.raises(ToolDefinitionError, match=r"positional-only.*keyword parameters"):
        Toolbox.from_functions(f)


def test_a_dict_maps_names_to_function_and_schema() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}

    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    box = Toolbox.from_functions({"read_file": (read, schema)})
    assert box.definitions() == [{"name": "read_file", "description": "Read a file.", "input_schema": schema}]
    assert box.call("read_file", {"path": "a.txt"}) == ToolResult("contents of a.txt")


def test_a_dict_entry_that_is_not_function_and_schema_is_refused() -> None:
    with pytest.raises(TypeError, match=r"tool 'read': expected \(function, input_schema\)"):
        Toolbox.from_functions({"read": (print,)})


def test_functions_specs_and_dicts_mix_in_one_call_in_order() -> None:
    @tool(kind="keyed")
    def pay(amount: int, idempotency_key: str | None = None) -> str:
        """Pay."""
        return "paid"

    box = Toolbox.from_functions(search, pay, {"mail": send_email})
    assert box.names() == ["search", "pay", "mail"]
    assert isinstance(box, Toolbox) and box.spec("pay").kind == "keyed"


def test_a_list_passed_as_one_argument_is_refused_with_the_right_call() -> None:
    with pytest.raises(TypeError, match=r"Toolbox.from_functions\(\*my_tools\)"):
        Toolbox.from_functions([search, send_email])


def test_something_that_is_no_tool_is_refused_naming_the_argument() -> None:
    with pytest.raises(TypeError, match=r"Toolbox\.from_functions: argument 1: expected a function"):
        Toolbox.from_functions(search, 42)


@pytest.mark.parametrize("argument", ["kinds", "inputs"])
def test_kinds_or_inputs_that_are_not_a_dict_are_refused_naming_the_argument(argument: str) -> None:
    def lookup(query: str) -> str:
        """Look up."""
        return query

    with pytest.raises(TypeError, match=f"{argument} must be a dict"):
        Toolbox.from_functions(lookup, **{argument: ["lookup"]})


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools are named 'search'"):
        Toolbox.from_functions(search, {"search": send_email})


def test_a_toolspec_is_still_built_directly_and_validated() -> None:
    with pytest.raises(ValueError, match="input_schema must be a JSON schema of type object"):
        ToolSpec("x", "d", {"type": "array"}, print)
