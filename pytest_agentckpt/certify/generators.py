"""Checkpoints the contracts save: Hypothesis strategies and generation-marked histories.

Two kinds of data:

* :func:`checkpoints` draws arbitrary checkpoints that stress the serializer: unicode of
  every plane, emoji sequences, NUL and line separators, integers beyond 2**53 and
  beyond 64 bits, deep nesting, every content block type of the Messages API.
* :func:`generation_checkpoint` builds, for a generation number ``g``, one exact
  checkpoint in which the head and every message carry the generation that wrote them,
  so that a load that mixes two saves is detectable by comparing with the expected
  checkpoint for the generation the head claims.
"""

from __future__ import annotations

import base64
import datetime as _dt
from typing import Any

from hypothesis import strategies as st

from stores import ActionRecord, Checkpoint, RecordedResult

__all__ = [
    "BLOCK_TYPES",
    "LINE_SEPARATORS",
    "SPECIAL_STRINGS",
    "checkpoints",
    "deep_value",
    "every_block_type_messages",
    "generation_checkpoint",
    "generation_of",
    "history",
    "json_values",
]

#: Every code point ``str.splitlines`` breaks a line at: a store that splits stored lines
#: with it (rather than on ``\n`` alone) cuts a message holding one in two.
LINE_SEPARATORS = ("\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85",
                   "\u2028", "\u2029")

#: Strings that break lossy encoders: emoji sequences, combining marks, NUL, line and
#: paragraph separators, a byte-order mark, the last code point, JSON escapes.
SPECIAL_STRINGS = (
    "",
    " ",
    "😀",
    "👩‍👩‍👧‍👦",
    "🏳️‍🌈",
    "e\u0301",
    "ﬀ",
    "\u0000",
    "nul\u0000inside",
    "\u2028\u2029",
    "a\x85b\x1cc\x1dd\x1ee\x0bf\x0cg",
    "\ufeff",
    "\U0001d518\U0001d52b\U0001d526",  # mathematical fraktur, outside the BMP
    "مرحبا",
    "日本語テキスト",
    "\U0010ffff",
    '"\\/\b\f\n\r\t',
    "\x7f\x80\x9f",
)

#: Integers that a float or a signed 64-bit column cannot hold exactly.
SPECIAL_INTEGERS = (
    2**53 + 1,
    -(2**53 + 1),
    2**63 - 1,
    -(2**63),
    2**63,
    2**64 + 1,
    10**30 + 7,
    -(10**40) - 3,
)

# Surrogates are excluded here and tested on their own: the codec must refuse them.
_TEXT_ALPHABET = st.characters(exclude_categories=["Cs"])

text = st.one_of(st.text(_TEXT_ALPHABET, max_size=24), st.sampled_from(SPECIAL_STRINGS))
integers = st.one_of(
    st.integers(min_value=-1000, max_value=1000),
    st.sampled_from(SPECIAL_INTEGERS),
    st.integers(),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    integers,
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4), st.dictionaries(text, children, max_size=4)
    )


#: Any JSON value, nested a few levels.
json_values: st.SearchStrategy[Any] = st.recursive(scalars, _containers, max_leaves=12)


def deep_value(depth: int) -> Any:
    """A value nested ``depth`` levels, alternating lists and objects."""
    value: Any = {"leaf": [2**64 + 1, "😀"]}
    for level in range(depth):
        value = [value] if level % 2 else {f"d{level}": value}
    return value


def _id(prefix: str) -> st.SearchStrategy[str]:
    return st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=6, max_size=24).map(
        lambda s: prefix + s
    )


def _citations() -> st.SearchStrategy[list[dict[str, Any]]]:
    citation = st.fixed_dictionaries(
        {
            "type": st.just("char_location"),
            "cited_text": text,
            "document_index": st.integers(0, 5),
            "document_title": st.one_of(st.none(), text),
            "start_char_index": st.integers(0, 100),
            "end_char_index": st.integers(100, 200),
        }
    )
    return st.lists(citation, max_size=2)


_base64 = st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode())

