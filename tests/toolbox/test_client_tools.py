"""Anthropic-defined client tools (bash, the text editor, the memory tool) in a toolbox:
sent by type, with the schema the model follows and a kind per command. Before, a
definition by type was refused ("input_schema must be a JSON schema of type object"), the
SDK's memory tool object was refused, and a tool had one kind for all its commands."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from pytest_agentckpt import Toolbox
from pytest_agentckpt.strategies import tool_inputs
from reference_agent.client_tools import CLIENT_TOOLS
from tests.zoo.client_tool_agents import EDITOR, Files, MemoryFiles, coding_tools

EDIT_COMMANDS = {"view": {"path"}, "create": {"path", "file_text"}, "str_replace": {"path", "old_str", "new_str"},
                 "insert": {"path", "insert_line", "insert_text"}}


def _bash(command: str | None = None, restart: bool = False) -> str:
    return "ok"


def test_a_client_tool_is_sent_by_type_with_a_kind_per_command() -> None:
    tools = coding_tools()
    assert tools.definitions() == [EDITOR, {"type": "bash_20250124", "name": "bash"}]
    editor = tools.spec("str_replace_based_edit_tool")
    kinds = {c: editor.kind_of({"command": c}) for c in EDIT_COMMANDS}
    assert kinds == {"view": "read_only", "create": "repeat_safe", "str_replace": "unkeyed", "insert": "unkeyed"}
    assert editor.kind == "unkeyed" and tools.spec("bash").kind == "unkeyed"
    assert tools.call("bash", {"command": "ls"}).content == "$ ls\nok"


def test_the_sdk_memory_tool_object_fits_as_it_is() -> None:
    tools = Toolbox.from_functions(MemoryFiles())
    assert tools.definitions() == [{"type": "memory_20250818", "name": "memory"}]
    memory = tools.spec("memory")
    assert [memory.kind_of({"command": c}) for c in ("view", "insert", "delete", "rename")] == [
        "read_only", "unkeyed", "repeat_safe", "repeat_safe"]
    assert tools.call("memory", {"command": "create", "path": "/memories/a", "file_text": "x"}).content == "created /memories/a"


def test_kinds_override_some_commands_or_all() -> None:
    files = Files()
    some = Toolbox.from_functions({"str_replace_based_edit_tool": (files.edit, EDITOR)},
                                  kinds={"str_replace_based_edit_tool": {"create": "unkeyed"}})
    assert some.spec("str_replace_based_edit_tool").kind_of({"command": "create"}) == "unkeyed"
    assert some.spec("str_replace_based_edit_tool").kind_of({"command": "view"}) == "read_only"
    one = Toolbox.from_functions({"str_replace_based_edit_tool": (files.edit, EDITOR)},
                                 kinds={"str_replace_based_edit_tool": "repeat_safe"})
    assert one.spec("str_replace_based_edit_tool").kind_of({"command": "insert"}) == "repeat_safe"
    with pytest.raises(ValueError, match="no command \\['undo_edit'\\]"):
        Toolbox.from_functions({"str_replace_based_edit_tool": (files.edit, EDITOR)},
                               kinds={"str_replace_based_edit_tool": {"undo_edit": "unkeyed"}})


@pytest.mark.parametrize(
    ("definition", "message"),
    [({"type": "bash_20250124", "name": "shell"}, "the API names a bash_20250124 tool 'bash'"),
     ({"type": "bash_29990101", "name": "bash"}, "type 'bash_29990101' is no Anthropic-defined client tool")],
)
def test_a_wrong_client_tool_definition_is_refused_with_the_reason(definition: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Toolbox.from_functions({str(definition["name"]): (_bash, definition)})


@settings(max_examples=60, deadline=None)
@given(tool_inputs(Toolbox.from_functions({"str_replace_based_edit_tool": (Files().edit, EDITOR)}),
                   "str_replace_based_edit_tool"))
def test_plans_draw_valid_editor_commands_from_the_known_schema(drawn: dict[str, Any]) -> None:
    required = EDIT_COMMANDS[drawn["command"]]
    assert required <= set(drawn) <= required | {"command", "view_range"}, drawn


def test_every_known_type_has_a_schema_of_type_object() -> None:
    for known in CLIENT_TOOLS.values():
        assert known.input_schema["type"] == "object" and known.input_schema["anyOf"]


def test_the_oracles_flags_of_a_client_tool_are_per_command() -> None:
    # A lost compare-and-set followed by a ``view`` is no call that changes the world.
    from pytest_agentckpt._scenario import _tool_flags
    from pytest_agentckpt._takeover import _changes

    flags = _tool_flags(coding_tools())["str_replace_based_edit_tool"]
    assert flags.for_input({"command": "view", "path": "a"}).kind == "read-only"
    assert flags.for_input({"command": "create", "path": "a", "file_text": ""}).can_duplicate is False
    assert flags.for_input({"command": "insert"}).kind == "unkeyed"
    assert not _changes(flags, {"command": "view", "path": "a"})
    assert _changes(flags, {"command": "str_replace", "path": "a", "old_str": "a", "new_str": "b"})
