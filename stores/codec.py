"""The one serializer of checkpoints: strict JSON, UTF-8, no object revival.

A checkpoint is stored as a *head* (every field but ``messages``) and the messages one
by one, so that a save can write only the new suffix of the history. Decoding checks
the schema version before anything else and turns every kind of damage into
:class:`~stores.errors.CorruptCheckpointError`.

Encoding and decoding follow the same rules, so that a save is never acknowledged that a
load would refuse. Both refuse, naming the place (``messages.3.content.0.input``):

- nesting deeper than :data:`MAX_NESTING_DEPTH` containers below the checkpoint;
- integers longer than :data:`MAX_INT_DIGITS` digits (Python's default limit for
  turning text into an int, which ``json.loads`` applies);
- on save, what JSON cannot carry faithfully: lone surrogates, NaN and infinities,
  objects that are not JSON data.

A save refuses with :class:`~stores.errors.UnstorableCheckpointError` before any byte is
written; a load of data another tool stored that way raises
:class:`~stores.errors.CorruptCheckpointError`. No code path here recurses once per
level of the data, so no depth of stored data can raise ``RecursionError``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from .checkpoint import (
    SCHEMA_VERSION,
    ActionRecord,
    ActionState,
    Checkpoint,
    CheckpointStatus,
    CheckpointSummary,
    RecordedResult,
)
from .errors import (
    CorruptCheckpointError,
    InvalidTaskIdError,
    UnstorableCheckpointError,
    UnsupportedSchemaVersionError,
)

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_NESTING_DEPTH",
    "check_task_id",
    "copy_containers",
    "decode_checkpoint",
    "decode_head",
    "decode_summary",
    "dumps",
    "encode_head",
    "encode_message",
    "encode_messages",
    "loads",
    "split_joined",
]

#: The deepest nesting of objects and arrays a checkpoint may hold, counted from the
#: checkpoint itself: ``messages`` is at depth 1, ``messages[3]`` at 2, its ``content``
#: list at 3. The same limit applies on save and on load. A Messages API history needs a
#: handful of levels, so this leaves room for any tool result that is data, and it stays
#: below the depth at which pydantic's serializer gives up (255 levels inside a field).
MAX_NESTING_DEPTH = 250

#: The longest integer (in decimal digits, sign excluded) a checkpoint may hold: Python's
#: default limit for converting text to int (``sys.get_int_max_str_digits``), which
#: ``json.loads`` applies when a checkpoint is read back.
MAX_INT_DIGITS = 4300

# One encoder for every call: ``json.dumps`` with these options builds a new one each time.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_HEAD_EXCLUDE = {"messages"}
# Every save writes each of these keys into the head (the schema has not changed since
# version 1): a head without one is damaged. Filling it with the default instead would
# turn a lost ledger into an empty one, or a completed task into a running one, and the
# resume would repeat irreversible actions.
_HEAD_KEYS = tuple(name for name in Checkpoint.model_fields if name not in _HEAD_EXCLUDE)
_LONG_DIGITS = re.compile(rb"\d{%d}" % (MAX_INT_DIGITS + 1))
# A JSON text scanned without building it: strings (skipped whole), brackets, ':' and ','.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|-?\d+')
_SHOWN_SEGMENTS = 12

# The path of a value: None for the checkpoint, else (parent path, key or index).
_Path = tuple[Any, str | int] | None


def _max_digits() -> int:
    """The digit limit in force: ours, or the process's if it was set lower."""
    process = sys.get_int_max_str_digits()
    return MAX_INT_DIGITS if process == 0 else min(MAX_INT_DIGITS, process)


def _join(path: _Path) -> str:
    segments: list[str] = []
    while path is not None:
        path, key = path
        segments.append(str(key))
    segments.reverse()
    if not segments:
        return "the checkpoint"
    if len(segments) > _SHOWN_SEGMENTS:
        hidden = len(segments) - _SHOWN_SEGMENTS
        segments = [*segments[: _SHOWN_SEGMENTS - 2], f"<{hidden} more>", *segments[-2:]]
    return ".".join(segments)


