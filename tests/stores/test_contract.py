"""The checkpoint-store contract, run against every backend.

Each test gets a fresh, empty store (``any_checkpoint_store``) on each backend selected
by ``--agentckpt-backends`` (all of them in this repository's configuration), so these
tests are the specification every backend must meet.
"""

from __future__ import annotations

import copy
import datetime as _dt
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stores import (
    SCHEMA_VERSION,
    ActionRecord,
    Checkpoint,
    CheckpointStore,
    ConflictError,
    RecordedResult,
    UnstorableCheckpointError,
    UnsupportedSchemaVersionError,
    codec,
    open_store,
)

# Hypothesis runs many examples on one function-scoped store: each example uses its own
# task id, so the examples never see each other's data.
_store_settings = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _task_id() -> str:
    return "task-" + uuid.uuid4().hex


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


pytestmark = pytest.mark.usefixtures("drop_postgres_tables")


@pytest.fixture
def second_store(
    any_checkpoint_store_url: str, any_checkpoint_store_backend: str
) -> Iterator[CheckpointStore]:
    """Another store on the same URL: another worker looking at the same data."""
    if any_checkpoint_store_backend == "memory":
        pytest.skip("memory:// stores share nothing between instances")
    store = open_store(any_checkpoint_store_url)
    try:
        yield store
    finally:
        store.close()


# -- awkward data ------------------------------------------------------------------------

EVERY_BLOCK_TYPE: list[dict[str, Any]] = [
    {"role": "user", "content": "Find the report and e-mail it to Zoë 📧"},
    {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants the report. Let me search first.\n\n步骤一",
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" + "A" * 300,
            },
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT" + "=" * 2},
            {"type": "text", "text": "Searching.", "citations": None},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01",
                "name": "web_search",
                "input": {"query": "quarterly report 2024"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_01",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://example.com/report",
                        "title": "Report",
                        "encrypted_content": "Eo8BCioIAhgBIiQ" * 20,
                        "page_age": None,
                    }
                ],
            },
            {
                "type": "tool_use",
                "id": "toolu_01A",
                "name": "send_email",
                "input": {"to": ["zoe@example.com"], "cc": [], "attachments": {}, "n": 2**64 + 1},
            },
            {"type": "tool_use", "id": "toolu_01B", "name": "noop", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01A",
                "content": [{"type": "text", "text": "sent"}],
                "is_error": False,
            },
            {"type": "tool_result", "tool_use_id": "toolu_01B", "content": []},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
            },
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "line\nline\u2028"},
                "title": None,
                "context": "",
                "citations": {"enabled": True},
            },
            {
                "type": "document",
                "source": {"type": "url", "url": "https://example.com/a.pdf"},
                "cache_control": {"type": "ephemeral"},
            },
        ],
    },
]


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = {"level": level, "child": [value]}
    return value


def test_every_content_block_type_round_trips_exactly(
    any_checkpoint_store: CheckpointStore,
) -> None:
    checkpoint = Checkpoint(
        task_id=_task_id(),
        goal="report ✓",
        messages=copy.deepcopy(EVERY_BLOCK_TYPE),
        completed_tasks=["find", "réviser"],
        artifacts={"report.md": "# Report\n" * 100, "empty": [], "nested": {"a": {}}},
        iteration=7,
        actions=[
            ActionRecord(
                tool_use_id="toolu_01A",
                tool_name="send_email",
                input={"to": ["zoe@example.com"]},
                idempotency_key="key-1",
                state="done",
                result=RecordedResult(content=[{"type": "text", "text": "sent"}]),
            )
        ],
        metadata={"user": "u1", "big": 2**70, "neg": -(2**63) - 1},
    )
    saved = any_checkpoint_store.save(checkpoint)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert loaded is not None
    assert loaded.messages == EVERY_BLOCK_TYPE
    assert loaded.model_dump() == saved.model_dump()
    assert loaded.metadata["big"] == 2**70


