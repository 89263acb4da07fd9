"""The fake Messages API's server-sent events, and bodies that stream as they are read.

:func:`sse_events` turns a ``Message`` JSON into the API's event sequence, one ``bytes``
per event; :func:`sse_body` joins them. :class:`StreamPlan` says how a streamed reply ends:
whole, cut after ``N`` events (a dropped connection), or with an ``error`` event after ``N``
events (``overloaded_error`` mid-stream, as the API sends it). The ``httpx2`` byte streams
here hand events to the client one at a time, so a stream is open until its last event is
read, as over the network.

>>> from reference_agent.scripted import message_json
>>> [e.split(b"\\n")[0] for e in sse_events(message_json("Hi"))][:2]
[b'event: message_start', b'event: ping']
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

__all__ = ["StreamPlan", "bedrock_event", "sse_body", "sse_events"]


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _chunks(text: str, size: int = 24) -> list[str]:
    # Several deltas per block, as the API sends them, so clients that accumulate
    # deltas are exercised; an empty string still yields one delta.
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[bytes]:
    kind = block.get("type")

    def start(content_block: Mapping[str, Any]) -> bytes:
        return _event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": content_block},
        )

    def delta(payload: Mapping[str, Any]) -> bytes:
        return _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": payload},
        )

    if kind == "text":
        yield start({"type": "text", "text": ""})
        for piece in _chunks(str(block.get("text", ""))):
            yield delta({"type": "text_delta", "text": piece})
    elif kind in ("tool_use", "server_tool_use"):
        yield start({**block, "input": {}})
        for piece in _chunks(json.dumps(block.get("input") or {}, ensure_ascii=False)):
            yield delta({"type": "input_json_delta", "partial_json": piece})
    elif kind == "thinking":
        yield start({"type": "thinking", "thinking": "", "signature": ""})
        for piece in _chunks(str(block.get("thinking", ""))):
            yield delta({"type": "thinking_delta", "thinking": piece})
        yield delta({"type": "signature_delta", "signature": block.get("signature", "")})
    else:
        # Blocks the API sends whole (redacted thinking, server tool results).
        yield start(dict(block))
    yield _event("content_block_stop", {"type": "content_block_stop", "index": index})


def sse_events(message: Mapping[str, Any]) -> list[bytes]:
    """The API's server-sent events for ``message``, one ``bytes`` per event.

    ``message_start``, ``ping``, then per block ``content_block_start`` /
    ``content_block_delta`` (``text_delta``, ``input_json_delta`` for tool input,
    ``thinking_delta`` and ``signature_delta``) / ``content_block_stop``, then
    ``message_delta`` and ``message_stop``.
    """
    usage = dict(message.get("usage") or {})
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    out = [
        _event("message_start", {"type": "message_start", "message": start}),
        _event("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message.get("content") or ()):
        out.extend(_block_events(index, block))
    final_usage = {
        name: usage[name]
        for name in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "server_tool_use",
        )
        if name in usage
    }
    final_usage["output_tokens"] = usage.get("output_tokens", 0)
    out.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message.get("stop_reason"),
                    "stop_sequence": message.get("stop_sequence"),
                },
                "usage": final_usage,
            },
        )
    )
    out.append(_event("message_stop", {"type": "message_stop"}))
    return out


def sse_body(message: Mapping[str, Any]) -> bytes:
    """The API's whole server-sent event stream for ``message`` (see :func:`sse_events`).

    >>> sse_body({"content": []}).count(b"event: ")
    4
    """
    return b"".join(sse_events(message))


@dataclass(frozen=True)
class StreamPlan:
    """How a streamed reply ends: ``cut`` (``"disconnect"`` or ``"error"``) after ``after``
    events, or whole when ``cut`` is ``None``.

    >>> StreamPlan("error", 3).events([b"a", b"b", b"c", b"d"])[-1][:12]
    b'event: error'
    """

    cut: str | None = None
    after: int = 0

    def events(self, events: Sequence[bytes]) -> list[bytes]:
        """The events sent: all of them, the first ``after``, or those and an ``error``."""
        if self.cut is None:
            return list(events)
        sent = list(events[: self.after])
        if self.cut == "error":
            sent.append(
                _event(
                    "error",
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    },
                )
            )
        return sent

    @property
    def drops(self) -> bool:
        """Whether the connection drops before the stream's end."""
        return self.cut == "disconnect"


def _dropped(request: httpx2.Request) -> httpx2.RemoteProtocolError:
    return httpx2.RemoteProtocolError(
        "peer closed connection without sending complete message body (incomplete chunked read)",
        request=request,
    )


class _EventSource:
    """What a stream hands out: ``events``, the drop at their end if ``drop``, and
    ``delivered``, called once the client has read them all (not when they drop)."""

    def __init__(
        self,
        events: Sequence[bytes],
        *,
        drop: bool,
        request: httpx2.Request,
        delivered: Callable[[], None] | None = None,
    ) -> None:
        self._events = events
        self._drop = drop
        self._request = request
        self._delivered = delivered


class SyncEventStream(_EventSource, httpx2.SyncByteStream):
    """Hands ``events`` to the client one per read; raises a dropped connection at the
    end when ``drop`` is set, else calls ``delivered`` (the client has read it all)."""

    def __iter__(self) -> Iterator[bytes]:
        yield from self._events
        if self._drop:
            raise _dropped(self._request)
        if self._delivered is not None:
            self._delivered()


class AsyncEventStream(_EventSource, httpx2.AsyncByteStream):
    """The async twin of :class:`SyncEventStream`."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self._events:
            yield event
        if self._drop:
            raise _dropped(self._request)
        if self._delivered is not None:
            self._delivered()


def _aws_header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # Header value type 7: a string with a 2-byte length.
    return (
        struct.pack("!B", len(raw_name))
        + raw_name
        + b"\x07"
        + struct.pack("!H", len(raw_value))
        + raw_value
    )


def bedrock_event(sse: bytes) -> bytes:
    """One server-sent event as Bedrock's ``invoke-with-response-stream`` sends it: an AWS
    event-stream ``chunk`` message whose payload holds the event's data, base64-encoded.

    >>> from botocore.eventstream import EventStreamBuffer
    >>> buffer = EventStreamBuffer()
    >>> buffer.add_data(bedrock_event(b'event: ping\\ndata: {"type": "ping"}\\n\\n'))
    >>> [m.headers[":event-type"] for m in buffer]
    ['chunk']
    """
    data = b""
    for line in sse.split(b"\n"):
        if line.startswith(b"data: "):
            data = line[len(b"data: ") :]
    payload = json.dumps({"bytes": base64.b64encode(data).decode()}).encode()
    headers = (
        _aws_header(":event-type", "chunk")
        + _aws_header(":content-type", "application/json")
        + _aws_header(":message-type", "event")
    )
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    message = prelude + headers + payload
    return message + struct.pack("!I", zlib.crc32(message))