def _too_deep(depth: int) -> str:
    return (
        f"it is nested {depth} levels deep (objects and arrays inside one another), deeper "
        f"than the limit of {MAX_NESTING_DEPTH}"
    )


def _problem(root: Any, path: _Path, depth: int) -> tuple[str, str] | None:
    """The first thing in ``root`` a checkpoint cannot hold, as (path, reason), or None.

    ``depth`` is the depth ``root`` has in the checkpoint when it is a container. Walks
    with an explicit stack: no recursion, whatever the depth.
    """
    digits = _max_digits()
    bound = 10**digits
    stack: list[tuple[Any, _Path, int]] = [(root, path, depth)]
    while stack:
        value, where, level = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    return _join(where), (
                        "it holds a lone surrogate, which is not valid UTF-8 (and the "
                        "Messages API rejects it too); clean the string first"
                    )
            continue
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if not -bound < value < bound:
                return _join(where), (
                    f"it holds an integer longer than {digits} digits, which JSON readers "
                    "refuse; store it as a string"
                )
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                return _join(where), f"it holds {value!r}, which JSON cannot carry"
            continue
        if isinstance(value, BaseModel):
            items: Iterable[tuple[Any, Any]] = (
                (name, getattr(value, name)) for name in type(value).model_fields
            )
        elif isinstance(value, dict):
            items = value.items()
        elif isinstance(value, list | tuple):
            items = enumerate(value)
        else:
            continue  # the encoder names what is not JSON data
        if level > MAX_NESTING_DEPTH:
            return _join(where), _too_deep(level)
        for key, item in items:
            if isinstance(key, str) and not key.isascii():
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    return _join(where), "a key holds a lone surrogate, which is not valid UTF-8"
            stack.append((item, (where, key), level + 1))
    return None


def _scan_text(text: str, path: _Path, depth: int, first: int = 0) -> tuple[str, str] | None:
    """Like :func:`_problem`, on JSON text that could not be decoded (too deep to parse).

    ``first`` is the index of the first entry when the text is an array (a chunk of
    messages that starts at message ``first``).
    """
    digits = _max_digits()
    # One entry per open container: [key or index of the current child, is an object].
    stack: list[list[Any]] = []
    pending: str | int = ""
    level = depth - 1
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            level += 1
            if level > MAX_NESTING_DEPTH:
                where = path
                for entry in stack:
                    where = (where, entry[0])
                return _join(where), _too_deep(level)
            stack.append([(first if not stack else 0) if token == "[" else "", token == "{"])
        elif token in ("]", "}"):
            level -= 1
            if stack:
                stack.pop()
        elif token == ",":
            if stack and not stack[-1][1]:
                stack[-1][0] += 1
        elif token == ":":
            if stack:
                stack[-1][0] = pending
        elif token.startswith('"'):
            try:
                pending = json.loads(token)
            except ValueError:
                pending = token[1:-1]
        elif len(token.lstrip("-")) > digits:
            where = path
            for entry in stack:
                where = (where, entry[0])
            return _join(where), f"it holds an integer longer than {digits} digits"
    return None


def _unstorable(where: str, reason: str) -> UnstorableCheckpointError:
    return UnstorableCheckpointError(
        f"checkpoint data at {where} cannot be stored: {reason}. Nothing was written",
        where,
    )


def _raise_problem(value: Any, path: _Path, depth: int) -> None:
    found = _problem(value, path, depth)
    if found is not None:
        raise _unstorable(*found)


def _may_break_rules(data: bytes, depth: int) -> bool:
    """Whether encoded ``data`` (a value at ``depth``) may break a rule: a cheap filter.

    The nesting of JSON text is at most its number of ``[`` and ``{``, and an integer too
    long shows as a run of digits: most values are ruled out without walking them.
    """
    if depth - 1 + data.count(b"[") + data.count(b"{") > MAX_NESTING_DEPTH:
        return True
    return len(data) > _max_digits() and _LONG_DIGITS.search(data) is not None


_LONG_DIGITS_TEXT = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1}}}")