def test_awkward_strings_and_shapes_round_trip(any_checkpoint_store: CheckpointStore) -> None:
    awkward = [
        "",
        "\x00",
        "nul\x00inside",
        "emoji 👩‍👩‍👧‍👦 🏳️‍🌈",
        "rtl \u202e עברית",
        "\ufeffbom",
        "\U0010ffff",
        "\\u0000 literal backslash",
        'quote " and \\',
        "x" * 1_000_000,
    ]
    checkpoint = Checkpoint(
        task_id=_task_id(),
        goal="\x00 goal with nul",
        messages=[_user(text) for text in awkward if text]
        # 123 levels of {"child": [...]} put the deepest list at the nesting limit (250).
        + [{"role": "assistant", "content": [{"type": "text", "text": "", "extra": _deep(123)}]}],
        artifacts={text: text for text in awkward[:9]},
        metadata={"ints": [2**53 + 1, -(2**53) - 1, 10**30], "floats": [0.1, 1e308, -0.0]},
        completed_tasks=[],
    )
    saved = any_checkpoint_store.save(checkpoint)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert loaded is not None
    assert loaded.model_dump() == saved.model_dump()
    assert loaded.messages[-1]["content"][0]["extra"] == _deep(123)
    assert loaded.metadata["ints"][0] == 2**53 + 1


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"]), "content": st.text(min_size=1)},
        optional={"extra": _json},
    ),
    max_size=6,
)


@_store_settings
@given(messages=_messages, artifacts=st.dictionaries(st.text(max_size=8), _json, max_size=3))
def test_arbitrary_json_data_round_trips(
    any_checkpoint_store: CheckpointStore,
    messages: list[dict[str, Any]],
    artifacts: dict[str, Any],
) -> None:
    checkpoint = Checkpoint(task_id=_task_id(), messages=messages, artifacts=artifacts)
    saved = any_checkpoint_store.save(checkpoint)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert loaded is not None
    assert loaded.messages == messages
    assert loaded.model_dump() == saved.model_dump()


def test_lone_surrogate_is_a_clear_value_error_and_stores_nothing(
    any_checkpoint_store: CheckpointStore,
) -> None:
    task_id = _task_id()
    bad = Checkpoint(task_id=task_id, messages=[_user("half a pair \ud83d")])
    with pytest.raises(ValueError, match="surrogate"):
        any_checkpoint_store.save(bad)
    assert any_checkpoint_store.load(task_id) is None
    assert any_checkpoint_store.list_checkpoints() == []


def test_lone_surrogate_in_an_update_leaves_the_stored_checkpoint_unchanged(
    any_checkpoint_store: CheckpointStore,
) -> None:
    saved = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), messages=[_user("ok")]))
    bad = saved.model_copy(deep=True)
    bad.messages.append(_user("\udfff"))
    with pytest.raises(ValueError, match="surrogate"):
        any_checkpoint_store.save(bad)
    loaded = any_checkpoint_store.load(saved.task_id)
    assert loaded is not None
    assert (loaded.version, loaded.messages) == (1, [_user("ok")])
    # The failed save did not disturb incremental saves either.
    saved.messages.append(_user("next"))
    assert any_checkpoint_store.save(saved).version == 2
    reloaded = any_checkpoint_store.load(saved.task_id)
    assert reloaded is not None
    assert reloaded.messages == [_user("ok"), _user("next")]


@pytest.mark.parametrize(
    "update",
    [
        {"status": "finished"},
        {"iteration": -3},
        {"messages": [{"role": "user", "content": "ok"}, "not a message"]},
        {"actions": "outcome"},
    ],
    ids=["status", "iteration", "message", "actions"],
)
def test_a_checkpoint_that_breaks_the_schema_is_refused_at_save_not_at_the_next_load(
    any_checkpoint_store: CheckpointStore, update: dict[str, Any]
) -> None:
    # model_copy(update=...) skips pydantic's validation: saved, such a checkpoint was
    # acknowledged and then refused by every load, the task bricked.
    saved = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), messages=[_user("ok")]))
    with pytest.raises(UnstorableCheckpointError, match=r"so a load would refuse it\. Nothing was written"):
        any_checkpoint_store.save(saved.model_copy(update=update))
    loaded = any_checkpoint_store.load(saved.task_id)
    assert loaded is not None and (loaded.version, loaded.messages) == (1, [_user("ok")])
    assert any_checkpoint_store.save(loaded).version == 2  # the task goes on


