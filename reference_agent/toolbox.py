"""The toolbox: the tools an agent may call, with the flags that resume depends on.

This is the fixed contract between an agent and its tools (and the harness, which wraps
each tool to inject faults and record effects):

- ``definitions()``: the ``tools`` list for ``messages.create``;
- ``spec(name)``: a :class:`ToolSpec` with ``irreversible`` and ``idempotent`` flags;
- ``call(name, input, *, idempotency_key=None)``: run the tool, get a :class:`ToolResult`.

>>> def add(a: int, b: int) -> str:
...     return str(a + b)
>>> box = Toolbox([ToolSpec.from_function(add, description="Add two integers.")])
>>> box.call("add", {"a": 2, "b": 3}).content
'5'
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter, ValidationError

__all__ = [
    "ToolCallable",
    "ToolResult",
    "ToolSpec",
    "Toolbox",
    "UnknownToolError",
    "tool",
]

_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")

#: What a tool's function receives: the model's input as keyword arguments, plus
#: ``idempotency_key=`` for tools that honour keys.
ToolCallable = Callable[..., Any]


class UnknownToolError(KeyError):
    """The model named a tool the toolbox does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown tool"


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a tool call, ready to become a ``tool_result`` block."""

    content: str | list[dict[str, Any]]
    is_error: bool = False

    def to_block(self, tool_use_id: str) -> dict[str, Any]:
        """The ``tool_result`` content block answering ``tool_use_id``."""
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": self.content,
        }
        if self.is_error:
            block["is_error"] = True
        return block


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its API definition, its function, and its resume semantics.

    ``irreversible``: the tool changes the world in a way a second call would repeat
    (a send, a write, a create). ``idempotent``: the tool honours idempotency keys, so a
    repeated call with the same key has no second effect; the toolbox then passes
    ``idempotency_key=`` to the function.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    function: ToolCallable = field(repr=False, compare=False)
    irreversible: bool = False
    idempotent: bool = False

    def __post_init__(self) -> None:
        if not _TOOL_NAME.fullmatch(self.name):
            raise ValueError(f"tool name {self.name!r} must match ^[a-zA-Z0-9_-]+$")
        if self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must be a JSON schema of type object")

    @classmethod
    def from_function(
        cls,
        function: ToolCallable,
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        irreversible: bool = False,
        idempotent: bool = False,
    ) -> ToolSpec:
        """A spec for ``function``, with its schema derived from the signature.

        The description defaults to the docstring; a parameter named
        ``idempotency_key`` is not part of the schema.
        """
        return cls(
            name=name or function.__name__,
            description=description or inspect.getdoc(function) or function.__name__,
            input_schema=input_schema or schema_from_signature(function),
            function=function,
            irreversible=irreversible,
            idempotent=idempotent,
        )

    def definition(self) -> dict[str, Any]:
        """The entry of the ``tools`` list for ``messages.create``."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def schema_from_signature(function: ToolCallable) -> dict[str, Any]:
    """A JSON schema (type object) for ``function``'s keyword parameters."""
    signature = inspect.signature(function)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in signature.parameters.values():
        if param.name == "idempotency_key" or param.kind in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            continue
        annotation = param.annotation if param.annotation is not param.empty else Any
        if isinstance(annotation, str):
            annotation = eval(annotation, function.__globals__)  # the function's own annotations
        prop = TypeAdapter(annotation).json_schema()
        if param.default is param.empty:
            required.append(param.name)
        else:
            # A default that is not JSON data is simply not advertised.
            with contextlib.suppress(Exception):
                prop["default"] = TypeAdapter(Any).dump_python(param.default, mode="json")
        properties[param.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def tool(
    *,
    irreversible: bool = False,
    idempotent: bool = False,
    name: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
) -> Callable[[ToolCallable], ToolSpec]:
    """Decorator form of :meth:`ToolSpec.from_function`.

    >>> @tool(irreversible=True, idempotent=True)
    ... def send_email(to: str, body: str, idempotency_key: str | None = None) -> str:
    ...     "Send an e-mail."
    ...     return "sent"
    >>> send_email.irreversible, send_email.input_schema["required"]
    (True, ['to', 'body'])
    """

    def wrap(function: ToolCallable) -> ToolSpec:
        return ToolSpec.from_function(
            function,
            name=name,
            description=description,
            input_schema=input_schema,
            irreversible=irreversible,
            idempotent=idempotent,
        )

    return wrap


def _to_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return ToolResult(value)
    return ToolResult(TypeAdapter(Any).dump_json(value).decode())


class Toolbox:
    """A set of tools, the fixed interface agents and the harness share.

    A tool that raises an ``Exception`` yields an error result (the model sees the
    message); a ``BaseException`` that is not an ``Exception`` (a crash injected by the
    harness, ``KeyboardInterrupt``) propagates.
    """

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"two tools are named {spec.name!r}")
            self._specs[spec.name] = spec

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def names(self) -> list[str]:
        """Tool names, in definition order."""
        return list(self._specs)

    def definitions(self) -> list[dict[str, Any]]:
        """The ``tools`` list for ``messages.create``."""
        return [spec.definition() for spec in self._specs.values()]

    def spec(self, name: str) -> ToolSpec:
        """The spec of tool ``name``; :class:`UnknownToolError` if there is none."""
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownToolError(
                f"no tool named {name!r}; this toolbox has {sorted(self._specs)}"
            ) from None

    def call(
        self, name: str, input: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> ToolResult:
        """Run tool ``name`` with the model's ``input``.

        The key is passed to tools declared ``idempotent`` and ignored for the others.
        """
        try:
            spec = self.spec(name)
        except UnknownToolError as exc:
            return ToolResult(str(exc), is_error=True)
        kwargs = dict(input)
        if spec.idempotent:
            kwargs["idempotency_key"] = idempotency_key
        try:
            return _to_result(spec.function(**kwargs))
        except (TypeError, ValidationError) as exc:
            return ToolResult(f"invalid input for {name}: {exc}", is_error=True)
        except Exception as exc:
            return ToolResult(f"{type(exc).__name__}: {exc}", is_error=True)

    def replace_functions(self, wrap: Callable[[ToolSpec], ToolCallable]) -> Toolbox:
        """A toolbox whose every function is ``wrap(spec)``: how the harness instruments
        tools without the agent's knowledge."""
        return Toolbox(replace(spec, function=wrap(spec)) for spec in self._specs.values())