def _long_digits(raw: bytes | str) -> bool:
    """Whether ``raw`` holds a run of digits longer than the integer limit."""
    if isinstance(raw, bytes):
        return _LONG_DIGITS.search(raw) is not None
    return _LONG_DIGITS_TEXT.search(raw) is not None


def _may_break_text_rules(raw: bytes | str, depth: int) -> bool:
    """:func:`_may_break_rules` on bytes or on text (as a str slice of a joined read)."""
    if isinstance(raw, bytes):
        return _may_break_rules(raw, depth)
    if depth - 1 + raw.count("[") + raw.count("{") > MAX_NESTING_DEPTH:
        return True
    return len(raw) > _max_digits() and _long_digits(raw)


def _encode(value: Any, path: _Path, depth: int) -> bytes:
    """``value`` (at ``depth`` in the checkpoint) as compact UTF-8 JSON, or a clear refusal."""
    try:
        data = _ENCODER.encode(value).encode("utf-8")
    except (ValueError, TypeError, RecursionError, UnicodeEncodeError) as exc:
        _raise_problem(value, path, depth)
        what = "is not JSON" if isinstance(exc, TypeError) else "cannot be stored as JSON"
        raise UnstorableCheckpointError(
            f"checkpoint data at {_join(path)} {what}: {exc}. Nothing was written", _join(path)
        ) from None
    if _may_break_rules(data, depth):
        _raise_problem(value, path, depth)
    return data


def dumps(value: Any) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON, by the rules of a checkpoint.

    Raises :class:`~stores.UnstorableCheckpointError` (a ``ValueError``) naming the
    place for what a checkpoint cannot hold: nesting deeper than
    :data:`MAX_NESTING_DEPTH`, integers longer than :data:`MAX_INT_DIGITS` digits, lone
    surrogates (not valid UTF-8; the Messages API rejects them too), NaN and
    infinities, and objects that are not JSON data.

    >>> dumps({"a": [1, "é"]})
    b'{"a":[1,"\\xc3\\xa9"]}'
    """
    return _encode(value, None, 0)


def task_id_of(checkpoint: Any) -> Any:
    """The task id of a checkpoint handed to ``save``, once it is seen to be a
    :class:`~stores.Checkpoint` (``save(None)`` or a dict was an AttributeError)."""
    if not isinstance(checkpoint, Checkpoint):
        raise TypeError(
            f"save takes a Checkpoint (Checkpoint(task_id=..., ...), or the one load or save "
            f"returned), not {type(checkpoint).__name__}"
        )
    return checkpoint.task_id


def check_task_id(task_id: object, *, saving: bool = False) -> str:
    """``task_id`` if a store may use it, else :class:`~stores.InvalidTaskIdError`.

    A task id is a non-empty string that is valid UTF-8 (no lone surrogates). Every
    store checks it before any I/O. ``saving``: also refuse a NUL character, which
    PostgreSQL text cannot hold, so that a task id saved on one backend can be saved on
    every one (``load`` and ``delete`` still take it: a checkpoint an older version
    saved under such an id can be read and removed).

    >>> check_task_id("report-42")
    'report-42'
    """
    if not isinstance(task_id, str):
        raise InvalidTaskIdError(
            f"a task id must be a string, not {type(task_id).__name__} ({task_id!r})"
        )
    if not task_id:
        raise InvalidTaskIdError("the task id is empty: give every task a non-empty id")
    if not task_id.isascii():
        try:
            task_id.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidTaskIdError(
                f"task id {task_id!r} is not valid UTF-8 (it holds a lone surrogate): use "
                "an id made of real characters"
            ) from None
    if saving and "\x00" in task_id:
        raise InvalidTaskIdError(
            f"task id {task_id!r} contains a NUL character, which PostgreSQL cannot store: "
            "every store refuses it on save so that ids work on every backend; use an id "
            "without NUL (nothing was written)"
        )
    return task_id


def loads(
    data: bytes | str, *, task_id: str, where: str = "", messages_from: int | None = None
) -> Any:
    """Decode stored JSON; any damage raises :class:`CorruptCheckpointError`.

    Too deep to parse, or an integer too long to read, is damage too (another tool
    wrote it): the error names the place. ``where`` names what is decoded, for errors;
    ``messages_from`` says that ``data`` is an array of messages starting at that index
    (so that the place is named ``messages.7...``).
    """
    if messages_from is None:
        return _loads(data, task_id, where or "data", None, 0)
    return _loads(data, task_id, where or "messages", (None, "messages"), 1, messages_from)


def _loads(
    data: bytes | str, task_id: str, what: str, path: _Path, depth: int, first: int = 0
) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        found = _scan_text(text, path, depth, first)
        if found is not None:
            reason = f"stored {what}, at {found[0]}: {found[1]}"
        else:
            reason = f"stored {what} is not valid JSON ({exc})"
        raise CorruptCheckpointError(task_id, reason) from None


# The C scanner ``json.loads`` drives, called directly: ``json.loads`` on bytes decodes
# them with the ``surrogatepass`` handler, several times slower than strict UTF-8.
_SCAN: Callable[[str, int], tuple[Any, int]]
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _fast_message(raw: bytes | str) -> Any:
    """``raw`` decoded as ``json.loads`` would, or ``_SLOW`` for the careful path.

    Only the text our own encoder writes is taken here (strict UTF-8, one value, no
    whitespace around it): the value is then exactly what ``json.loads`` returns. Any
    other text (surrogate escapes in the bytes, whitespace, damage, nesting too deep for
    the C scanner) goes to :func:`_loads`, which decodes it or names the damage.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value, end = _SCAN(text, 0)
    except (ValueError, StopIteration, RecursionError):
        return _SLOW
    return value if end == len(text) else _SLOW