# -- versions and compare-and-set --------------------------------------------------------


def test_missing_task_loads_as_none(any_checkpoint_store: CheckpointStore) -> None:
    assert any_checkpoint_store.load(_task_id()) is None


def test_each_save_returns_the_next_version_and_load_reports_it(
    any_checkpoint_store: CheckpointStore,
) -> None:
    checkpoint = Checkpoint(task_id=_task_id())
    versions = []
    for iteration in range(1, 5):
        checkpoint = any_checkpoint_store.save(
            checkpoint.model_copy(update={"iteration": iteration})
        )
        versions.append(checkpoint.version)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert versions == [1, 2, 3, 4]
    assert loaded is not None
    assert (loaded.version, loaded.iteration) == (4, 4)


def test_stale_save_raises_conflict_and_changes_nothing(
    any_checkpoint_store: CheckpointStore,
) -> None:
    first = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), messages=[_user("a")]))
    winner = first.model_copy(deep=True)
    winner.messages.append(_user("winner"))
    winner = any_checkpoint_store.save(winner)
    stale = first.model_copy(deep=True)
    stale.messages.append(_user("stale"))
    stale.iteration = 99
    with pytest.raises(ConflictError) as raised:
        any_checkpoint_store.save(stale)
    assert (raised.value.expected, raised.value.actual) == (1, 2)
    loaded = any_checkpoint_store.load(first.task_id)
    assert loaded is not None
    assert loaded.model_dump() == winner.model_dump()


def test_creating_an_existing_task_conflicts(any_checkpoint_store: CheckpointStore) -> None:
    task_id = _task_id()
    existing = any_checkpoint_store.save(Checkpoint(task_id=task_id, goal="first"))
    with pytest.raises(ConflictError) as raised:
        any_checkpoint_store.save(Checkpoint(task_id=task_id, goal="second"))
    assert raised.value.actual == 1
    loaded = any_checkpoint_store.load(task_id)
    assert loaded is not None
    assert loaded.model_dump() == existing.model_dump()


def test_saving_a_version_that_was_never_stored_conflicts(
    any_checkpoint_store: CheckpointStore,
) -> None:
    task_id = _task_id()
    with pytest.raises(ConflictError):
        any_checkpoint_store.save(Checkpoint(task_id=task_id, version=3))
    assert any_checkpoint_store.load(task_id) is None


