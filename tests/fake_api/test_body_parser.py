"""BodyParser: json.loads for request bodies that repeat the last one's messages."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reference_agent.offline_parse import BodyParser


def outcome(parse: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "value", parse(body)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def test_repeated_messages_are_not_parsed_again() -> None:
    parser = BodyParser()
    history = [{"role": "user", "content": "go"}]
    first = parser.parse(json.dumps({"max_tokens": 8, "messages": history, "model": "m"}).encode())
    history = [*history, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    second = parser.parse(json.dumps({"max_tokens": 8, "messages": history, "model": "m"}).encode())
    assert second == {"max_tokens": 8, "messages": history, "model": "m"}
    assert second["messages"][0] is first["messages"][0]


def test_a_changed_prefix_is_parsed_afresh() -> None:
    parser = BodyParser()
    parser.parse(b'{"messages":[{"a":1},{"b":2}]}')
    edited = parser.parse(b'{"messages":[{"a":1},{"b":3},{"c":4}]}')
    assert edited == {"messages": [{"a": 1}, {"b": 3}, {"c": 4}]}
    # A number the last body ended a message with, continued: not the same value.
    parser.parse(b'{"messages":[1]}')
    assert parser.parse(b'{"messages":[12]}') == {"messages": [12]}
    assert parser.parse(b'{"messages":[1.5,2]}') == {"messages": [1.5, 2]}


def test_what_json_loads_refuses_it_refuses_alike() -> None:
    parser = BodyParser()
    parser.parse(b'{"messages":[{"a":1}]}')
    for body in (b"", b"null", b"[1]", b'{"messages":[{"a":1},]}', b'{"messages":[{"a":1}]} x', b"\xff"):
        assert outcome(parser.parse, body) == outcome(json.loads, body)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 50) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def bodies(draw: st.DrawFn) -> list[bytes]:
    """A series of bodies: messages that grow, change or shrink, in several spellings."""
    out = []
    messages: list[Any] = []
    for _ in range(draw(st.integers(1, 6))):
        action = draw(st.sampled_from(["grow", "grow", "edit", "cut", "raw"]))
        if action == "grow" or not messages:
            messages = [*messages, *draw(st.lists(_JSON, min_size=1, max_size=3))]
        elif action == "edit":
            messages = list(messages)
            messages[draw(st.integers(0, len(messages) - 1))] = draw(_JSON)
        elif action == "cut":
            messages = messages[: draw(st.integers(0, len(messages) - 1))]
        fields = draw(st.dictionaries(st.sampled_from(["model", "max_tokens", "x"]), _JSON, max_size=2))
        body: Any = {**fields, "messages": messages} if draw(st.booleans()) else {"messages": messages, **fields}
        separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " :")]))
        encoded = json.dumps(body, separators=separators, ensure_ascii=draw(st.booleans())).encode()
        if action == "raw":
            # A byte edited anywhere: invalid JSON, or another value.
            position = draw(st.integers(0, len(encoded) - 1))
            encoded = encoded[:position] + draw(st.sampled_from([b"1", b",", b"]", b"}", b" ", b'"'])) + encoded[position + 1 :]
        out.append(encoded)
    return out


@settings(max_examples=400, deadline=None)
@given(bodies())
def test_every_body_parses_as_json_loads_parses_it(series: list[bytes]) -> None:
    parser = BodyParser()
    for body in series:
        assert outcome(parser.parse, body) == outcome(json.loads, body)