_SLOW = object()


_SHALLOW_DEPTH = 64


def _copy_tree(value: Any, depth: int) -> Any:
    """A copy of shallow data, by recursion (about twice as fast as the stack).

    Each container is copied whole and its container children replaced by their copies.
    Raises ``_TooDeep`` past ``_SHALLOW_DEPTH`` levels, so that it never recurses deeper
    than that whatever the data, and for any type but JSON's own (a subclass, a model):
    the careful walk handles those.
    """
    if depth > _SHALLOW_DEPTH:
        raise _TooDeep
    kind = type(value)
    if kind is dict:
        copy = value.copy()
        for key, item in value.items():
            if type(item) not in _LEAVES:
                copy[key] = _copy_tree(item, depth + 1)
        return copy
    if kind is list or kind is tuple:
        items = list(value)
        for index, item in enumerate(items):
            if type(item) not in _LEAVES:
                items[index] = _copy_tree(item, depth + 1)
        return items if kind is list else tuple(items)
    raise _TooDeep


class _TooDeep(Exception):
    pass


_CONTAINERS = frozenset((dict, list, tuple))
_LEAVES = frozenset((str, int, float, bool, type(None)))


def copy_containers(value: Any) -> Any:
    """A copy of ``value``'s containers that shares its immutable leaves.

    The tracker's snapshot (:mod:`stores.incremental`) must not alias the caller's dicts
    and lists (the caller may mutate them after a save), but strings and numbers cannot
    change: sharing them lets the prefix comparison take the identity shortcut on every
    leaf instead of comparing megabytes of text. Shallow data is copied by recursion
    (about twice as fast), deeper data by an explicit stack: no depth of data can raise
    ``RecursionError`` here.
    """
    if type(value) not in _CONTAINERS:
        return _skeleton(value)
    try:
        return _copy_tree(value, 0)
    except (_TooDeep, RecursionError):
        return _skeleton(value)


