"""Anthropic-defined client tools: declared in a request by ``type`` and ``name`` only (the
model knows their input schema), run by the agent itself.

For each type this module knows the name the API requires, the input schema the model
follows (one object per command, so plans draw valid commands), and the kind of each
command, which resume depends on:

- ``bash``: one kind, ``unkeyed`` (a command may do anything; nothing tells a repeat);
- the text editor and the memory tool: ``view`` is ``read_only``; ``create`` overwrites
  the file (``repeat_safe``); ``str_replace`` and ``insert`` change the file again when
  applied twice (``unkeyed``); the memory tool's ``delete`` and ``rename`` find nothing
  to do the second time (``repeat_safe``).

>>> CLIENT_TOOLS["bash_20250124"].name
'bash'
>>> CLIENT_TOOLS["text_editor_20250728"].command_kinds["str_replace"]
'unkeyed'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLIENT_TOOLS", "ClientToolType", "client_tool_error"]


def _command(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"command": {"type": "string", "const": name}, **properties},
        "required": ["command", *required],
        "additionalProperties": False,
    }


_PATH = {"type": "string"}
_RANGE = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}


def _editor(commands: tuple[str, ...]) -> dict[str, Any]:
    shapes = {
        "view": _command("view", {"path": _PATH, "view_range": _RANGE}, ["path"]),
        "create": _command("create", {"path": _PATH, "file_text": {"type": "string"}}, ["path", "file_text"]),
        "str_replace": _command(
            "str_replace", {"path": _PATH, "old_str": {"type": "string"}, "new_str": {"type": "string"}},
            ["path", "old_str", "new_str"],
        ),
        "insert": _command(
            "insert", {"path": _PATH, "insert_line": {"type": "integer", "minimum": 0}, "insert_text": {"type": "string"}},
            ["path", "insert_line", "insert_text"],
        ),
        "delete": _command("delete", {"path": _PATH}, ["path"]),
        "rename": _command("rename", {"old_path": _PATH, "new_path": _PATH}, ["old_path", "new_path"]),
    }
    return {"type": "object", "anyOf": [shapes[c] for c in commands]}


_BASH = {
    "type": "object",
    "anyOf": [
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"], "additionalProperties": False},
        {"type": "object", "properties": {"restart": {"const": True}}, "required": ["restart"], "additionalProperties": False},
    ],
}


@dataclass(frozen=True)
class ClientToolType:
    """One Anthropic-defined client tool type: the name the API requires, the schema the
    model follows, and the kind of each command (``command_kinds``, keyed by the input's
    ``command``; ``kind`` for a tool without commands)."""

    type: str
    name: str
    description: str
    input_schema: dict[str, Any] = field(repr=False)
    kind: str = "unkeyed"
    command_kinds: Mapping[str, str] = field(default_factory=dict)


_EDITOR_KINDS = {"view": "read_only", "create": "repeat_safe", "str_replace": "unkeyed", "insert": "unkeyed"}
_MEMORY_KINDS = {**_EDITOR_KINDS, "delete": "repeat_safe", "rename": "repeat_safe"}

#: The client tool types this harness knows, by ``type``.
CLIENT_TOOLS: dict[str, ClientToolType] = {
    t.type: t
    for t in (
        ClientToolType("bash_20250124", "bash", "Run a command in a persistent bash session.", _BASH),
        ClientToolType("bash_20241022", "bash", "Run a command in a persistent bash session.", _BASH),
        ClientToolType(
            "text_editor_20250728", "str_replace_based_edit_tool", "View, create and edit text files.",
            _editor(("view", "create", "str_replace", "insert")), command_kinds=_EDITOR_KINDS,
        ),
        ClientToolType(
            "memory_20250818", "memory", "Read and write files in the /memories directory.",
            _editor(("view", "create", "str_replace", "insert", "delete", "rename")), command_kinds=_MEMORY_KINDS,
        ),
    )
}


#: What the API takes as a custom tool's name (letters, digits, '_' and '-'; this allows
#: the longest names any model takes, so it never refuses a name the API would accept).
_CUSTOM_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


def client_tool_error(index: int, tool: Any) -> str | None:
    """The API's complaint about the ``index``-th entry of a request's ``tools``, when it
    is a custom tool without an ``input_schema`` or a known client tool type under another
    name; ``None`` otherwise (types this module does not know are let through: the API
    adds versions).

    >>> client_tool_error(0, {"type": "bash_20250124", "name": "shell"})
    "tools.0.bash_20250124.name: Input should be 'bash'"
    >>> client_tool_error(1, {"name": "search"})
    'tools.1.custom.input_schema: Field required'
    """
    if not isinstance(tool, Mapping):
        return None
    kind = tool.get("type")
    if kind is None or kind == "custom":
        name = tool.get("name")
        if not isinstance(name, str) or _CUSTOM_NAME.fullmatch(name) is None:
            return f"tools.{index}.custom.name: String should match pattern '{_CUSTOM_NAME.pattern}'"
        if "input_schema" not in tool:
            return f"tools.{index}.custom.input_schema: Field required"
        schema = tool["input_schema"]
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            return f"tools.{index}.custom.input_schema.type: Input should be 'object'"
        return None
    known = CLIENT_TOOLS.get(str(kind))
    if known is not None and tool.get("name") != known.name:
        return f"tools.{index}.{kind}.name: Input should be '{known.name}'"
    return None