def test_newer_schema_version_is_refused_on_load(
    any_checkpoint_store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = _task_id()
    with monkeypatch.context() as newer_code:  # written as a newer release would write it
        newer_code.setattr(codec, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
        any_checkpoint_store.save(Checkpoint(task_id=task_id, schema_version=SCHEMA_VERSION + 1))
    with pytest.raises(UnsupportedSchemaVersionError) as raised:
        any_checkpoint_store.load(task_id)
    assert raised.value.found == SCHEMA_VERSION + 1


def test_a_save_of_a_newer_schema_version_is_refused_not_acknowledged(any_checkpoint_store: CheckpointStore) -> None:
    # It was acknowledged, and the next load refused it (an outside round): the rule is
    # that no save is acknowledged that a load would refuse.
    task_id = _task_id()
    with pytest.raises(UnstorableCheckpointError, match="schema_version cannot be stored: it is 999, newer than"):
        any_checkpoint_store.save(Checkpoint(task_id=task_id, schema_version=999))
    assert any_checkpoint_store.load(task_id) is None


@pytest.mark.parametrize(
    ("field", "value", "where", "kind"),
    [
        ("metadata", {"tags": {"a"}}, "metadata.tags", "set"),
        ("metadata", {"when": _dt.datetime(2020, 1, 1)}, "metadata.when", "datetime"),
        ("metadata", {"raw": b"x"}, "metadata.raw", "bytes"),
        ("artifacts", {"plan": {"steps": [1, frozenset({2})]}}, "artifacts.plan.steps.1", "frozenset"),
    ],
)
def test_a_value_json_has_no_type_for_is_refused_naming_its_place(
    any_checkpoint_store: CheckpointStore, field: str, value: Any, where: str, kind: str
) -> None:
    # memory:// saved a set as a list and a datetime as a text without a word, where the
    # durable stores refused it without naming the place (an outside round).
    task_id = _task_id()
    with pytest.raises(UnstorableCheckpointError, match=rf"at {re.escape(where)} cannot be stored: it holds a value of type {kind}"):
        any_checkpoint_store.save(Checkpoint(task_id=task_id, **{field: value}))
    assert any_checkpoint_store.load(task_id) is None
    # A tuple is written as the list it reads back as, as json.dumps writes it.
    saved = any_checkpoint_store.save(Checkpoint(task_id=task_id, metadata={"pair": (1, 2)}))
    assert saved.version == 1


def test_no_lost_update_with_concurrent_load_modify_save(
    any_checkpoint_store: CheckpointStore,
) -> None:
    task_id = _task_id()
    any_checkpoint_store.save(Checkpoint(task_id=task_id, artifacts={"counter": 0}))
    workers, increments_each, max_attempts = 4, 8, 400
    successes: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(workers)

    def work() -> None:
        try:
            start.wait(timeout=30)
            done = attempts = 0
            while done < increments_each and attempts < max_attempts:
                attempts += 1
                current = any_checkpoint_store.load(task_id)
                assert current is not None
                current.artifacts["counter"] += 1
                current.messages.append(_user(f"{threading.get_ident()}-{done}"))
                try:
                    any_checkpoint_store.save(current)
                except ConflictError:
                    continue
                done += 1
            with lock:
                successes.append(done)
        except BaseException as exc:  # report worker failures in the main thread
            with lock:
                failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    final = any_checkpoint_store.load(task_id)
    assert final is not None
    assert final.artifacts["counter"] == sum(successes) == workers * increments_each
    assert final.version == 1 + sum(successes)
    # Every successful save's message survived, once.
    assert len(final.messages) == len(set(m["content"] for m in final.messages)) == sum(successes)


# -- no aliasing -------------------------------------------------------------------------


def test_mutating_a_loaded_checkpoint_does_not_change_the_store(
    any_checkpoint_store: CheckpointStore,
) -> None:
    task_id = _task_id()
    any_checkpoint_store.save(
        Checkpoint(task_id=task_id, messages=[_assistant("a")], metadata={"tags": ["x"]})
    )
    loaded = any_checkpoint_store.load(task_id)
    assert loaded is not None
    loaded.messages[0]["content"][0]["text"] = "mutated"
    loaded.messages.append(_user("extra"))
    loaded.metadata["tags"].append("y")
    again = any_checkpoint_store.load(task_id)
    assert again is not None
    assert again.messages == [_assistant("a")]
    assert again.metadata == {"tags": ["x"]}


def test_mutating_a_saved_checkpoint_does_not_change_the_store(
    any_checkpoint_store: CheckpointStore,
) -> None:
    task_id = _task_id()
    original = Checkpoint(task_id=task_id, messages=[_assistant("a")], artifacts={"k": [1]})
    returned = any_checkpoint_store.save(original)
    original.messages[0]["content"][0]["text"] = "changed via the argument"
    original.artifacts["k"].append(2)
    returned.messages.append(_user("appended via the result"))
    loaded = any_checkpoint_store.load(task_id)
    assert loaded is not None
    assert loaded.messages == [_assistant("a")]
    assert loaded.artifacts == {"k": [1]}


def test_in_place_edit_of_a_saved_prefix_is_detected_on_the_next_save(
    any_checkpoint_store: CheckpointStore,
) -> None:
    # The store must remember what it wrote, not the caller's (mutable) objects.
    checkpoint = any_checkpoint_store.save(
        Checkpoint(task_id=_task_id(), messages=[_assistant("one"), _user("two")])
    )
    checkpoint.messages[0]["content"][0]["text"] = "edited in place"
    checkpoint.messages.append(_assistant("three"))
    any_checkpoint_store.save(checkpoint)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert loaded is not None
    assert loaded.messages == [_assistant("edited in place"), _user("two"), _assistant("three")]


def test_in_place_edit_of_a_loaded_prefix_is_detected_on_the_next_save(
    any_checkpoint_store: CheckpointStore,
) -> None:
    # The load's snapshot is made while decoding: it must not be the caller's objects.
    first = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                                "input": {"path": "a", "deep": [[["x"]]]}}]}
    saved = any_checkpoint_store.save(
        Checkpoint(task_id=_task_id(), messages=[first, _user("two")])
    )
    loaded = any_checkpoint_store.load(saved.task_id)
    assert loaded is not None
    loaded.messages[0]["content"][0]["input"]["deep"][0][0][0] = "edited after the load"
    loaded.messages.append(_assistant("three"))
    any_checkpoint_store.save(loaded)
    again = any_checkpoint_store.load(saved.task_id)
    assert again is not None
    assert again.messages[0]["content"][0]["input"]["deep"] == [[["edited after the load"]]]
    assert again.messages[1:] == [_user("two"), _assistant("three")]