def _skeleton(value: Any) -> Any:
    """A copy of ``value``'s containers that shares its immutable leaves.

    The snapshot must not alias the caller's dicts and lists (the caller may mutate them
    after a save), but strings and numbers cannot change: sharing them lets the prefix
    comparison take the identity shortcut on every leaf instead of comparing megabytes of
    text, which keeps a save at 1,000 messages close to the cost of the write itself.

    It walks with an explicit stack, never recursing, so no depth of data can raise
    ``RecursionError`` here (the codec refuses what is deeper than its limit anyway).
    """
    if not isinstance(value, dict | list | tuple):
        return value
    # Each container is copied shallowly (sharing its leaves) into its parent's copy, and
    # its container children are queued to be copied in turn. Tuples are copied as lists
    # and frozen at the end, deepest first, since a tuple cannot be filled in place.
    root = [value]
    pending: list[tuple[Any, Any]] = [(root, 0)]
    tuples: list[tuple[Any, Any]] = []
    while pending:
        parent, key = pending.pop()
        node = parent[key]
        if isinstance(node, dict):
            copy: Any = dict(node)
            parent[key] = copy
            for child_key, child in copy.items():
                if isinstance(child, dict | list | tuple):
                    pending.append((copy, child_key))
        else:
            copy = list(node)
            parent[key] = copy
            if isinstance(node, tuple):
                tuples.append((parent, key))
            for index, child in enumerate(copy):
                if isinstance(child, dict | list | tuple):
                    pending.append((copy, index))
    for parent, key in reversed(tuples):
        parent[key] = tuple(parent[key])
    return root[0]


def _check_decoded(
    task_id: str, raw: bytes | str | None, value: Any, path: _Path, depth: int
) -> None:
    """Refuse decoded stored data that breaks the rules a save enforces."""
    if raw is not None:
        data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        if not _may_break_rules(data, depth):
            return
    found = _problem(value, path, depth)
    if found is not None:
        raise CorruptCheckpointError(
            task_id, f"stored data at {found[0]}: {found[1]}, which no save would have written"
        )


def encode_head(checkpoint: Checkpoint) -> bytes:
    """Every field of ``checkpoint`` except ``messages``.

    Made in one call to pydantic's serializer (the head is encoded at every save). It is
    the JSON of ``model_dump(mode="json")``, byte for byte but for the spelling of a few
    floats (``1e-7`` for ``1e-07``), which decode to the same values. What the head may
    not hold (see :func:`dumps`) is refused with the same errors, naming the field.
    """
    try:
        data: bytes = checkpoint.__pydantic_serializer__.to_json(checkpoint, exclude=_HEAD_EXCLUDE)
    except (PydanticSerializationError, RecursionError, UnicodeDecodeError):
        _raise_not_json(checkpoint)  # bytes that are not UTF-8 fail in the serializer
        _raise_head_problem(checkpoint)
        return dumps(checkpoint.model_dump(mode="json", exclude={"messages"}))
    # The models write NaN and infinities as the tokens ``NaN`` / ``Infinity`` (not as
    # ``null``, pydantic's default, which stored a changed value without a word): seen
    # in the bytes, the walk names the field that holds one (or finds them in a text).
    if _may_break_rules(data, 0) or b"NaN" in data or b"Infinity" in data:
        _raise_head_problem(checkpoint)
    if not _plainly_valid(checkpoint):
        _raise_not_json(checkpoint)
        _check_schema(data)
        version = checkpoint.schema_version
        if isinstance(version, int) and version > SCHEMA_VERSION:
            # A load of this code refuses it (UnsupportedSchemaVersionError): never
            # acknowledge it (an outside round's save of schema_version 999 was).
            raise _unstorable(
                "schema_version",
                f"it is {version}, newer than this code writes ({SCHEMA_VERSION}), so a load "
                "would refuse it; leave schema_version at its default",
            )
    return data


#: The fields of the models that hold a time, which the head writes as ISO text.
_TIME_FIELDS = frozenset({"created_at", "updated_at", "recorded_at"})
#: What JSON carries as it is (a tuple is written as the list it reads back as, as
#: ``json.dumps`` writes it).
_JSON_NATIVE = (str, int, float, bool, type(None), dict, list, tuple, BaseModel)


