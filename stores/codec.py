"""The one serializer of checkpoints: strict JSON, UTF-8, no object revival.

A checkpoint is stored as a *head* (every field but ``messages``) and the messages one
by one, so that a save can write only the new suffix of the history. Decoding checks
the schema version before anything else and turns every kind of damage into
:class:`~stores.errors.CorruptCheckpointError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from .checkpoint import SCHEMA_VERSION, Checkpoint, CheckpointSummary
from .errors import CorruptCheckpointError, UnsupportedSchemaVersionError

__all__ = [
    "decode_checkpoint",
    "decode_head",
    "decode_summary",
    "dumps",
    "encode_head",
    "encode_message",
    "encode_messages",
    "loads",
]


def _find_unencodable(value: Any, path: str = "$") -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_unencodable(key, f"{path}.<key>") or _find_unencodable(
                item, f"{path}.{key}"
            )
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _find_unencodable(item, f"{path}[{index}]")
            if found:
                return found
    return None


# One encoder for every call: ``json.dumps`` with these options builds a new one each time.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_HEAD_EXCLUDE = {"messages"}


def dumps(value: Any) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON.

    Raises ``ValueError`` naming the place for what JSON cannot carry faithfully: lone
    surrogates (not valid UTF-8; the Messages API rejects them too), NaN and infinities,
    and objects that are not JSON data.

    >>> dumps({"a": [1, "é"]})
    b'{"a":[1,"\\xc3\\xa9"]}'
    """
    try:
        text = _ENCODER.encode(value)
    except TypeError as exc:
        raise ValueError(f"checkpoint data is not JSON: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"checkpoint data cannot be stored as JSON: {exc}") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        where = _find_unencodable(value) or "$"
        raise ValueError(
            f"checkpoint data holds a lone surrogate at {where}: it is not valid UTF-8, so "
            "it cannot be stored (and the Messages API would reject it); clean the string first"
        ) from None


def loads(data: bytes | str, *, task_id: str) -> Any:
    """Decode stored JSON; any damage raises :class:`CorruptCheckpointError`."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(task_id, f"stored bytes are not valid JSON ({exc})") from None


def encode_head(checkpoint: Checkpoint) -> bytes:
    """Every field of ``checkpoint`` except ``messages``.

    Made in one call to pydantic's serializer (the head is encoded at every save). It is
    the JSON of ``model_dump(mode="json")``, byte for byte but for the spelling of a few
    floats (``1e-7`` for ``1e-07``), which decode to the same values. Where pydantic
    fails (a lone surrogate), :func:`dumps` gives its clear error instead.
    """
    try:
        data: bytes = checkpoint.__pydantic_serializer__.to_json(checkpoint, exclude=_HEAD_EXCLUDE)
    except PydanticSerializationError:
        return dumps(checkpoint.model_dump(mode="json", exclude={"messages"}))
    return data


def encode_message(message: dict[str, Any]) -> bytes:
    """One entry of ``messages``."""
    return dumps(message)


def encode_messages(messages: Sequence[dict[str, Any]]) -> list[bytes]:
    """Each of ``messages``, encoded on its own."""
    return [dumps(message) for message in messages]


def _check_head(task_id: str, head: Any) -> dict[str, Any]:
    if not isinstance(head, dict):
        raise CorruptCheckpointError(task_id, "stored head is not a JSON object")
    version = head.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CorruptCheckpointError(task_id, "stored head has no integer schema_version")
    if version > SCHEMA_VERSION:
        raise UnsupportedSchemaVersionError(task_id, version, SCHEMA_VERSION)
    stored_id = head.get("task_id")
    if stored_id != task_id:
        raise CorruptCheckpointError(
            task_id, f"stored head belongs to task {stored_id!r}, not {task_id!r}"
        )
    return head


def decode_head(task_id: str, head: bytes | str) -> dict[str, Any]:
    """The stored head as a dict, with its schema version and task id checked."""
    return _check_head(task_id, loads(head, task_id=task_id))


def decode_checkpoint(
    task_id: str, head: bytes | str | dict[str, Any], messages: Iterable[bytes | str | Any]
) -> Checkpoint:
    """Rebuild a checkpoint from its stored head and messages.

    ``head`` may be bytes or an already decoded object; each message may be bytes or an
    already decoded object (as a JSONB column returns it). The result shares nothing with
    the inputs' decoded objects beyond what the caller passed in.
    """
    fields = (
        _check_head(task_id, head) if isinstance(head, dict) else decode_head(task_id, head)
    )
    decoded: list[Any] = []
    for index, raw in enumerate(messages):
        message = loads(raw, task_id=task_id) if isinstance(raw, bytes | str) else raw
        if not isinstance(message, dict):
            raise CorruptCheckpointError(task_id, f"stored message {index} is not a JSON object")
        decoded.append(message)
    try:
        return Checkpoint.model_validate({**fields, "messages": decoded})
    except ValidationError as exc:
        raise CorruptCheckpointError(
            task_id, f"stored data does not match the checkpoint schema: {exc}"
        ) from None


def decode_summary(task_id: str, head: bytes | str | dict[str, Any]) -> CheckpointSummary:
    """A listing entry from a stored head."""
    fields = (
        _check_head(task_id, head) if isinstance(head, dict) else decode_head(task_id, head)
    )
    try:
        return CheckpointSummary.model_validate(
            {key: fields.get(key) for key in CheckpointSummary.model_fields}
        )
    except ValidationError as exc:
        raise CorruptCheckpointError(task_id, f"stored head is invalid: {exc}") from None
