"""The toolbox: the tools an agent may call, with the kinds that resume depends on.

This is the fixed contract between an agent and its tools (and the harness, which wraps
each tool to inject faults and record effects):

- ``definitions()``: the ``tools`` list for ``messages.create``;
- ``spec(name)``: a :class:`ToolSpec` with ``irreversible``, ``idempotent`` and
  ``repeat_safe`` flags, and the ``kind`` they make;
- ``call(name, input, *, idempotency_key=None)``: run the tool, get a :class:`ToolResult`
  (an awaitable of one for an ``async def`` tool).

One call builds a toolbox from plain functions, the SDK's ``beta_tool`` tools, or
``{name: (function, input_schema)}``:

>>> def add(a: int, b: int) -> str:
...     "Add two integers."
...     return str(a + b)
>>> box = Toolbox.from_functions(add)
>>> box.call("add", {"a": 2, "b": 3}).content
'5'

Tool kinds, one word each (:data:`TOOL_KINDS`):

- ``read_only``: changes nothing; re-run freely (a search, a read);
- ``repeat_safe``: changes the world, but a repeat has no second effect (overwrite this
  file with this content, PUT this record);
- ``keyed``: changes the world and honours an idempotency key (the toolbox passes
  ``idempotency_key=``); a repeat with the same key has no second effect;
- ``unkeyed``: changes the world, and nothing tells a repeat from a new call (append,
  send, create-with-a-new-id).
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from .client_tools import CLIENT_TOOLS
from .tool_schema import (
    KEY_PARAMETER,
    ToolDefinitionError,
    describe_function,
    schema_from_signature,
)

__all__ = [
    "TOOL_KINDS",
    "ToolCallable",
    "ToolDefinitionError",
    "ToolKind",
    "ToolResult",
    "ToolSpec",
    "Toolbox",
    "UnknownToolError",
    "schema_from_signature",
    "tool",
]

#: What a tool's function receives: the model's input as keyword arguments, plus
#: ``idempotency_key=`` for keyed tools.
ToolCallable = Callable[..., Any]

ToolKind = Literal["read_only", "repeat_safe", "keyed", "unkeyed"]

#: Each kind and the flags it sets: ``(irreversible, idempotent, repeat_safe)``.
TOOL_KINDS: dict[str, tuple[bool, bool, bool]] = {
    "read_only": (False, False, False),
    "repeat_safe": (True, False, True),
    "keyed": (True, True, False),
    "unkeyed": (True, False, False),
}


_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")


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


def _is_async_callable(function: Any) -> bool:
    if inspect.iscoroutinefunction(function):
        return True
    inner = getattr(function, "func", None)  # functools.partial
    if inner is not None and inspect.iscoroutinefunction(inner):
        return True
    call = getattr(type(function), "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its API definition, its function, and its resume semantics.

    ``irreversible``: the tool changes the world. ``idempotent``: it honours idempotency
    keys (the toolbox then passes ``idempotency_key=`` to the function), so a repeat with
    the same key has no second effect. ``repeat_safe``: a repeat has no second effect
    even without a key (an overwrite, a PUT). ``kind`` names the combination in one word.
    ``inputs``: example inputs (a list of dicts) or a Hypothesis strategy of them, which
    plans draw from instead of the ``input_schema``. ``is_async``: the function is
    ``async def`` (detected when not given); kept when the harness wraps the function.

    >>> spec = ToolSpec("put", "Store a record.", {"type": "object"}, print, irreversible=True, repeat_safe=True)
    >>> spec.kind
    'repeat_safe'
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    function: ToolCallable = field(repr=False, compare=False)
    irreversible: bool = False
    idempotent: bool = False
    repeat_safe: bool = False
    inputs: Any = field(default=None, repr=False, compare=False)
    is_async: bool | None = field(default=None, compare=False)
    #: An Anthropic-defined client tool's ``type`` (``"bash_20250124"``): the definition
    #: sent is ``{"type": ..., "name": ...}``, the model knows the schema.
    type: str | None = None
    #: Per ``command`` of the input, its kind (a client tool's commands differ: the
    #: editor's ``view`` changes nothing, its ``str_replace`` is not repeat-safe).
    command_kinds: Mapping[str, ToolKind] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TOOL_NAME.fullmatch(self.name):
            raise ValueError(f"tool name {self.name!r} must match ^[a-zA-Z0-9_-]+$ (1 to 128 characters)")
        if not isinstance(self.input_schema, Mapping) or self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must be a JSON schema of type object")
        if self.idempotent and self.repeat_safe:
            raise ValueError(
                f"tool {self.name!r}: declared both idempotent (keyed) and repeat_safe; a tool is "
                "one kind: 'keyed' if it takes an idempotency key, 'repeat_safe' if a repeat "
                "has no second effect without one"
            )
        if (self.idempotent or self.repeat_safe) and not self.irreversible:
            flag = "idempotent" if self.idempotent else "repeat_safe"
            raise ValueError(
                f"tool {self.name!r}: {flag}=True with irreversible=False; {flag} describes a tool "
                "that changes the world (irreversible=True); a tool that changes nothing is "
                "'read_only'"
            )
        if self.is_async is None:
            object.__setattr__(self, "is_async", _is_async_callable(self.function))
        if self.inputs is not None:
            object.__setattr__(self, "inputs", _checked_inputs(self.name, self.input_schema, self.inputs))
        if self.command_kinds is not None:
            for command, kind in self.command_kinds.items():
                if kind not in TOOL_KINDS or kind == "keyed":
                    raise ValueError(
                        f"tool {self.name!r}: command {command!r} has kind {kind!r}; a command's kind is "
                        "one of read_only, repeat_safe, unkeyed"
                    )
            object.__setattr__(self, "command_kinds", dict(self.command_kinds))

    @property
    def kind(self) -> ToolKind:
        """``read_only``, ``repeat_safe``, ``keyed`` or ``unkeyed``."""
        if not self.irreversible:
            return "read_only"
        if self.repeat_safe:
            return "repeat_safe"
        return "keyed" if self.idempotent else "unkeyed"

    @classmethod
    def from_function(
        cls,
        function: ToolCallable,
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        kind: ToolKind | None = None,
        irreversible: bool | None = None,
        idempotent: bool | None = None,
        repeat_safe: bool | None = None,
        inputs: Any = None,
    ) -> ToolSpec:
        """A spec for ``function`` (sync or ``async def``), its definition built as the SDK's
        ``beta_tool`` builds it: the description from the docstring, the schema from the
        type hints, parameter descriptions from the docstring's ``Args:``. A parameter
        named ``idempotency_key`` is not part of the schema.

        Declare the kind in one word (``kind="repeat_safe"``) or with the flags; both at
        once must agree.

        >>> async def fetch(url: str) -> str:
        ...     "Fetch a page."
        ...     return url
        >>> spec = ToolSpec.from_function(fetch)
        >>> spec.kind, spec.is_async, spec.input_schema["required"]
        ('read_only', True, ['url'])
        """
        tool_name = name or str(getattr(function, "__name__", ""))
        flags = _resolve_kind(tool_name, kind, irreversible, idempotent, repeat_safe)
        if description is None or input_schema is None:
            doc_description, derived_schema = describe_function(function)
            description = description if description is not None else (doc_description or tool_name)
            input_schema = input_schema if input_schema is not None else derived_schema
        _check_key_parameter(tool_name, function, flags[1])
        return cls(tool_name, description, input_schema, function, *flags, inputs=inputs)

    def definition(self) -> dict[str, Any]:
        """The entry of the ``tools`` list for ``messages.create``: by ``type`` for an
        Anthropic-defined client tool."""
        if self.type is not None:
            return {"type": self.type, "name": self.name}
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def kind_of(self, input: Mapping[str, Any]) -> ToolKind:
        """The kind of a call with this ``input``: its command's kind for a tool with
        ``command_kinds``, else :attr:`kind`.

        >>> box = Toolbox.from_functions({"str_replace_based_edit_tool": (print,
        ...     {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"})})
        >>> editor = box.spec("str_replace_based_edit_tool")
        >>> editor.kind_of({"command": "view", "path": "a"}), editor.kind_of({"command": "insert"})
        ('read_only', 'unkeyed')
        """
        return self.for_input(input).kind

    def for_input(self, input: Mapping[str, Any]) -> ToolSpec:
        """This spec with the flags of a call with ``input`` (see :meth:`kind_of`)."""
        if not self.command_kinds or not isinstance(input, Mapping):
            return self
        kind = self.command_kinds.get(str(input.get("command")))
        if kind is None:
            return self
        irreversible, idempotent, repeat_safe = TOOL_KINDS[kind]
        return replace(self, irreversible=irreversible, idempotent=idempotent, repeat_safe=repeat_safe, command_kinds=None)


def _resolve_kind(
    name: str,
    kind: str | None,
    irreversible: bool | None,
    idempotent: bool | None,
    repeat_safe: bool | None,
) -> tuple[bool, bool, bool]:
    """The flags of a declaration: a kind, flags, or both (which must agree)."""
    given = {"irreversible": irreversible, "idempotent": idempotent, "repeat_safe": repeat_safe}
    if kind is not None:
        if kind not in TOOL_KINDS:
            raise ValueError(f"tool {name!r}: kind {kind!r} is not one of {', '.join(TOOL_KINDS)}")
        flags = TOOL_KINDS[kind]
        for (flag, value), implied in zip(given.items(), flags, strict=True):
            if value is not None and bool(value) != implied:
                raise ValueError(
                    f"tool {name!r}: kind={kind!r} means {flag}={implied}, but {flag}={value} was "
                    "given; declare the kind or the flags, not both"
                )
        return flags
    keyed, safe = bool(idempotent), bool(repeat_safe)
    # A key or a safe repeat only makes sense for a tool that changes the world.
    changes = irreversible if irreversible is not None else (keyed or safe)
    return bool(changes), keyed, safe


def _check_key_parameter(name: str, function: ToolCallable, keyed: bool) -> None:
    if not keyed:
        return
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return
    if KEY_PARAMETER in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return
    raise ValueError(
        f"tool {name!r} is keyed (idempotent=True) but its function takes no "
        f"{KEY_PARAMETER} parameter; add `{KEY_PARAMETER}: str | None = None` and pass it to "
        "the service, or declare another kind"
    )


def _checked_inputs(name: str, schema: Mapping[str, Any], inputs: Any) -> Any:
    """Example inputs as a tuple of dicts (checked against the schema), or a strategy."""
    if isinstance(inputs, Mapping | str | bytes):
        raise TypeError(
            f"tool {name!r}: inputs must be a list of example inputs (dicts) or a Hypothesis "
            f"strategy of them, not a {type(inputs).__name__}"
        )
    strategies = sys.modules.get("hypothesis.strategies")
    if strategies is not None and isinstance(inputs, strategies.SearchStrategy):
        return inputs
    if not isinstance(inputs, Iterable):
        raise TypeError(
            f"tool {name!r}: inputs must be a list of example inputs (dicts) or a Hypothesis "
            f"strategy of them, not a {type(inputs).__name__}"
        )
    examples = tuple(inputs)
    if not examples:
        raise ValueError(f"tool {name!r}: inputs is empty; give at least one example input")
    properties = schema.get("properties") or {}
    required = list(schema.get("required") or ())
    closed = schema.get("additionalProperties") is False
    for index, example in enumerate(examples):
        where = f"tool {name!r}: inputs[{index}]"
        if not isinstance(example, Mapping):
            raise TypeError(f"{where} must be a dict of arguments, not {type(example).__name__}")
        try:
            json.dumps(example)
        except (TypeError, ValueError):
            raise ValueError(f"{where} is not JSON data (the model sends JSON): {example!r}") from None
        missing = [key for key in required if key not in example]
        if missing:
            raise ValueError(f"{where} lacks the required argument(s) {missing}: {example!r}")
        unknown = sorted(set(example) - set(properties)) if closed else []
        if unknown:
            raise ValueError(f"{where} has argument(s) {unknown} that the schema does not define")
    return tuple(dict(example) for example in examples)


def tool(
    *,
    kind: ToolKind | None = None,
    irreversible: bool | None = None,
    idempotent: bool | None = None,
    repeat_safe: bool | None = None,
    name: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    inputs: Any = None,
) -> Callable[[ToolCallable], ToolSpec]:
    """Decorator form of :meth:`ToolSpec.from_function`.

    >>> @tool(kind="keyed")
    ... def send_email(to: str, body: str, idempotency_key: str | None = None) -> str:
    ...     "Send an e-mail."
    ...     return "sent"
    >>> send_email.irreversible, send_email.idempotent, send_email.input_schema["required"]
    (True, True, ['to', 'body'])
    """

    def wrap(function: ToolCallable) -> ToolSpec:
        return ToolSpec.from_function(
            function,
            name=name,
            description=description,
            input_schema=input_schema,
            kind=kind,
            irreversible=irreversible,
            idempotent=idempotent,
            repeat_safe=repeat_safe,
            inputs=inputs,
        )

    return wrap


# -- one call ---------------------------------------------------------------------------------
def _is_sdk_tool(item: Any) -> bool:
    """A tool made by the SDK's ``beta_tool`` / ``beta_async_tool`` (duck-typed, so this
    module does not import the SDK)."""
    return all(hasattr(item, attr) for attr in ("func", "name", "input_schema", "to_dict", "call"))


def _from_sdk_tool(item: Any) -> ToolSpec:
    definition = item.to_dict()
    schema = dict(definition.get("input_schema") or {"type": "object"})
    properties = dict(schema.get("properties") or {})
    if KEY_PARAMETER in properties:
        # The key is the toolbox's to pass, not the model's to invent.
        properties.pop(KEY_PARAMETER)
        schema["properties"] = properties
        required = [r for r in schema.get("required", ()) if r != KEY_PARAMETER]
        if required:
            schema["required"] = required
        else:
            schema.pop("required", None)
    sdk_call = item.call
    function: ToolCallable
    if _is_async_callable(item.func):

        async def function(**kwargs: Any) -> Any:
            return await sdk_call(kwargs)

    else:

        def function(**kwargs: Any) -> Any:
            return sdk_call(kwargs)

    # The SDK validates the input (pydantic's validate_call); keep its signature for the
    # key check and for readers.
    function.__signature__ = inspect.signature(item.func)  # type: ignore[union-attr]
    function.__name__ = str(definition["name"])
    examples = definition.get("input_examples")
    return ToolSpec(
        str(definition["name"]),
        str(definition.get("description") or definition["name"]),
        schema,
        function,
        inputs=list(examples) if examples else None,
    )


def _client_spec(function: ToolCallable, definition: Mapping[str, Any], name: str | None = None) -> ToolSpec:
    """The spec of an Anthropic-defined client tool (``definition`` is ``{"type": ...,
    "name": ...}``), with its type's schema and command kinds."""
    kind = str(definition.get("type"))
    known = CLIENT_TOOLS.get(kind)
    if known is None:
        raise ValueError(
            f"tool {name or definition.get('name')!r}: type {kind!r} is no Anthropic-defined client tool this "
            f"toolbox knows ({', '.join(sorted(CLIENT_TOOLS))}); give a custom tool an input_schema of type object"
        )
    given = definition.get("name", known.name)
    if given != known.name or (name is not None and name != known.name):
        raise ValueError(f"tool {name or given!r}: the API names a {kind} tool {known.name!r}")
    irreversible, idempotent, repeat_safe = TOOL_KINDS[known.kind]
    return ToolSpec(
        known.name, known.description, dict(known.input_schema), function, irreversible, idempotent, repeat_safe,
        type=kind, command_kinds=dict(known.command_kinds) or None,  # type: ignore[arg-type]
    )


def _is_builtin_tool(item: Any) -> bool:
    """An SDK built-in tool object (``BetaAbstractMemoryTool`` and the like): ``to_dict()``
    gives a definition by ``type``, ``call(input)`` runs it."""
    to_dict = getattr(item, "to_dict", None)
    if not callable(to_dict) or not callable(getattr(item, "call", None)) or hasattr(item, "func"):
        return False
    try:
        definition = to_dict()
    except Exception:
        return False
    return isinstance(definition, Mapping) and definition.get("type") in CLIENT_TOOLS


def _from_builtin_tool(item: Any) -> ToolSpec:
    sdk_call = item.call
    function: ToolCallable
    if _is_async_callable(sdk_call):

        async def function(**kwargs: Any) -> Any:
            return await sdk_call(kwargs)

    else:

        def function(**kwargs: Any) -> Any:
            return sdk_call(kwargs)

    return _client_spec(function, item.to_dict())


def _spec_of(item: Any, label: str) -> ToolSpec:
    if isinstance(item, ToolSpec):
        return item
    if _is_sdk_tool(item):
        return _from_sdk_tool(item)
    if _is_builtin_tool(item):
        return _from_builtin_tool(item)
    if callable(item):
        return ToolSpec.from_function(item)
    raise TypeError(
        f"{label}: expected a function, a ToolSpec, a beta_tool tool or a dict "
        f"{{name: (function, input_schema)}}, not {type(item).__name__}"
    )


def _specs_of_mapping(items: Mapping[str, Any]) -> Iterator[ToolSpec]:
    for name, value in items.items():
        if isinstance(value, tuple):
            if len(value) != 2 or not callable(value[0]) or not isinstance(value[1], Mapping):
                raise TypeError(f"tool {name!r}: expected (function, input_schema), got {value!r}")
            function, schema = value
            if schema.get("type") not in (None, "object"):
                # A definition by type: an Anthropic-defined client tool.
                yield _client_spec(function, schema, name)
                continue
            yield ToolSpec.from_function(function, name=name, input_schema=dict(schema))
        elif callable(value):
            yield ToolSpec.from_function(value, name=name)
        else:
            raise TypeError(f"tool {name!r}: expected a function or (function, input_schema), not {type(value).__name__}")


def _declare(spec: ToolSpec, kind: Any, inputs: Any) -> ToolSpec:
    flags = (spec.irreversible, spec.idempotent, spec.repeat_safe)
    commands = spec.command_kinds
    if isinstance(kind, Mapping):
        if spec.command_kinds is None:
            raise ValueError(f"tool {spec.name!r}: kinds per command are for a client tool with commands; give one kind")
        unknown = sorted(set(kind) - set(spec.command_kinds))
        if unknown:
            raise ValueError(f"tool {spec.name!r}: no command {unknown}; its commands are {sorted(spec.command_kinds)}")
        commands = {**spec.command_kinds, **kind}
        kind = None
    elif kind is not None:
        commands = None  # one kind for every command
    if kind is not None:
        flags = _resolve_kind(spec.name, kind, None, None, None)
        _check_key_parameter(spec.name, spec.function, flags[1])
    irreversible, idempotent, repeat_safe = flags
    return replace(
        spec,
        irreversible=irreversible,
        idempotent=idempotent,
        repeat_safe=repeat_safe,
        inputs=spec.inputs if inputs is None else inputs,
        command_kinds=commands,
    )


def _to_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return ToolResult(value)
    return ToolResult(TypeAdapter(Any).dump_json(value).decode())


def _error_result(name: str, exc: Exception) -> ToolResult:
    if isinstance(exc, TypeError | ValidationError):
        return ToolResult(f"invalid input for {name}: {exc}", is_error=True)
    content = getattr(exc, "content", None)
    if type(exc).__name__ == "ToolError" and isinstance(content, str | list):
        # The SDK's ToolError carries the content the model should see.
        return ToolResult(content if isinstance(content, str) else list(content), is_error=True)
    return ToolResult(f"{type(exc).__name__}: {exc}", is_error=True)


class Toolbox:
    """A set of tools, the fixed interface agents and the harness share.

    A tool that raises an ``Exception`` yields an error result (the model sees the
    message); a ``BaseException`` that is not an ``Exception`` (a crash injected by the
    harness, ``KeyboardInterrupt``) propagates.
    """

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if not isinstance(spec, ToolSpec):
                raise TypeError(
                    f"Toolbox takes ToolSpec objects, not {type(spec).__name__}; "
                    "Toolbox.from_functions(*functions) builds one from functions"
                )
            if spec.name in self._specs:
                raise ValueError(f"two tools are named {spec.name!r}")
            self._specs[spec.name] = spec

    @classmethod
    def from_functions(
        cls,
        *tools: Any,
        kinds: Mapping[str, ToolKind | Mapping[str, ToolKind]] | None = None,
        inputs: Mapping[str, Any] | None = None,
    ) -> Toolbox:
        """A toolbox in one call.

        ``tools``: plain functions (sync or ``async def``; definitions from their type hints
        and docstrings, as the SDK's ``beta_tool`` builds them), tools made with the SDK's
        ``beta_tool`` / ``beta_async_tool`` (their definition and validation are kept),
        :class:`ToolSpec` objects (from :func:`tool`), and dicts
        ``{name: (function, input_schema)}``. An Anthropic-defined client tool is
        ``{name: (function, {"type": "bash_20250124", "name": "bash"})}`` or the SDK's tool
        object (a ``BetaAbstractMemoryTool``): sent by type, its commands' kinds known
        (:mod:`reference_agent.client_tools`). ``kinds``: per tool name, its kind (default
        ``read_only``): ``read_only``, ``repeat_safe``, ``keyed``, ``unkeyed``; for a client
        tool, a dict ``{command: kind}`` overrides some commands. ``inputs``:
        per tool name, example inputs (a list of dicts) or a Hypothesis strategy, which
        ``fuzz`` plans draw from instead of the ``input_schema``.

        >>> def search(query: str) -> str:
        ...     "Search the web."
        ...     return "results"
        >>> async def send_email(to: str, body: str, idempotency_key: str | None = None) -> str:
        ...     "Send an e-mail."
        ...     return "sent"
        >>> box = Toolbox.from_functions(search, send_email, kinds={"send_email": "keyed"},
        ...                              inputs={"search": [{"query": "weather"}]})
        >>> [box.spec(n).kind for n in box.names()]
        ['read_only', 'keyed']
        """
        specs: list[ToolSpec] = []
        for index, item in enumerate(tools):
            if isinstance(item, Mapping):
                specs.extend(_specs_of_mapping(item))
            elif isinstance(item, str | bytes) or (isinstance(item, Iterable) and not callable(item)):
                raise TypeError(
                    f"Toolbox.from_functions: argument {index} is a {type(item).__name__}; pass the tools as "
                    "separate arguments (Toolbox.from_functions(*my_tools)) or as a dict {name: (function, input_schema)}"
                )
            else:
                specs.append(_spec_of(item, f"Toolbox.from_functions: argument {index}"))
        names = {spec.name for spec in specs}
        for label, declared in (("kinds", kinds), ("inputs", inputs)):
            if declared is not None and not isinstance(declared, Mapping):
                raise TypeError(
                    f"Toolbox.from_functions: {label} must be a dict {{tool name: "
                    f"{'kind' if label == 'kinds' else 'inputs'}}}, not a {type(declared).__name__}"
                )
            unknown = sorted(set(declared or ()) - names)
            if unknown:
                raise ValueError(f"Toolbox.from_functions: {label} names {unknown}, which are not tools here; the tools are {sorted(names)}")
        kinds, inputs = kinds or {}, inputs or {}
        return cls(_declare(spec, kinds.get(spec.name), inputs.get(spec.name)) for spec in specs)

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

        The key is passed to keyed tools and ignored for the others. For an ``async def``
        tool the return value is an awaitable of the :class:`ToolResult`: an async agent
        awaits it (``spec(name).is_async`` says which tools are async).
        """
        try:
            spec = self.spec(name)
        except UnknownToolError as exc:
            return ToolResult(str(exc), is_error=True)
        kwargs = dict(input)
        if spec.idempotent:
            kwargs[KEY_PARAMETER] = idempotency_key
        if spec.is_async:
            return self._call_async(spec, kwargs)  # type: ignore[return-value]
        try:
            value = spec.function(**kwargs)
        except Exception as exc:
            return _error_result(name, exc)
        if inspect.isawaitable(value):
            # A wrapped async function the spec did not know about: still awaitable.
            return self._await_value(name, value)  # type: ignore[return-value]
        return _to_result(value)

    async def _call_async(self, spec: ToolSpec, kwargs: dict[str, Any]) -> ToolResult:
        try:
            value = spec.function(**kwargs)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return _error_result(spec.name, exc)
        return _to_result(value)

    async def _await_value(self, name: str, value: Awaitable[Any]) -> ToolResult:
        try:
            return _to_result(await value)
        except Exception as exc:
            return _error_result(name, exc)

    def replace_functions(self, wrap: Callable[[ToolSpec], ToolCallable]) -> Toolbox:
        """A toolbox whose every function is ``wrap(spec)``: how the harness instruments
        tools without the agent's knowledge. Kinds, inputs and ``is_async`` are kept."""
        return Toolbox(replace(spec, function=wrap(spec)) for spec in self._specs.values())