def _raise_not_json(checkpoint: Checkpoint) -> None:
    """Refuse a head holding a value JSON has no type for (a set, bytes, a datetime in
    ``metadata``): pydantic's serializer would write a list or a text in its place, and
    the load would give back another value than the one saved. The messages are refused
    so by the encoder already; an outside round found the in-memory store saving
    ``{"tags": {"a"}}`` as ``["a"]`` where the durable stores refused it."""
    stack: list[tuple[Any, _Path]] = [(checkpoint, None)]
    while stack:
        value, where = stack.pop()
        if not isinstance(value, _JSON_NATIVE):
            raise _unstorable(
                _join(where),
                f"it holds a value of type {type(value).__name__}, which JSON has no type for (a load would "
                "give back another value); store it as a list, a string or a number",
            )
        if isinstance(value, BaseModel):
            stack.extend(
                (getattr(value, name), (where, name))
                for name in type(value).model_fields
                if name not in _TIME_FIELDS and not (value is checkpoint and name in _HEAD_EXCLUDE)
            )
        elif isinstance(value, dict):
            stack.extend((item, (where, key)) for key, item in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((item, (where, index)) for index, item in enumerate(value))


_STATUSES = frozenset(get_args(CheckpointStatus))
_ACTION_STATES = frozenset(get_args(ActionState))
#: The fields :func:`_plainly_valid` knows (a test holds them to the models' fields): a
#: field added to a model without a rule there would be let through unchecked.
_PLAINLY_CHECKED = {
    Checkpoint: frozenset(
        {"schema_version", "task_id", "goal", "messages", "completed_tasks", "artifacts", "iteration", "status",
         "final_answer", "actions", "metadata", "created_at", "updated_at", "version"}
    ),
    ActionRecord: frozenset(
        {"tool_use_id", "tool_name", "input", "idempotency_key", "state", "result", "recorded_at"}
    ),
    RecordedResult: frozenset({"content", "is_error"}),
}


def _plainly_valid(checkpoint: Checkpoint) -> bool:
    """Whether every field of ``checkpoint``'s head holds a value of exactly the type its
    schema names, within its constraints: then the head's JSON is one a load accepts,
    and the schema check (a parse and a validation of the whole head, slower than this
    walk by three to four times) is not needed. ``False`` says only "not plainly": the schema check decides.

    Stricter than the schema, never looser: exact types (no subclasses, no ``bool`` for an
    ``int``, no string for a number), exact model classes.
    """
    if type(checkpoint) is not Checkpoint:
        return False
    fields = checkpoint.__dict__
    version = fields.get("schema_version")
    task_id = fields.get("task_id")
    iteration = fields.get("iteration")
    saved = fields.get("version")
    answer = fields.get("final_answer")
    if not (
        type(version) is int and version == SCHEMA_VERSION
        and type(task_id) is str and task_id
        and type(fields.get("goal")) is str
        and type(iteration) is int and iteration >= 0
        and type(saved) is int and saved >= 0
        and type(fields.get("status")) is str and fields.get("status") in _STATUSES
        and (answer is None or type(answer) is str)
        and type(fields.get("artifacts")) is dict
        and type(fields.get("metadata")) is dict
        and type(fields.get("created_at")) is _dt.datetime
        and type(fields.get("updated_at")) is _dt.datetime
        and _all_json(fields["metadata"])
        and _all_json(fields["artifacts"])
    ):
        return False
    completed = fields.get("completed_tasks")
    if type(completed) is not list or any(type(item) is not str for item in completed):
        return False
    actions = fields.get("actions")
    if type(actions) is not list:
        return False
    for record in actions:
        if type(record) is not ActionRecord:
            return False
        entry = record.__dict__
        result = entry.get("result")
        if not (
            type(entry.get("tool_use_id")) is str
            and type(entry.get("tool_name")) is str
            and type(entry.get("input")) is dict
            and _all_json(entry["input"])
            and type(entry.get("idempotency_key")) is str
            and type(entry.get("state")) is str and entry.get("state") in _ACTION_STATES
            and type(entry.get("recorded_at")) is _dt.datetime
        ):
            return False
        if result is not None:
            if type(result) is not RecordedResult:
                return False
            content = result.__dict__.get("content")
            if type(result.__dict__.get("is_error")) is not bool:
                return False
            if type(content) is not str and not (
                type(content) is list and all(type(block) is dict for block in content) and _all_json(content)
            ):
                return False
    return True


_PLAIN_LEAVES = frozenset({str, int, float, bool, type(None)})


def _all_json(root: Any) -> bool:
    """Whether ``root`` holds nothing but dicts, lists, strings, numbers, booleans and
    None, by exact type (anything else takes the slow path, which names what JSON cannot
    carry). A walk with a stack: no recursion."""
    stack = [root]
    leaves = _PLAIN_LEAVES
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is dict:
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
        elif kind not in leaves:
            return False
    return True


def _check_schema(head: bytes) -> None:
    """Refuse a head that a load would refuse: one that breaks the checkpoint's schema.

    ``model_copy(update=...)`` and attribute assignment skip pydantic's validation, so a
    checkpoint can hold an action state, a status or a negative iteration that the
    validation on load rejects; saved, it would brick the task at its next load.
    """
    try:
        Checkpoint.__pydantic_validator__.validate_json(head)
        return
    except ValidationError as exc:
        first = exc.errors()[0]
        if first.get("type") == "json_invalid":
            # pydantic's JSON parser stops short of the nesting a checkpoint may hold:
            # validate as a load does, on the decoded head.
            try:
                Checkpoint.model_validate({**json.loads(head), "messages": []})
                return
            except ValidationError as deep:
                first = deep.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the checkpoint"
        got = repr(first.get("input"))
        got = got if len(got) <= 120 else got[:117] + "..."
        raise UnstorableCheckpointError(
            f"checkpoint data at {where} cannot be stored: {first.get('msg')} (got "
            f"{got}), so a load would refuse it. Nothing was written. "
            "model_copy(update=...) and attribute assignment skip the checkpoint's "
            "validation: build a changed checkpoint with Checkpoint.model_validate({...}), "
            "or keep to the values the schema allows",
            where,
        ) from None


def _raise_head_problem(checkpoint: Checkpoint) -> None:
    for name in type(checkpoint).model_fields:
        if name not in _HEAD_EXCLUDE:
            _raise_problem(getattr(checkpoint, name), (None, name), 1)


def encode_message(message: dict[str, Any], index: int = 0) -> bytes:
    """Entry ``index`` of ``messages``."""
    return _encode(message, ((None, "messages"), index), 2)


def encode_messages(messages: Sequence[dict[str, Any]], start: int = 0) -> list[bytes]:
    """Each of ``messages``, encoded on its own; ``messages[0]`` is entry ``start``.

    Each must be a JSON object (a load refuses anything else), as the schema says; only
    ``model_copy(update=...)`` or an assignment can put another value there."""
    for offset, message in enumerate(messages):
        if not isinstance(message, dict):
            raise UnstorableCheckpointError(
                f"checkpoint data at messages.{start + offset} cannot be stored: a message "
                f"must be a JSON object (a dict), not {type(message).__name__}, so a load would "
                "refuse it. Nothing was written",
                f"messages.{start + offset}",
            )
    return [
        _encode(message, ((None, "messages"), start + offset), 2)
        for offset, message in enumerate(messages)
    ]


def split_joined(data: bytes, lengths: Sequence[int]) -> list[bytes | str]:
    """The entries of ``data``, the concatenation of entries of ``lengths`` bytes each.

    For a store that reads a history as one value (one round trip, one object instead of
    one per message): each entry comes back on its own, to be decoded on its own by
    :func:`decode_checkpoint`. Text when the whole is ASCII (one decode for all, and
    then byte offsets are character offsets), else bytes. ``lengths`` must add up to
    ``len(data)`` (the caller checks).
    """
    text: bytes | str = data
    if data.isascii():
        text = data.decode("ascii")
    entries: list[bytes | str] = []
    start = 0
    for length in lengths:
        end = start + length
        entries.append(text[start:end])
        start = end
    return entries


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
    missing = [key for key in _HEAD_KEYS if key not in head]
    if missing:
        raise CorruptCheckpointError(
            task_id, f"stored head has no {', '.join(missing)} (every save writes {'it' if len(missing) == 1 else 'them'})"
        )
    return head


def decode_head(task_id: str, head: bytes | str) -> dict[str, Any]:
    """The stored head as a dict, with its schema version and task id checked."""
    return _check_head(task_id, loads(head, task_id=task_id, where="head"))


def decode_checkpoint(
    task_id: str,
    head: bytes | str | dict[str, Any],
    messages: Iterable[bytes | str | Any],
    *,
    copies: list[Any] | None = None,
) -> Checkpoint:
    """Rebuild a checkpoint from its stored head and messages.

    ``head`` may be bytes or an already decoded object; each message may be bytes or an
    already decoded object (as a JSONB column returns it). The result shares nothing with
    the inputs' decoded objects beyond what the caller passed in. Data that breaks the
    rules a save enforces (nesting, integer length) is :class:`CorruptCheckpointError`.

    ``copies``, a list, receives :func:`copy_containers` of each message (what the
    incremental tracker keeps): the copy walks each message once, and that walk also
    bounds its nesting, so it costs less than the copy and the check made apart.
    """
    if isinstance(head, dict):
        fields = _check_head(task_id, head)
        _check_decoded(task_id, None, fields, None, 0)
    else:
        fields = decode_head(task_id, head)
        _check_decoded(task_id, head, fields, None, 0)
    decoded: list[Any] = []
    append = decoded.append
    digits = _max_digits()
    for index, raw in enumerate(messages):
        copy: Any = _SLOW
        if isinstance(raw, bytes | str):
            message = _fast_message(raw)
            if message is _SLOW:
                where: _Path = ((None, "messages"), index)
                message = _loads(raw, task_id, f"message {index}", where, 2)
                _check_decoded(task_id, raw, message, where, 2)
            else:
                if copies is not None and type(message) is dict:
                    try:
                        # Depth 2 (a message) plus at most _SHALLOW_DEPTH levels: well
                        # within the nesting limit, so only the digits are left to check.
                        copy = _copy_tree(message, 2)
                    except (_TooDeep, RecursionError):
                        copy = _SLOW
                if copy is _SLOW:
                    if _may_break_text_rules(raw, 2):
                        _check_decoded(task_id, None, message, ((None, "messages"), index), 2)
                elif len(raw) > digits and _long_digits(raw):
                    _check_decoded(task_id, None, message, ((None, "messages"), index), 2)
        else:
            message = raw
            _check_decoded(task_id, None, message, ((None, "messages"), index), 2)
        if type(message) is not dict:
            if not isinstance(message, dict):
                raise CorruptCheckpointError(
                    task_id, f"stored message {index} is not a JSON object"
                )
            message = dict(message)
        append(message)
        if copies is not None:
            copies.append(copy_containers(message) if copy is _SLOW else copy)
    # The schema is checked on the head alone: ``messages`` is ``list[dict[str, Any]]``
    # and every entry was checked to be a decoded JSON object (whose keys are strings)
    # just above, so validating it again would only copy each message.
    try:
        checkpoint = Checkpoint.model_validate({**fields, "messages": []})
    except ValidationError as exc:
        raise CorruptCheckpointError(
            task_id, f"stored data does not match the checkpoint schema: {exc}"
        ) from None
    except RecursionError:  # pragma: no cover - the depth check above rules it out
        raise CorruptCheckpointError(task_id, _too_deep(MAX_NESTING_DEPTH + 1)) from None
    checkpoint.messages = decoded
    return checkpoint


def decode_summary(task_id: str, head: bytes | str | dict[str, Any]) -> CheckpointSummary:
    """A listing entry from a stored head."""
    fields = _check_head(task_id, head) if isinstance(head, dict) else decode_head(task_id, head)
    try:
        return CheckpointSummary.model_validate(
            {key: fields.get(key) for key in CheckpointSummary.model_fields}
        )
    except ValidationError as exc:
        raise CorruptCheckpointError(task_id, f"stored head is invalid: {exc}") from None