def test_in_place_edit_after_a_second_load_of_the_same_version_is_detected(
    any_checkpoint_store: CheckpointStore,
) -> None:
    # A store that loads a version it already holds keeps its snapshot and copies nothing:
    # the objects each load returns are still its own, and an edit of them still shows.
    saved = any_checkpoint_store.save(
        Checkpoint(task_id=_task_id(), messages=[_assistant("one"), _user("two")])
    )
    first = any_checkpoint_store.load(saved.task_id)
    second = any_checkpoint_store.load(saved.task_id)
    assert first is not None and second is not None
    assert first.messages[0] is not second.messages[0]
    first.messages[0]["content"][0]["text"] = "edited in the first, never saved"
    second.messages[1]["content"] = "edited in the second"
    second.messages.append(_assistant("three"))
    any_checkpoint_store.save(second)
    again = any_checkpoint_store.load(saved.task_id)
    assert again is not None
    assert again.messages == [_assistant("one"), _user("edited in the second"), _assistant("three")]


def test_in_place_edit_of_a_deeply_nested_loaded_message_is_detected(
    any_checkpoint_store: CheckpointStore,
) -> None:
    # Deeper than the recursive copy goes (64 levels): the stack-based copy is used.
    deep: Any = ["leaf"]
    for _ in range(100):
        deep = [deep]
    message = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                            "content": "r", "data": deep}]}
    saved = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), messages=[message]))
    loaded = any_checkpoint_store.load(saved.task_id)
    assert loaded is not None
    inner = loaded.messages[0]["content"][0]["data"]
    for _ in range(100):
        inner = inner[0]
    inner[0] = "edited"
    loaded.messages.append(_assistant("next"))
    any_checkpoint_store.save(loaded)
    again = any_checkpoint_store.load(saved.task_id)
    assert again is not None
    assert again.messages == loaded.messages
    assert again.messages[0] != message


# -- incremental saves -------------------------------------------------------------------


