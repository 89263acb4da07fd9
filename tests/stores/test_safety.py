"""Safe by default, on every backend: what a save refuses, what a load reports, which ids.

A save never acknowledges what a load would refuse: nesting deeper than
``MAX_NESTING_DEPTH`` and integers longer than ``MAX_INT_DIGITS`` digits are refused before
any byte is written, and the same data written by another tool loads as
``CorruptCheckpointError`` naming the place, never ``RecursionError``. Invalid task ids
are refused before any I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from stores import (
    ActionRecord,
    Checkpoint,
    CheckpointStore,
    CorruptCheckpointError,
    InvalidTaskIdError,
    UnstorableCheckpointError,
)
from stores.codec import MAX_INT_DIGITS, MAX_NESTING_DEPTH

pytestmark = pytest.mark.usefixtures("drop_postgres_tables")


def _task_id() -> str:
    return "task-" + uuid.uuid4().hex


def _tool_result(depth: int) -> dict[str, Any]:
    """A user message whose tool result nests ``depth`` levels of content blocks."""
    content: Any = "leaf"
    for _ in range(depth):
        content = [{"type": "text", "content": content}]
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": content}],
    }


def _nested_list(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def _overwrite_message(store: CheckpointStore, backend: str, task_id: str, body: bytes) -> None:
    """Replace stored message 0 of ``task_id`` by ``body``, as another tool could write it."""
    raw: Any = store
    if backend == "memory":
        raw._raw_record(task_id).messages[0] = body
    elif backend == "sqlite":
        raw._connect().execute(
            "UPDATE messages SET body = ? WHERE task_id = ? AND idx = 0", (body, task_id)
        )
    elif backend == "postgresql":
        with raw._connect() as conn:
            conn.execute(
                f"UPDATE {raw.tables['messages']} SET body = %s WHERE task_id = %s AND idx = 0",
                (body, task_id),
            )
    elif backend == "redis":
        raw.client.lset(raw.raw_keys(task_id)[1], 0, body)
    else:
        (chunk,) = [key for key in raw.chunk_keys(task_id) if "/msgs/" in key]
        raw.client.put_object(Bucket=raw.bucket, Key=chunk, Body=b"[" + body + b"]")
    if hasattr(raw, "_tracker"):
        raw._tracker.forget(task_id)


# -- nesting ------------------------------------------------------------------------------


def test_a_tool_result_500_deep_is_refused_by_save_naming_the_path_and_nothing_is_written(
    any_checkpoint_store: CheckpointStore,
) -> None:
    task_id = _task_id()
    first = any_checkpoint_store.save(
        Checkpoint(task_id=task_id, messages=[{"role": "user", "content": "hi"}])
    )
    deep = first.model_copy(update={"messages": [*first.messages, _tool_result(500)]})
    with pytest.raises(UnstorableCheckpointError) as raised:
        any_checkpoint_store.save(deep)
    assert raised.value.path.startswith("messages.1.content.0.content.0.content")
    assert "messages.1.content.0.content" in str(raised.value)
    assert f"limit of {MAX_NESTING_DEPTH}" in str(raised.value)
    loaded = any_checkpoint_store.load(task_id)
    assert loaded is not None and loaded.version == 1 and len(loaded.messages) == 1
    # A new task that deep is not created at all.
    fresh = _task_id()
    with pytest.raises(UnstorableCheckpointError):
        any_checkpoint_store.save(Checkpoint(task_id=fresh, messages=[_tool_result(500)]))
    assert any_checkpoint_store.load(fresh) is None


@pytest.mark.parametrize("field", ["artifacts", "metadata", "action input"])
def test_nesting_is_limited_in_every_head_field_at_exactly_the_limit(
    any_checkpoint_store: CheckpointStore, field: str
) -> None:
    def checkpoint(levels: int) -> Checkpoint:
        task_id = _task_id()
        if field == "action input":  # actions(1) . 0(2) . input(3) . x(4 ...)
            record = ActionRecord(
                tool_use_id="t", tool_name="send", idempotency_key="k",
                input={"x": _nested_list(levels - 3)},
            )  # fmt: skip
            return Checkpoint(task_id=task_id, actions=[record])
        return Checkpoint(task_id=task_id).model_copy(update={field: {"x": _nested_list(levels - 1)}})

    at_limit = any_checkpoint_store.save(checkpoint(MAX_NESTING_DEPTH))
    loaded = any_checkpoint_store.load(at_limit.task_id)
    assert loaded is not None and loaded.model_dump() == at_limit.model_dump()
    over = checkpoint(MAX_NESTING_DEPTH + 1)
    with pytest.raises(UnstorableCheckpointError, match=f"{MAX_NESTING_DEPTH + 1} levels deep"):
        any_checkpoint_store.save(over)
    assert any_checkpoint_store.load(over.task_id) is None


def test_a_message_at_exactly_the_limit_round_trips(any_checkpoint_store: CheckpointStore) -> None:
    # messages(1) . 0(2) . content(3) . 0(4) . content(5) ... : 2 levels per block.
    blocks = (MAX_NESTING_DEPTH - 4) // 2
    message = _tool_result(blocks)
    saved = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), messages=[message]))
    loaded = any_checkpoint_store.load(saved.task_id)
    assert loaded is not None and loaded.messages == [message]


@pytest.mark.parametrize("levels", [MAX_NESTING_DEPTH + 50, 100_000])
def test_data_stored_deeper_than_the_limit_loads_as_corrupt_naming_the_path(
    any_checkpoint_store: CheckpointStore, any_checkpoint_store_backend: str, levels: int
) -> None:
    task_id = _task_id()
    any_checkpoint_store.save(
        Checkpoint(task_id=task_id, messages=[{"role": "user", "content": "hi"}])
    )
    # 100,000 levels is too deep for json.loads itself (RecursionError inside it).
    body = b'{"role":"user","content":' + b"[" * levels + b"]" * levels + b"}"
    _overwrite_message(any_checkpoint_store, any_checkpoint_store_backend, task_id, body)
    with pytest.raises(CorruptCheckpointError) as raised:
        any_checkpoint_store.load(task_id)
    assert "messages.0.content.0.0.0" in str(raised.value)
    assert f"limit of {MAX_NESTING_DEPTH}" in str(raised.value)


# -- long integers ------------------------------------------------------------------------

_HUGE = 10**MAX_INT_DIGITS  # MAX_INT_DIGITS + 1 digits


@pytest.mark.parametrize(
    ("where", "update"),
    [
        ("artifacts.n", {"artifacts": {"n": _HUGE}}),
        ("metadata.n.1", {"metadata": {"n": [1, -_HUGE]}}),
        (
            "actions.0.input.n",
            {"actions": [ActionRecord(tool_use_id="t", tool_name="x", idempotency_key="k", input={"n": _HUGE})]},
        ),
        ("messages.0.content.0.input.n", {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": {"n": _HUGE}}]}]}),
        ("iteration", {"iteration": _HUGE}),
    ],
)  # fmt: skip
def test_an_integer_over_the_digit_limit_is_refused_before_writing(
    any_checkpoint_store: CheckpointStore, where: str, update: dict[str, Any]
) -> None:
    checkpoint = Checkpoint(task_id=_task_id()).model_copy(update=update)
    with pytest.raises(UnstorableCheckpointError, match=f"longer than {MAX_INT_DIGITS} digits") as raised:
        any_checkpoint_store.save(checkpoint)
    assert raised.value.path == where
    assert any_checkpoint_store.load(checkpoint.task_id) is None


@pytest.mark.parametrize(
    ("where", "update"),
    [
        ("metadata.x", {"metadata": {"x": float("nan")}}),
        ("artifacts.a.1", {"artifacts": {"a": [1, float("inf")]}}),
        (
            "actions.0.input.v",
            {"actions": [ActionRecord(tool_use_id="t", tool_name="x", idempotency_key="k", input={"v": -float("inf")})]},
        ),
    ],
)  # fmt: skip
def test_nan_and_infinities_in_the_head_are_refused_naming_the_place_on_every_store(
    any_checkpoint_store: CheckpointStore, where: str, update: dict[str, Any]
) -> None:
    # An outside round: pydantic writes NaN as null, so memory://, PostgreSQL, Redis and S3
    # stored {"x": null} for {"x": nan} without a word (SQLite refused it, as "x").
    checkpoint = Checkpoint(task_id=_task_id(), **update)
    with pytest.raises(UnstorableCheckpointError, match="which JSON cannot carry") as raised:
        any_checkpoint_store.save(checkpoint)
    assert raised.value.path == where
    assert any_checkpoint_store.load(checkpoint.task_id) is None
    # The words in a text are text.
    words = Checkpoint(task_id=_task_id(), metadata={"note": "NaN, Infinity and -Infinity"})
    any_checkpoint_store.save(words)
    loaded = any_checkpoint_store.load(words.task_id)
    assert loaded is not None and loaded.metadata == {"note": "NaN, Infinity and -Infinity"}


def test_an_integer_at_the_digit_limit_round_trips(any_checkpoint_store: CheckpointStore) -> None:
    biggest = _HUGE - 1  # MAX_INT_DIGITS nines
    saved = any_checkpoint_store.save(
        Checkpoint(
            task_id=_task_id(),
            artifacts={"n": biggest},
            metadata={"n": -biggest},
            messages=[{"role": "user", "content": [{"type": "text", "text": "x", "n": biggest}]}],
        )
    )
    loaded = any_checkpoint_store.load(saved.task_id)
    assert loaded is not None
    assert loaded.artifacts["n"] == biggest and loaded.metadata["n"] == -biggest
    assert loaded.messages[0]["content"][0]["n"] == biggest


def test_a_stored_integer_over_the_limit_loads_as_corrupt_naming_the_path(
    any_checkpoint_store: CheckpointStore, any_checkpoint_store_backend: str
) -> None:
    task_id = _task_id()
    any_checkpoint_store.save(
        Checkpoint(task_id=task_id, messages=[{"role": "user", "content": "hi"}])
    )
    body = b'{"role":"user","content":[{"type":"text","n":' + b"7" * 5000 + b"}]}"
    _overwrite_message(any_checkpoint_store, any_checkpoint_store_backend, task_id, body)
    with pytest.raises(CorruptCheckpointError, match=r"messages\.0\.content\.0\.n.*4300 digits"):
        any_checkpoint_store.load(task_id)


# -- task ids -----------------------------------------------------------------------------

_BAD_IDS = [
    pytest.param("", id="empty"),
    pytest.param("half \ud800 surrogate", id="lone-surrogate"),
    pytest.param(42, id="not-a-string"),
]


@pytest.mark.parametrize("task_id", _BAD_IDS)
def test_an_invalid_task_id_is_refused_on_load_save_and_delete_before_any_io(
    any_checkpoint_store: CheckpointStore, task_id: Any
) -> None:
    keep = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), goal="keep"))
    invalid = Checkpoint.model_construct(**{**keep.model_dump(), "task_id": task_id, "version": 0})
    calls: list[Callable[[], object]] = [
        lambda: any_checkpoint_store.load(task_id),
        lambda: any_checkpoint_store.delete(task_id),
        lambda: any_checkpoint_store.save(invalid),
    ]
    for call in calls:
        with pytest.raises(InvalidTaskIdError, match="task id"):
            call()
    assert any_checkpoint_store.load(keep.task_id) == keep
    assert [s.task_id for s in any_checkpoint_store.list_checkpoints()] == [keep.task_id]
    # Before any I/O: even a closed store answers with the task-id error.
    any_checkpoint_store.close()
    with pytest.raises(InvalidTaskIdError):
        any_checkpoint_store.load(task_id)


@pytest.mark.parametrize("task_id", ["a\x00b", "\x00", "trailing\x00"])
def test_a_task_id_with_nul_is_refused_on_save_by_every_store_before_any_io(
    any_checkpoint_store: CheckpointStore, task_id: str
) -> None:
    # PostgreSQL text cannot hold NUL; the other stores saved such an id, so an id that
    # worked on SQLite failed on PostgreSQL. Now every store refuses it on save.
    keep = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), goal="keep"))
    with pytest.raises(InvalidTaskIdError, match=r"NUL.*nothing was written"):
        any_checkpoint_store.save(Checkpoint(task_id=task_id, goal="g"))
    assert any_checkpoint_store.load(task_id) is None
    any_checkpoint_store.delete(task_id)  # no such task: nothing to do
    assert [s.task_id for s in any_checkpoint_store.list_checkpoints()] == [keep.task_id]
    any_checkpoint_store.close()
    with pytest.raises(InvalidTaskIdError, match="NUL"):
        any_checkpoint_store.save(Checkpoint(task_id=task_id, goal="g"))


def test_a_nul_free_id_with_other_control_characters_is_still_saved(
    any_checkpoint_store: CheckpointStore,
) -> None:
    task_id = _task_id() + "\x01\t\n\x1b[0m\x7f"
    saved = any_checkpoint_store.save(Checkpoint(task_id=task_id, goal="g"))
    assert any_checkpoint_store.load(task_id) == saved
