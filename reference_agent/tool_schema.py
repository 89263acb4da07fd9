"""Tool definitions from Python functions, built the way the ``anthropic`` SDK builds them.

The SDK's ``beta_tool`` takes the description from the docstring (its summary and body,
without the ``Args:`` section), the ``input_schema`` from the signature through pydantic,
and each parameter's description from the docstring's ``Args:``. This module does the
same, so a function gives the same definition whether a team wraps it with ``beta_tool``
or hands it to ``Toolbox.from_functions``. Two differences, on purpose:
pydantic's ``title`` keys are dropped (they repeat each parameter's name and cost the model
tokens), and a parameter named ``idempotency_key`` is not part of the schema (the toolbox
passes it, the model never sees it).

>>> def search(query: str, limit: int = 3) -> str:
...     '''Search the index.
...
...     Args:
...         query: words to look for
...     '''
...     return query
>>> description, schema = describe_function(search)
>>> description, schema["properties"]["query"]["description"], schema["required"]
('Search the index.', 'words to look for', ['query'])
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

__all__ = ["ToolDefinitionError", "describe_function", "description_from_docstring", "schema_from_signature"]

#: The parameter the toolbox fills in for keyed tools; never part of a tool's schema.
KEY_PARAMETER = "idempotency_key"

# Keys of a JSON schema whose value maps names to schemas (a "title" key there is a name).
_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})
# Keys whose value is data, not a schema: copied as they are.
_DATA = frozenset({"default", "enum", "const", "examples", "required"})


class ToolDefinitionError(ValueError):
    """A tool cannot be defined from what was given (say, a signature with no JSON form)."""


def _docstring(function: Callable[..., Any]) -> Any:
    import docstring_parser

    return docstring_parser.parse(inspect.getdoc(function) or "")


def description_from_docstring(function: Callable[..., Any]) -> str:
    """The docstring's summary and body, without its ``Args:`` / ``Returns:`` sections.

    >>> def f() -> None:
    ...     '''Do it.
    ...
    ...     Really.
    ...
    ...     Returns:
    ...         nothing
    ...     '''
    >>> description_from_docstring(f)
    'Do it.\\n\\nReally.'
    """
    parsed = _docstring(function)
    if not parsed.short_description:
        return ""
    if parsed.long_description:
        return f"{parsed.short_description}\n\n{parsed.long_description}"
    return str(parsed.short_description)


def schema_from_signature(function: Callable[..., Any]) -> dict[str, Any]:
    """The ``input_schema`` (type object) of ``function``'s keyword parameters.

    Built by pydantic from the whole signature, as the SDK does (models among the
    parameters land in ``$defs``); parameter descriptions come from the docstring.

    >>> def add(a: int, b: int = 1) -> int:
    ...     return a + b
    >>> schema_from_signature(add)["required"]
    ['a']
    """
    signature = _signature(function)
    positional = [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY]
    if positional:
        raise ToolDefinitionError(
            f"tool function {_name(function)}: parameters {positional} are positional-only; "
            "the model passes arguments by name, so make them keyword parameters"
        )
    try:
        from pydantic import validate_call

        schema: dict[str, Any] = TypeAdapter(validate_call(function)).json_schema()  # type: ignore[arg-type]
    except Exception:
        # pydantic reads plain functions only; a partial or a callable object is read
        # parameter by parameter from its signature.
        schema = _schema_per_parameter(function, signature)
    schema = _strip_titles(schema)
    properties = schema.setdefault("properties", {})
    properties.pop(KEY_PARAMETER, None)
    if KEY_PARAMETER in schema.get("required", ()):
        schema["required"] = [r for r in schema["required"] if r != KEY_PARAMETER]
    if not schema.get("required"):
        schema.pop("required", None)
    for param in _docstring(function).params:
        prop = properties.get(param.arg_name)
        if isinstance(prop, dict) and param.description and "description" not in prop:
            prop["description"] = param.description
    return schema


def describe_function(function: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """``(description, input_schema)`` for ``function``, as ``beta_tool`` would give them."""
    return description_from_docstring(function), schema_from_signature(function)


def _name(function: Callable[..., Any]) -> str:
    return str(getattr(function, "__name__", type(function).__name__))


def _signature(function: Callable[..., Any]) -> inspect.Signature:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"tool function {_name(function)}: no signature to build a schema from ({exc}); "
            "pass input_schema= yourself"
        ) from None


def _schema_per_parameter(function: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra: Any = False
    hints = getattr(function, "__globals__", None) or getattr(getattr(function, "func", None), "__globals__", {})
    for param in signature.parameters.values():
        if param.kind is param.VAR_POSITIONAL:
            continue
        annotation = param.annotation if param.annotation is not param.empty else Any
        try:
            if isinstance(annotation, str):
                annotation = eval(annotation, dict(hints))  # the function's own annotations
            prop = TypeAdapter(annotation).json_schema()
        except Exception as exc:
            raise ToolDefinitionError(
                f"tool function {_name(function)}: parameter {param.name!r} has a type with no "
                f"JSON schema ({exc}); pass input_schema= yourself"
            ) from None
        if param.kind is param.VAR_KEYWORD:
            extra = prop
            continue
        if param.default is param.empty:
            required.append(param.name)
        else:
            # A default that is not JSON data is simply not advertised.
            with contextlib.suppress(Exception):
                prop["default"] = TypeAdapter(Any).dump_python(param.default, mode="json")
        properties[param.name] = prop
    schema: dict[str, Any] = {"additionalProperties": extra, "properties": properties, "type": "object"}
    if required:
        schema["required"] = required
    return schema


def _strip_titles(node: Any, *, names: bool = False) -> Any:
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {key: _strip_titles(value) for key, value in node.items()}
    return {
        key: value if key in _DATA else _strip_titles(value, names=key in _NAME_MAPS)
        for key, value in node.items()
        if key != "title"
    }
