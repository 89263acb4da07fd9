"""Incremental saves: append the suffix only when the stored prefix is unchanged."""

from __future__ import annotations

import json

from stores import Checkpoint
from stores.incremental import PrefixTracker
from stores.memory import MemoryStore


def _msg(i: int) -> dict[str, object]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}


def test_first_save_of_a_task_rewrites_with_a_new_lineage() -> None:
    tracker = PrefixTracker()
    plan = tracker.plan(Checkpoint(task_id="t", messages=[_msg(0)]))
    assert plan.rewrite and plan.start == 0 and len(plan.encoded) == 1 and plan.lineage


def test_grown_history_appends_only_the_suffix() -> None:
    tracker = PrefixTracker()
    cp = Checkpoint(task_id="t", messages=[_msg(0), _msg(1)])
    first = tracker.plan(cp)
    tracker.saved("t", 1, first, cp.messages)
    grown = cp.model_copy(update={"version": 1, "messages": [*cp.messages, _msg(2)]})
    plan = tracker.plan(grown)
    assert not plan.rewrite
    assert (plan.start, [json.loads(raw) for raw in plan.encoded]) == (2, [_msg(2)])
    assert plan.lineage == first.lineage


def test_changed_prefix_is_detected_and_rewritten() -> None:
    tracker = PrefixTracker()
    cp = Checkpoint(task_id="t", messages=[_msg(0), _msg(1)])
    tracker.saved("t", 1, tracker.plan(cp), cp.messages)
    changed = [dict(_msg(0), content="edited"), _msg(1), _msg(2)]
    plan = tracker.plan(cp.model_copy(update={"version": 1, "messages": changed}))
    assert plan.rewrite and plan.start == 0 and len(plan.encoded) == 3


def test_snapshot_is_not_fooled_by_mutating_the_saved_objects() -> None:
    tracker = PrefixTracker()
    messages = [_msg(0)]
    cp = Checkpoint(task_id="t", messages=messages)
    tracker.saved("t", 1, tracker.plan(cp), cp.messages)
    messages[0]["content"] = "mutated after the save"
    plan = tracker.plan(Checkpoint(task_id="t", messages=messages, version=1))
    assert plan.rewrite


def test_unknown_version_rewrites() -> None:
    tracker = PrefixTracker()
    cp = Checkpoint(task_id="t", messages=[_msg(0)])
    tracker.saved("t", 1, tracker.plan(cp), cp.messages)
    plan = tracker.plan(Checkpoint(task_id="t", messages=[_msg(0), _msg(1)], version=5))
    assert plan.rewrite


def test_tracker_is_bounded() -> None:
    tracker = PrefixTracker(max_tasks=2)
    for name in ("a", "b", "c"):
        cp = Checkpoint(task_id=name, messages=[_msg(0)])
        tracker.saved(name, 1, tracker.plan(cp), cp.messages)
    grown = [_msg(0), _msg(1)]
    assert tracker.plan(Checkpoint(task_id="a", messages=grown, version=1)).rewrite
    assert not tracker.plan(Checkpoint(task_id="c", messages=grown, version=1)).rewrite


def test_bytes_written_grow_linearly_with_the_history() -> None:
    store = MemoryStore()
    cp = Checkpoint(task_id="t")
    payload = "x" * 2000
    for i in range(200):
        cp.messages.append({"role": "assistant", "content": f"{i} {payload}"})
        cp.messages.append({"role": "user", "content": f"{i} {payload}"})
        cp = store.save(cp)
    incremental = store.bytes_written
    full_snapshots = sum(2 * (i + 1) * 2000 for i in range(200))
    assert incremental < full_snapshots / 50
    loaded = store.load("t")
    assert loaded is not None and loaded.messages == cp.messages


