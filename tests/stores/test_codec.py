"""The one serializer: strict JSON, clear errors, damage never read as absence."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stores import (
    Checkpoint,
    CorruptCheckpointError,
    UnstorableCheckpointError,
    UnsupportedSchemaVersionError,
)
from stores.checkpoint import SCHEMA_VERSION
from stores.codec import decode_checkpoint, decode_summary, dumps, encode_head, encode_messages


def test_dumps_is_compact_utf8_and_keeps_big_integers() -> None:
    data = {"n": 2**64 + 1, "s": "héllo 🎉"}
    raw = dumps(data)
    assert raw == '{"n":18446744073709551617,"s":"héllo 🎉"}'.encode()
    assert json.loads(raw) == data


def test_dumps_rejects_lone_surrogate_naming_its_place() -> None:
    with pytest.raises(ValueError, match=r"at messages\.1\.content .*lone surrogate"):
        dumps({"messages": [{"content": "ok"}, {"content": "bad \ud800"}]})


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_dumps_rejects_non_finite_floats(value: float) -> None:
    with pytest.raises(ValueError, match=r"at x cannot be stored: it holds (nan|inf)"):
        dumps({"x": value})


def test_dumps_rejects_objects_that_are_not_json() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        dumps({"x": object()})


def _stored(cp: Checkpoint) -> tuple[bytes, list[bytes]]:
    return encode_head(cp), encode_messages(cp.messages)


def test_decode_round_trips_head_and_messages() -> None:
    cp = Checkpoint(
        task_id="t", goal="g", messages=[{"role": "user", "content": "hi"}], iteration=3
    )
    head, messages = _stored(cp)
    assert decode_checkpoint("t", head, messages) == cp


def test_decode_reports_invalid_json_as_corrupt() -> None:
    with pytest.raises(CorruptCheckpointError, match="not valid JSON"):
        decode_checkpoint("t", b"{not json", [])


def test_decode_reports_a_message_that_is_not_an_object_as_corrupt() -> None:
    head, _ = _stored(Checkpoint(task_id="t"))
    with pytest.raises(CorruptCheckpointError, match="message 0 is not a JSON object"):
        decode_checkpoint("t", head, [b"[1, 2]"])


def test_decode_reports_schema_mismatch_as_corrupt() -> None:
    head = json.loads(encode_head(Checkpoint(task_id="t")))
    head["iteration"] = "many"
    with pytest.raises(CorruptCheckpointError, match="does not match the checkpoint schema"):
        decode_checkpoint("t", dumps(head), [])


def test_decode_refuses_a_newer_schema_version_without_reading_it() -> None:
    head = json.loads(encode_head(Checkpoint(task_id="t")))
    head["schema_version"] = SCHEMA_VERSION + 1
    head["a_field_from_the_future"] = True
    with pytest.raises(UnsupportedSchemaVersionError, match="upgrade pytest-agentckpt"):
        decode_checkpoint("t", dumps(head), [])


def test_decode_refuses_a_head_stored_under_another_task() -> None:
    head, _ = _stored(Checkpoint(task_id="other"))
    with pytest.raises(CorruptCheckpointError, match="belongs to task 'other'"):
        decode_checkpoint("t", head, [])


def test_summary_comes_from_the_head_alone() -> None:
    cp = Checkpoint(task_id="t", status="completed", iteration=9, metadata={"user": "u1"})
    summary = decode_summary("t", encode_head(cp))
    assert (summary.status, summary.iteration, summary.metadata) == ("completed", 9, {"user": "u1"})


# -- the head's fast path: the same JSON as dumps(model_dump(mode="json")) ---------------
def _slow_head(cp: Checkpoint) -> bytes:
    return dumps(cp.model_dump(mode="json", exclude={"messages"}))


def _decoded(encode: Callable[[Checkpoint], bytes], cp: Checkpoint) -> object:
    try:
        return json.loads(encode(cp))
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize(
    "value",
    [
        1e-07, 1.5e-05, 9.999999e-05, 1e-300, 5e-324, 1.00001, 0.1, 1e16, -1e22, -0.0, 2**70,
        "fuzz-3e-1 and 0.00001 in a string", 'quote \\" e-1', "\x00\x1f\x7f\u2028 é 🎉",
        {1: "int key"}, {True: 1, None: 2, 1.5: 3}, {"s": {3}}, b"bytes", [1e-5, "e-", {"x": 1e-9}],
        float("nan"), float("inf"),
    ],
)
def test_encode_head_gives_the_json_of_the_slow_encoding(value: object) -> None:
    from stores.checkpoint import ActionRecord, RecordedResult

    cp = Checkpoint(
        task_id="fuzz-ab3e-1",
        goal="go",
        messages=[{"role": "user", "content": "m"}],
        artifacts={"toolu_1": {"tool": "send", "result": value}},
        actions=[
            ActionRecord(
                tool_use_id="toolu_1", tool_name="send", input={"v": value}, idempotency_key="k",
                state="done", result=RecordedResult(content="ok"),
            )
        ],
        metadata={"v": value},
        iteration=2,
    )
    if isinstance(value, float) and not math.isfinite(value):
        # Refused by both (each names one of the three places that hold it); pydantic's
        # own JSON would have written null, a changed value stored without a word.
        for encode in (encode_head, _slow_head):
            with pytest.raises(UnstorableCheckpointError, match="which JSON cannot carry"):
                encode(cp)
        return
    if isinstance(value, bytes) or value == {"s": {3}}:
        # JSON has no type for a set or bytes: pydantic's JSON writes a list or a text in
        # their place, a changed value the load would give back. Refused, named.
        with pytest.raises(UnstorableCheckpointError, match=r"at (metadata|artifacts|actions)\.\S+ cannot be stored: it holds a value of type (set|bytes)"):
            encode_head(cp)
        return
    assert _decoded(encode_head, cp) == _decoded(_slow_head, cp)


def test_encode_head_matches_the_slow_encoding_on_random_data() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
    values = st.recursive(
        leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=12,
    )

    @settings(max_examples=300, deadline=None)
    @given(goal=st.text(), metadata=st.dictionaries(st.text(), values, max_size=4))
    def check(goal: str, metadata: dict[str, object]) -> None:
        cp = Checkpoint(task_id="t", goal=goal, metadata=metadata)
        assert _decoded(encode_head, cp) == _decoded(_slow_head, cp)

    check()


def test_encode_head_still_names_a_lone_surrogate() -> None:
    cp = Checkpoint(task_id="t", metadata={"note": "bad \ud800"})
    with pytest.raises(ValueError, match=r"at metadata\.note .*lone surrogate"):
        encode_head(cp)


def test_encode_head_takes_the_fast_path_for_a_typical_head(monkeypatch: pytest.MonkeyPatch) -> None:
    import stores.codec

    cp = Checkpoint(
        task_id="fuzz-0a1b2c3e-17",
        goal="Carry out the task.",
        metadata={"reference_agent": {"model": "claude-sonnet-5-5", "last_stop_reason": "tool_use"}},
    )
    expected = _slow_head(cp)

    def slow(value: object) -> bytes:
        raise AssertionError("the slow encoding was used")

    monkeypatch.setattr(stores.codec, "dumps", slow)
    assert encode_head(cp) == expected


# -- the fast decode path: exactly json.loads, or the careful path ------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"role":"user","content":"plain"}', id="our-encoding"),
        pytest.param(b' {"role": "user", "content": "spaced"}\n', id="whitespace"),
        pytest.param(b'{"role":"user","content":"\\ud800 escaped lone surrogate"}', id="escaped"),
        pytest.param('{"role":"user","content":"é 🎉"}'.encode(), id="utf8"),
        pytest.param(b'{"role":"user","content":"big","n":123456789012345678901234567890}', id="bigint"),
        pytest.param(b'{"role":"user","content":"dup","content":"last wins"}', id="duplicate-key"),
    ],
)
def test_a_stored_message_decodes_exactly_as_json_loads(raw: bytes) -> None:
    cp = Checkpoint(task_id="t")
    copies: list[object] = []
    decoded = decode_checkpoint("t", encode_head(cp), [raw], copies=copies)
    assert decoded.messages == [json.loads(raw)]
    assert copies == decoded.messages


def test_a_message_with_raw_surrogate_bytes_takes_the_careful_path() -> None:
    # Not valid UTF-8 (what the surrogatepass handler reads): decoded as json.loads does.
    raw = b'{"role":"user","content":"\xed\xa0\x80"}'
    decoded = decode_checkpoint("t", encode_head(Checkpoint(task_id="t")), [raw])
    assert decoded.messages == [json.loads(raw)]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"role":"user"}x', id="trailing-garbage"),
        pytest.param(b'{"role":"user"}{"role":"user"}', id="two-values"),
        pytest.param(b'{"role":"user"', id="truncated"),
        pytest.param(b"", id="empty"),
    ],
)
def test_damage_the_fast_path_does_not_take_is_still_corrupt_naming_the_message(raw: bytes) -> None:
    head = encode_head(Checkpoint(task_id="t"))
    with pytest.raises(CorruptCheckpointError, match="message 1"):
        decode_checkpoint("t", head, [b'{"role":"user","content":"ok"}', raw])


def test_load_copies_share_leaves_but_no_container_with_the_loaded_messages() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "x" * 100, "n": [1, [2]]}]}
    copies: list[dict[str, object]] = []
    decoded = decode_checkpoint(
        "t", encode_head(Checkpoint(task_id="t")), encode_messages([message]), copies=copies
    )
    (loaded,), (copy,) = decoded.messages, copies
    assert copy == loaded == message
    assert copy is not loaded
    assert copy["content"] is not loaded["content"]
    assert copy["content"][0] is not loaded["content"][0]  # type: ignore[index]
    assert copy["content"][0]["n"] is not loaded["content"][0]["n"]  # type: ignore[index]
    assert copy["content"][0]["n"][1] is not loaded["content"][0]["n"][1]  # type: ignore[index]
    assert copy["content"][0]["text"] is loaded["content"][0]["text"]  # type: ignore[index]


def test_load_copies_of_a_message_deeper_than_the_recursive_walk_are_made_by_the_stack() -> None:
    deep: object = "leaf"
    for _ in range(200):  # within the 250 limit, beyond the recursive copy's 64 levels
        deep = [deep]
    message = {"role": "user", "content": [{"type": "tool_result", "content": "x", "data": deep}]}
    copies: list[object] = []
    decoded = decode_checkpoint(
        "t", encode_head(Checkpoint(task_id="t")), encode_messages([message]), copies=copies
    )
    assert copies == decoded.messages == [message]
    a, b = copies[0]["content"][0]["data"], decoded.messages[0]["content"][0]["data"]  # type: ignore[index]
    for _ in range(200):
        assert a is not b
        a, b = a[0], b[0]


# -- the schema check at save: skipped only for a head that is plainly valid ----------------


def test_the_plain_check_knows_every_field_of_the_models() -> None:
    # A field added to a model without a rule in _plainly_valid would be let through with
    # whatever it holds: this holds its list of fields to the models'.
    from stores.codec import _PLAINLY_CHECKED

    for model, known in _PLAINLY_CHECKED.items():
        assert set(model.model_fields) == known, model.__name__


def _typical_checkpoint() -> Checkpoint:
    return Checkpoint.model_validate(
        {
            "task_id": "t-1",
            "goal": "g",
            "completed_tasks": ["a"],
            "iteration": 3,
            "final_answer": "done",
            "status": "completed",
            "metadata": {"m": [1, {"x": None}]},
            "actions": [
                {"tool_use_id": "toolu_1", "tool_name": "w", "input": {"k": 1}, "idempotency_key": "i"},
                {
                    "tool_use_id": "toolu_2",
                    "tool_name": "w",
                    "input": {},
                    "idempotency_key": "j",
                    "state": "done",
                    "result": {"content": [{"type": "text", "text": "ok"}], "is_error": True},
                },
            ],
        }
    )


def test_a_validated_checkpoint_skips_the_schema_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import stores.codec

    checked: list[bytes] = []
    monkeypatch.setattr(stores.codec, "_check_schema", checked.append)
    encode_head(_typical_checkpoint())
    assert checked == []
    bad = _typical_checkpoint().model_copy(update={"iteration": True})
    encode_head(bad)
    assert len(checked) == 1


_ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.sampled_from(["running", "completed", "failed", "intent", "done", "unknown", ""]),
    st.lists(st.one_of(st.text(max_size=2), st.integers(0, 2), st.dictionaries(st.text(max_size=2), st.none())), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(0, 2), max_size=2),
    st.datetimes(),
    st.dates(),
)
_HEAD_FIELDS = sorted(set(Checkpoint.model_fields) - {"messages"})
_ACTION_FIELDS = ["tool_use_id", "tool_name", "input", "idempotency_key", "state", "result", "recorded_at"]


@settings(max_examples=300, deadline=None)
@given(
    field=st.sampled_from(_HEAD_FIELDS),
    action_field=st.sampled_from([*_ACTION_FIELDS, "content", "is_error"]),
    where=st.sampled_from(["head", "action"]),
    value=_ODD_VALUES,
)
def test_a_head_the_plain_check_passes_is_one_the_schema_accepts(
    field: str, action_field: str, where: str, value: object
) -> None:
    # Whatever a model_copy(update=...) or an assignment puts in a field: when the plain
    # check lets the head through, the full validation a load makes accepts it.
    from stores.codec import _plainly_valid

    cp = _typical_checkpoint()
    if where == "head":
        cp = cp.model_copy(update={field: value})
    elif action_field in ("content", "is_error"):
        result = cp.actions[1].result
        assert result is not None
        cp.actions[1] = cp.actions[1].model_copy(update={"result": result.model_copy(update={action_field: value})})
    else:
        cp.actions[0] = cp.actions[0].model_copy(update={action_field: value})
    try:
        head = cp.__pydantic_serializer__.to_json(cp, exclude={"messages"}, warnings=False)
    except Exception:
        return  # the encoder refuses it before any check
    if _plainly_valid(cp):
        Checkpoint.__pydantic_validator__.validate_json(head)


def test_a_refused_create_whose_version_was_not_read_does_not_say_no_checkpoint() -> None:
    # An outside round's store passed None for the version it could not read (an insert
    # that hit the unique key): the message said "already exists (no checkpoint)".
    from stores import ConflictError

    assert "already exists (its version was not read)" in str(ConflictError("t", 0, None))
    assert "already exists (version 3)" in str(ConflictError("t", 0, 3))
    assert "is not stored (deleted, or never saved), expected version 2" in str(ConflictError("t", 2, None))