_text_block = st.fixed_dictionaries(
    {"type": st.just("text"), "text": text}, optional={"citations": _citations()}
)
_image_block = st.fixed_dictionaries(
    {
        "type": st.just("image"),
        "source": st.one_of(
            st.fixed_dictionaries(
                {
                    "type": st.just("base64"),
                    "media_type": st.sampled_from(["image/png", "image/jpeg"]),
                    "data": _base64,
                }
            ),
            st.fixed_dictionaries({"type": st.just("url"), "url": st.just("https://example.com/a.png")}),
        ),
    }
)
_document_block = st.fixed_dictionaries(
    {
        "type": st.just("document"),
        "source": st.one_of(
            st.fixed_dictionaries(
                {"type": st.just("base64"), "media_type": st.just("application/pdf"), "data": _base64}
            ),
            st.fixed_dictionaries(
                {"type": st.just("text"), "media_type": st.just("text/plain"), "data": text}
            ),
        ),
    },
    optional={"title": text, "context": text, "citations": st.just({"enabled": True})},
)
_tool_use_block = st.fixed_dictionaries(
    {
        "type": st.just("tool_use"),
        "id": _id("toolu_"),
        "name": st.sampled_from(["send_email", "read_file", "search", "create_ticket"]),
        "input": st.dictionaries(text, json_values, max_size=4),
    }
)
_tool_result_block = st.fixed_dictionaries(
    {
        "type": st.just("tool_result"),
        "tool_use_id": _id("toolu_"),
        "content": st.one_of(text, st.lists(st.one_of(_text_block, _image_block), max_size=2)),
    },
    optional={"is_error": st.booleans()},
)
_thinking_block = st.fixed_dictionaries(
    {"type": st.just("thinking"), "thinking": text, "signature": _base64}
)
_redacted_thinking_block = st.fixed_dictionaries(
    {"type": st.just("redacted_thinking"), "data": _base64}
)
_server_tool_use_block = st.fixed_dictionaries(
    {
        "type": st.just("server_tool_use"),
        "id": _id("srvtoolu_"),
        "name": st.just("web_search"),
        "input": st.fixed_dictionaries({"query": text}),
    }
)
_web_search_result_block = st.fixed_dictionaries(
    {
        "type": st.just("web_search_tool_result"),
        "tool_use_id": _id("srvtoolu_"),
        "content": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.just("web_search_result"),
                    "url": st.just("https://example.com/"),
                    "title": text,
                    "encrypted_content": _base64,
                    "page_age": st.one_of(st.none(), text),
                }
            ),
            max_size=2,
        ),
    }
)
_search_result_block = st.fixed_dictionaries(
    {
        "type": st.just("search_result"),
        "source": st.just("https://example.com/doc"),
        "title": text,
        "content": st.lists(_text_block, min_size=1, max_size=2),
        "citations": st.just({"enabled": True}),
    }
)

#: Every content block type the history may hold, by name.
BLOCK_TYPES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "text": _text_block,
    "image": _image_block,
    "document": _document_block,
    "tool_use": _tool_use_block,
    "tool_result": _tool_result_block,
    "thinking": _thinking_block,
    "redacted_thinking": _redacted_thinking_block,
    "server_tool_use": _server_tool_use_block,
    "web_search_tool_result": _web_search_result_block,
    "search_result": _search_result_block,
}

_block = st.one_of(*BLOCK_TYPES.values())
_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.one_of(text, st.lists(_block, min_size=1, max_size=3)),
    }
)


def history(max_size: int = 8) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A ``messages`` array of up to ``max_size`` messages with any block types."""
    return st.lists(_message, max_size=max_size)


_aware_datetimes = st.datetimes(
    min_value=_dt.datetime(2000, 1, 1), max_value=_dt.datetime(2100, 1, 1),
    timezones=st.just(_dt.timezone.utc),
)
_actions = st.lists(
    st.builds(
        ActionRecord,
        tool_use_id=_id("toolu_"),
        tool_name=st.just("send_email"),
        input=st.dictionaries(text, json_values, max_size=3),
        idempotency_key=_id("key-"),
        state=st.sampled_from(["intent", "done", "unknown"]),
        result=st.one_of(
            st.none(), st.builds(RecordedResult, content=text, is_error=st.booleans())
        ),
        recorded_at=_aware_datetimes,
    ),
    max_size=2,
)


def checkpoints(task_id: str, *, max_messages: int = 8) -> st.SearchStrategy[Checkpoint]:
    """Unsaved (version 0) checkpoints for ``task_id`` that stress a store's encoding."""
    return st.builds(
        Checkpoint,
        task_id=st.just(task_id),
        goal=text,
        messages=history(max_messages),
        completed_tasks=st.lists(text, max_size=3),
        artifacts=st.dictionaries(text, json_values, max_size=4),
        iteration=st.one_of(st.integers(0, 100), st.integers(0, 2**31 - 1)),
        status=st.sampled_from(["running", "completed", "failed"]),
        final_answer=st.one_of(st.none(), text),
        actions=_actions,
        metadata=st.dictionaries(text, json_values, max_size=3),
        created_at=_aware_datetimes,
        updated_at=_aware_datetimes,
    )