def test_snapshot_detects_mutation_deep_inside_a_saved_message() -> None:
    tracker = PrefixTracker()
    cp = Checkpoint(
        task_id="t",
        messages=[{"role": "user", "content": [{"type": "text", "text": "original"}]}],
    )
    tracker.saved("t", 1, tracker.plan(cp), cp.messages)
    cp.messages[0]["content"][0]["text"] = "edited in place"
    assert tracker.plan(cp.model_copy(update={"version": 1})).rewrite
    cp.messages[0]["content"].append({"type": "text", "text": "one more block"})
    assert tracker.plan(cp.model_copy(update={"version": 1})).rewrite


def test_the_snapshot_of_data_100000_deep_is_copied_without_recursion() -> None:
    from typing import Any

    from stores.codec import _skeleton

    leaf = "shared leaf"
    value: Any = leaf
    for level in range(100_000):
        value = [{"k": value}] if level % 3 else ({"t": (value, 1)},)
    copy = _skeleton(value)  # the recursive version raised RecursionError here
    # Walk both side by side: every container new, of the same type, every leaf shared.
    pending: list[tuple[Any, Any]] = [(value, copy)]
    seen = 0
    while pending:
        original, copied = pending.pop()
        if isinstance(original, dict):
            assert type(copied) is dict and copied is not original
            pending.extend(zip(original.values(), copied.values(), strict=True))
            seen += 1
        elif isinstance(original, list | tuple):
            assert type(copied) is type(original) and copied is not original
            assert len(copied) == len(original)
            pending.extend(zip(original, copied, strict=True))
            seen += 1
        else:
            assert copied is original
    assert seen == 200_000 + 100_000 // 3 + 1


def test_a_tracker_snapshot_is_never_an_alias_of_the_callers_tuples_or_lists() -> None:
    from stores.codec import _skeleton

    inner = [1, {"a": [2]}]
    value = {"x": (inner, ("y", [3])), "z": []}
    copy = _skeleton(value)
    assert copy == value
    inner[1]["a"].append(99)  # type: ignore[index]
    assert copy["x"][0][1]["a"] == [2]


def test_a_load_of_the_history_held_keeps_the_snapshot_and_copies_nothing() -> None:
    tracker = PrefixTracker()
    cp = Checkpoint(task_id="t", messages=[_msg(0), _msg(1)])
    plan = tracker.plan(cp)
    tracker.saved("t", 1, plan, cp.messages)
    held = tracker._known["t"].messages
    assert tracker.copies_for("t", 1, plan.lineage, 2) is None
    # Anything else needs the load's own copies: another version, lineage or length.
    assert tracker.copies_for("t", 2, plan.lineage, 2) == []
    assert tracker.copies_for("t", 1, "other", 2) == []
    assert tracker.copies_for("t", 1, plan.lineage, 3) == []
    assert tracker.copies_for("unknown", 1, plan.lineage, 2) == []
    decoded = [_msg(0), _msg(1)]
    tracker.loaded("t", 1, plan.lineage, decoded, copies=None)
    assert tracker._known["t"].messages is held
    # The caller's objects are never the snapshot: editing them is still detected.
    decoded[0]["content"] = "edited"
    assert tracker.plan(Checkpoint(task_id="t", messages=decoded, version=1)).rewrite


def test_a_load_without_copies_whose_snapshot_moved_on_copies_the_messages() -> None:
    # Between copies_for and loaded, another thread's save moved the snapshot on: the
    # load's history is then copied after all, never aliased.
    tracker = PrefixTracker()
    cp = Checkpoint(task_id="t", messages=[_msg(0)])
    plan = tracker.plan(cp)
    tracker.saved("t", 1, plan, cp.messages)
    assert tracker.copies_for("t", 1, plan.lineage, 1) is None
    grown = cp.model_copy(update={"version": 1, "messages": [_msg(0), _msg(1)]})
    tracker.saved("t", 2, tracker.plan(grown), grown.messages)
    decoded = [_msg(0)]
    tracker.loaded("t", 1, plan.lineage, decoded, copies=None)
    known = tracker._known["t"]
    assert (known.version, known.messages) == (1, [_msg(0)])
    assert known.messages[0] is not decoded[0]
    decoded[0]["content"] = "edited"
    assert tracker.plan(Checkpoint(task_id="t", messages=[*decoded, _msg(1)], version=1)).rewrite
