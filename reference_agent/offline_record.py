"""The fake Messages API's record of exchanges, in memory that grows with the messages.

An agent's requests repeat the whole history each turn, so keeping every request body whole
costs the square of the run's length. Here a request is held as a :class:`History` — the
history it extends (shared, not copied) plus the messages it adds — and its other fields
are shared with the previous request when they are equal (tools, system). The record then
holds each message about once, however many requests carried it; :attr:`Exchange.request`
rebuilds the full body when read.

>>> index = HistoryIndex()
>>> first = index.share([{"role": "user", "content": "hi"}])
>>> second = index.share([{"role": "user", "content": "hi"},
...                       {"role": "assistant", "content": "hello"}])
>>> second.parent is first, second.own
(True, [{'role': 'assistant', 'content': 'hello'}])
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Exchange", "History", "HistoryIndex"]


class History:
    """A message history as the history it extends (``parent``) plus its own messages.

    >>> History(History(None, [1]), [2, 3]).messages()
    [1, 2, 3]
    """

    __slots__ = ("length", "own", "parent")

    def __init__(self, parent: History | None, own: list[Any]) -> None:
        self.parent = parent
        self.own = own
        self.length: int = len(own) + (parent.length if parent is not None else 0)

    def messages(self) -> list[Any]:
        """The whole history, a new list (its messages are shared: read them, do not edit)."""
        parts: list[list[Any]] = []
        node: History | None = self
        while node is not None:
            parts.append(node.own)
            node = node.parent
        out: list[Any] = []
        for part in reversed(parts):
            out.extend(part)
        return out

    def extend(self, own: list[Any]) -> History:
        """This history followed by ``own`` (``self`` when ``own`` is empty)."""
        return History(self, own) if own else self


EMPTY = History(None, [])


class HistoryIndex:
    """Finds, for a new request's messages, the recent history they extend.

    Holds the last few histories whole (lists of shared messages) to compare against;
    ``share`` returns a :class:`History` whose prefix is that history's, so the new
    request's copies of those messages can be freed.
    """

    def __init__(self, window: int = 8) -> None:
        self._recent: deque[tuple[History, list[Any]]] = deque(maxlen=window)

    def share(self, messages: list[Any]) -> History:
        """A history equal to ``messages`` sharing the longest recent prefix of them.

        ``messages`` is edited in place so that its prefix *is* the shared messages.
        """
        best: tuple[History, list[Any]] | None = None
        size = len(messages)
        for node, whole in self._recent:
            n = len(whole)
            if n <= size and (best is None or n > len(best[1])) and messages[:n] == whole:
                best = (node, whole)
        if best is None:
            node = History(None, list(messages))
        else:
            base, whole = best
            messages[: len(whole)] = whole
            node = base.extend(messages[len(whole) :])
        self.remember(node, messages)
        return node

    def remember(self, node: History, whole: list[Any]) -> None:
        """Offer ``node`` (whose messages are ``whole``) as a prefix to later requests."""
        for known, _ in self._recent:
            if known is node:
                return
        self._recent.append((node, list(whole)))


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, eq=False)
class Exchange:
    """One request the fake received and what became of it.

    ``status`` is the HTTP status sent, or ``0`` when no answer reached the client (a
    timeout, a dropped connection, a lost response). ``response`` is the JSON body sent
    (for a stream, the ``Message`` it carried), or what would have been sent.
    ``model_called`` says whether the scripted model was consulted; ``delivered`` whether
    the client received the whole answer; ``generation`` whether it asked for a reply
    (``messages.create`` / ``stream``, Bedrock's ``invoke``, Vertex's ``rawPredict``).

    ``request`` is the request's JSON body — for a thread's ``continue``, with the whole
    history the thread stands for in ``messages`` (and the thread's ``system`` and
    ``tools``), so a record reads the same with and without threads; ``sent`` is the
    body as sent. Both are rebuilt when read from the shared record (treat them as
    read-only); ``body`` is ``sent`` as JSON bytes.
    """

    index: int
    path: str
    headers: Mapping[str, str]
    status: int
    response: dict[str, Any] | None
    stream: bool = False
    fault: str | None = None
    model_called: bool = False
    delivered: bool = True
    generation: bool = False
    method: str = "POST"
    # The request without its messages, and its messages as a shared history.
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False)
    history: History | None = field(default=None, repr=False)
    # A thread's continue: what the request sent itself (fields and messages).
    sent_fields: Mapping[str, Any] | None = field(default=None, repr=False)
    sent_messages: list[Any] | None = field(default=None, repr=False)
    # A body that was not a JSON object (kept as sent, for the record).
    raw: bytes | None = field(default=None, repr=False)
    # The answer's headers as the fake built them (the reply's own list, not a copy).
    reply_headers: Sequence[tuple[str, str]] = field(default=(), repr=False)

    @property
    def response_headers(self) -> dict[str, str]:
        """The headers of the answer sent (``request-id``, the rate limits, a 429's
        ``retry-after``, ...); empty when no answer reached the client (``status == 0``)."""
        if self.status == 0:
            return {}
        return {name.lower(): value for name, value in self.reply_headers}

    @property
    def request(self) -> dict[str, Any]:
        """The request's JSON body, a thread's full history included (``{}`` if it was
        not a JSON object)."""
        if self.history is None:
            return dict(self.fields)
        return {**self.fields, "messages": self.history.messages()}

    @property
    def sent(self) -> dict[str, Any]:
        """The request's JSON body as the client sent it (a ``continue``: only its new
        messages)."""
        if self.sent_fields is None:
            return self.request
        out = dict(self.sent_fields)
        if self.sent_messages is not None:
            out["messages"] = list(self.sent_messages)
        return out

    @property
    def body(self) -> bytes:
        """``sent`` as JSON bytes (a body that was not a JSON object: as sent)."""
        if self.raw is not None:
            return self.raw
        return _encode(self.sent) if (self.fields or self.history) else b""