def test_appends_over_many_saves_store_exactly_the_checkpoint_history(
    any_checkpoint_store: CheckpointStore,
) -> None:
    checkpoint = any_checkpoint_store.save(Checkpoint(task_id=_task_id()))
    for step in range(25):
        checkpoint.messages.append(_assistant(f"call {step}"))
        checkpoint.messages.append(_user(f"result {step} " + "r" * step))
        checkpoint.iteration = step + 1
        checkpoint = any_checkpoint_store.save(checkpoint)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert loaded is not None
    assert loaded.messages == checkpoint.messages
    assert len(loaded.messages) == 50
    assert (loaded.version, loaded.iteration) == (26, 25)


def test_changed_prefix_is_rewritten(any_checkpoint_store: CheckpointStore) -> None:
    checkpoint = any_checkpoint_store.save(
        Checkpoint(task_id=_task_id(), messages=[_user("q"), _assistant("a1"), _user("r1")])
    )
    replaced = checkpoint.model_copy(deep=True)
    replaced.messages[1] = _assistant("a1, edited")
    replaced.messages.append(_assistant("a2"))
    replaced = any_checkpoint_store.save(replaced)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert loaded is not None
    assert loaded.messages == [_user("q"), _assistant("a1, edited"), _user("r1"), _assistant("a2")]


def test_shortened_history_is_stored_short(any_checkpoint_store: CheckpointStore) -> None:
    checkpoint = any_checkpoint_store.save(
        Checkpoint(task_id=_task_id(), messages=[_user("q"), _assistant("a"), _user("r")])
    )
    checkpoint.messages = checkpoint.messages[:1]
    any_checkpoint_store.save(checkpoint)
    loaded = any_checkpoint_store.load(checkpoint.task_id)
    assert loaded is not None
    assert loaded.messages == [_user("q")]


@_store_settings
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(min_value=0, max_value=3)),
            st.tuples(st.just("edit"), st.integers(min_value=0, max_value=20)),
            st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=20)),
            st.tuples(st.just("reload"), st.just(0)),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_any_sequence_of_history_changes_loads_back_exactly(
    any_checkpoint_store: CheckpointStore, steps: list[tuple[str, int]]
) -> None:
    checkpoint = any_checkpoint_store.save(Checkpoint(task_id=_task_id()))
    counter = 0
    for kind, n in steps:
        if kind == "append":
            for _ in range(n):
                counter += 1
                checkpoint.messages.append(_user(f"m{counter}"))
        elif kind == "edit" and checkpoint.messages:
            checkpoint.messages[n % len(checkpoint.messages)] = _assistant(f"edit{counter}")
            counter += 1
        elif kind == "truncate":
            checkpoint.messages = checkpoint.messages[: n % (len(checkpoint.messages) + 1)]
        elif kind == "reload":
            reloaded = any_checkpoint_store.load(checkpoint.task_id)
            assert reloaded is not None
            checkpoint = reloaded
        checkpoint = any_checkpoint_store.save(checkpoint)
        loaded = any_checkpoint_store.load(checkpoint.task_id)
        assert loaded is not None
        assert loaded.messages == checkpoint.messages


def test_delete_and_recreate_never_mixes_histories_with_a_stale_tracker(
    any_checkpoint_store: CheckpointStore, second_store: CheckpointStore
) -> None:
    task_id = _task_id()
    old = Checkpoint(task_id=task_id, messages=[_user("old 0"), _assistant("old 1")])
    old = any_checkpoint_store.save(old)
    old.messages.append(_user("old 2"))
    old = any_checkpoint_store.save(old)  # the first store now tracks 3 messages at v2

    # Another worker deletes the task and builds a new one up to the same version.
    second_store.delete(task_id)
    new = second_store.save(Checkpoint(task_id=task_id, messages=[_user("new 0")]))
    new.messages += [_assistant("new 1"), _user("new 2")]
    new = second_store.save(new)
    assert new.version == old.version == 2

    # The first store's next save looks like a 1-message append to what it tracked.
    old.messages.append(_assistant("old 3"))
    any_checkpoint_store.save(old)
    loaded = second_store.load(task_id)
    assert loaded is not None
    assert loaded.messages == [
        _user("old 0"),
        _assistant("old 1"),
        _user("old 2"),
        _assistant("old 3"),
    ]