def every_block_type_messages() -> list[dict[str, Any]]:
    """One deterministic message per content block type (and a deeply nested input)."""
    messages: list[dict[str, Any]] = []
    assistant_only = {
        "tool_use", "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"
    }
    for name in BLOCK_TYPES:
        role = "assistant" if name in assistant_only else "user"
        messages.append({"role": role, "content": [_fixed_block(name)]})
    return messages


def _fixed_block(name: str) -> dict[str, Any]:
    # Hand-written rather than drawn: this list must hold every type on every run.
    blocks: dict[str, dict[str, Any]] = {
        "text": {"type": "text", "text": "héllo 😀 \u0000 end", "citations": []},
        "image": {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                              "data": "iVBORw0KGgo="}},
        "document": {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                    "data": "日本語"}, "title": "t"},
        "tool_use": {"type": "tool_use", "id": "toolu_01", "name": "send_email",
                     "input": {"to": "a@example.com", "n": 2**64 + 1, "deep": deep_value(40)}},
        "tool_result": {"type": "tool_result", "tool_use_id": "toolu_01", "is_error": False,
                        "content": [{"type": "text", "text": "sent ✉️"}]},
        "thinking": {"type": "thinking", "thinking": "let me think… 🤔",
                     "signature": "EqQBCkYIARgCIkA="},
        "redacted_thinking": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        "server_tool_use": {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
                            "input": {"query": "checkpoint"}},
        "web_search_tool_result": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
                                   "content": [{"type": "web_search_result",
                                                "url": "https://example.com/", "title": "x",
                                                "encrypted_content": "abc=", "page_age": None}]},
        "search_result": {"type": "search_result", "source": "https://example.com/doc",
                          "title": "doc", "content": [{"type": "text", "text": "body"}],
                          "citations": {"enabled": True}},
    }
    return blocks[name]


# -- generation-marked checkpoints -------------------------------------------------------

#: Every this many generations the whole history is rewritten (the prefix changes), so
#: that kills land in rewrites as well as in appends.
REWRITE_EVERY = 4


def _message_for(generation: int, index: int, padding: int) -> dict[str, Any]:
    marker = f"gen-{generation}-msg-{index}"
    return {
        "role": "user" if index % 2 == 0 else "assistant",
        "content": [{"type": "text", "text": marker + " " + "x" * padding}],
    }


def generation_checkpoint(
    task_id: str, generation: int, *, version: int, padding: int = 512
) -> Checkpoint:
    """The exact checkpoint that generation ``generation`` saves.

    The head (goal, iteration, metadata, artifacts) says ``generation``; each message
    says the generation that appended it. Generations that are multiples of
    :data:`REWRITE_EVERY` rewrite the history; the others append one message.
    """
    base = generation - generation % REWRITE_EVERY
    messages = [_message_for(base, i, padding) for i in range(3)]
    messages += [_message_for(g, 3 + g - base, padding) for g in range(base + 1, generation + 1)]
    return Checkpoint(
        task_id=task_id,
        goal=f"generation {generation}",
        messages=messages,
        iteration=generation,
        metadata={"generation": generation},
        artifacts={"generation": generation, "padding": "y" * padding},
        created_at=_dt.datetime(2024, 1, 1, tzinfo=_dt.timezone.utc),
        updated_at=_dt.datetime(2024, 1, 1, tzinfo=_dt.timezone.utc),
        version=version,
    )


def generation_of(checkpoint: Checkpoint) -> int:
    """The generation a loaded generation-marked checkpoint's head claims."""
    return checkpoint.iteration
