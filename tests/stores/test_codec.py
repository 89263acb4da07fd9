"""The one serializer: strict JSON, clear errors, damage never read as absence."""

from __future__ import annotations

import json

import pytest

from stores import Checkpoint, CorruptCheckpointError, UnsupportedSchemaVersionError
from stores.checkpoint import SCHEMA_VERSION
from stores.codec import decode_checkpoint, decode_summary, dumps, encode_head, encode_messages


def test_dumps_is_compact_utf8_and_keeps_big_integers() -> None:
    data = {"n": 2**64 + 1, "s": "héllo 🎉"}
    raw = dumps(data)
    assert raw == '{"n":18446744073709551617,"s":"héllo 🎉"}'.encode()
    assert json.loads(raw) == data


def test_dumps_rejects_lone_surrogate_naming_its_place() -> None:
    with pytest.raises(ValueError, match=r"lone surrogate at \$\.messages\[1\]\.content"):
        dumps({"messages": [{"content": "ok"}, {"content": "bad \ud800"}]})


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_dumps_rejects_non_finite_floats(value: float) -> None:
    with pytest.raises(ValueError, match="cannot be stored as JSON"):
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