def test_a_second_store_sees_appends_made_by_the_first(
    any_checkpoint_store: CheckpointStore, second_store: CheckpointStore
) -> None:
    checkpoint = any_checkpoint_store.save(Checkpoint(task_id=_task_id(), messages=[_user("0")]))
    for i in range(1, 4):
        checkpoint.messages.append(_user(str(i)))
        checkpoint = any_checkpoint_store.save(checkpoint)
        seen = second_store.load(checkpoint.task_id)
        assert seen is not None
        assert seen.messages == checkpoint.messages
    # ...and the first store's next append lands after the second store's.
    seen.messages.append(_user("from second"))
    second_store.save(seen)
    with pytest.raises(ConflictError):
        any_checkpoint_store.save(checkpoint)
    fresh = any_checkpoint_store.load(checkpoint.task_id)
    assert fresh is not None
    fresh.messages.append(_user("from first"))
    any_checkpoint_store.save(fresh)
    final = second_store.load(checkpoint.task_id)
    assert final is not None
    assert [m["content"] for m in final.messages] == [
        "0",
        "1",
        "2",
        "3",
        "from second",
        "from first",
    ]


# -- delete and list ---------------------------------------------------------------------


def test_delete_is_idempotent_and_allows_recreating(any_checkpoint_store: CheckpointStore) -> None:
    task_id = _task_id()
    any_checkpoint_store.delete(task_id)  # missing: not an error
    any_checkpoint_store.save(Checkpoint(task_id=task_id, messages=[_user("old")]))
    any_checkpoint_store.delete(task_id)
    any_checkpoint_store.delete(task_id)
    assert any_checkpoint_store.load(task_id) is None
    assert any_checkpoint_store.list_checkpoints() == []
    recreated = any_checkpoint_store.save(Checkpoint(task_id=task_id, messages=[_user("new")]))
    assert recreated.version == 1
    loaded = any_checkpoint_store.load(task_id)
    assert loaded is not None
    assert loaded.messages == [_user("new")]


def test_list_filters_by_status_and_metadata_in_task_id_order(
    any_checkpoint_store: CheckpointStore,
) -> None:
    specs = [
        ("c-task", "running", {"user": "u1", "team": {"id": 7}}),
        ("a-task", "completed", {"user": "u1"}),
        ("b-task", "running", {"user": "u2", "big": 2**60}),
        ("d-task", "failed", {}),
    ]
    for task_id, status, metadata in specs:
        any_checkpoint_store.save(Checkpoint(task_id=task_id, status=status, metadata=metadata))  # type: ignore[arg-type]
    updated = any_checkpoint_store.load("b-task")
    assert updated is not None
    any_checkpoint_store.save(updated.model_copy(update={"iteration": 3}))

    every = any_checkpoint_store.list_checkpoints()
    assert [s.task_id for s in every] == ["a-task", "b-task", "c-task", "d-task"]
    b = every[1]
    assert (b.status, b.iteration, b.version, b.metadata) == (
        "running",
        3,
        2,
        {"user": "u2", "big": 2**60},
    )

    running = any_checkpoint_store.list_checkpoints(status="running")
    assert [s.task_id for s in running] == ["b-task", "c-task"]
    by_user = any_checkpoint_store.list_checkpoints(metadata={"user": "u1"})
    assert [s.task_id for s in by_user] == ["a-task", "c-task"]
    both = any_checkpoint_store.list_checkpoints(status="running", metadata={"user": "u1"})
    assert [s.task_id for s in both] == ["c-task"]
    nested = any_checkpoint_store.list_checkpoints(metadata={"team": {"id": 7}})
    assert [s.task_id for s in nested] == ["c-task"]
    big = any_checkpoint_store.list_checkpoints(metadata={"big": 2**60})
    assert [s.task_id for s in big] == ["b-task"]
    assert any_checkpoint_store.list_checkpoints(metadata={"user": "nobody"}) == []
    assert any_checkpoint_store.list_checkpoints(metadata={"absent": None}) == []


def test_a_listing_asked_to_report_unreadable_heads_lists_the_others(
    any_checkpoint_store: CheckpointStore,
) -> None:
    from pytest_agentckpt.certify.hooks import hooks_for
    from stores import CorruptCheckpointError

    for task_id in ("a-good", "b-corrupt", "c-newer", "d-good"):
        any_checkpoint_store.save(Checkpoint(task_id=task_id, status="completed"))
    hooks = hooks_for(any_checkpoint_store)
    assert hooks.corrupt is not None and hooks.bump_schema is not None
    hooks.corrupt("b-corrupt")
    hooks.bump_schema("c-newer")

    # Without on_unreadable a listing still raises: damage is never reported as absence.
    with pytest.raises(CorruptCheckpointError):
        any_checkpoint_store.list_checkpoints()
    unreadable: list[Exception] = []
    listed = any_checkpoint_store.list_checkpoints(on_unreadable=unreadable.append)  # type: ignore[call-arg]
    assert [s.task_id for s in listed] == ["a-good", "d-good"]
    assert [(type(e), e.task_id) for e in unreadable] == [  # type: ignore[attr-defined]
        (CorruptCheckpointError, "b-corrupt"),
        (UnsupportedSchemaVersionError, "c-newer"),
    ]
    unreadable.clear()
    done = any_checkpoint_store.list_checkpoints(status="completed", on_unreadable=unreadable.append)  # type: ignore[call-arg]
    assert [s.task_id for s in done] == ["a-good", "d-good"]
    assert {e.task_id for e in unreadable} == {"b-corrupt", "c-newer"}  # type: ignore[attr-defined]


def test_info_names_the_backend(
    any_checkpoint_store: CheckpointStore, any_checkpoint_store_backend: str
) -> None:
    info = any_checkpoint_store.info()
    assert any_checkpoint_store_backend.split("-")[0] == info.backend
    assert info.incremental is True


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"status": "complete"}, ValueError, "status must be one of 'running', 'completed', 'failed' or None, not 'complete'"),
        ({"status": 5}, ValueError, "status must be one of"),
        ({"metadata": "x"}, TypeError, "metadata must be a mapping of text keys"),
        ({"metadata": {1: "x"}}, TypeError, "metadata must be a mapping of text keys"),
        ({"on_unreadable": 5}, TypeError, "on_unreadable must be a function"),
    ],
)
def test_a_listing_filter_no_checkpoint_can_match_is_refused_not_answered_empty(
    any_checkpoint_store: CheckpointStore, kwargs: dict[str, Any], error: type[Exception], says: str
) -> None:
    # A typo listed nothing without a word; status=5 came back from PostgreSQL as an
    # outage; metadata="x" was an AttributeError or another error on each backend.
    any_checkpoint_store.save(Checkpoint(task_id=_task_id(), status="completed"))
    with pytest.raises(error, match=re.escape(says)):
        any_checkpoint_store.list_checkpoints(**kwargs)


@pytest.mark.parametrize("given", [None, {"task_id": "x"}, "x"])
def test_save_of_something_that_is_not_a_checkpoint_says_what_it_takes(
    any_checkpoint_store: CheckpointStore, given: Any
) -> None:
    with pytest.raises(TypeError, match=r"save takes a Checkpoint .*, not (NoneType|dict|str)"):
        any_checkpoint_store.save(given)


def test_bytes_that_are_not_utf8_are_refused_naming_their_place(any_checkpoint_store: CheckpointStore) -> None:
    # A raw UnicodeDecodeError from pydantic's serializer (an outside round).
    with pytest.raises(UnstorableCheckpointError, match=r"at metadata\.raw cannot be stored: it holds a value of type bytes"):
        any_checkpoint_store.save(Checkpoint(task_id=_task_id(), metadata={"raw": b"\xff"}))

