"""Parsing request bodies that repeat the previous one's messages, as an agent's do.

Each request of a tool loop sends the whole history again: its JSON body starts with the
bytes of the previous body up to the end of the previous messages, then adds the new
messages. :class:`BodyParser` compares those bytes (a ``memcmp``) and parses only what
follows, reusing the previous request's parsed messages for the repeated ones. Equal text
parses to equal values, so the result is what ``json.loads`` returns; any body it does
not recognise (another shape, a changed prefix, invalid JSON) is parsed in full by
``json.loads`` itself, errors included.

>>> parser = BodyParser()
>>> first = parser.parse(b'{"model":"m","messages":[{"role":"user","content":"hi"}]}')
>>> second = parser.parse(
...     b'{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":"go"}]}')
>>> second["messages"][0] is first["messages"][0], second["messages"][1]
(True, {'role': 'user', 'content': 'go'})
"""

from __future__ import annotations

import json
import threading
from json.decoder import WHITESPACE, scanstring  # type: ignore[attr-defined]
from typing import Any

__all__ = ["BodyParser"]

_DECODER = json.JSONDecoder()  # json.loads's own settings
_ws = WHITESPACE.match


class _Unrecognised(Exception):
    """Not the shape this parser handles: json.loads decides."""


class BodyParser:
    """``json.loads`` for a series of request bodies, reading only what is new in each.

    The parsed messages of one body are handed out again for the next: treat them as
    read-only (the fake API's record shares them too).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The last body's text up to the end of its messages, the offset just after each
        # message, and the messages parsed.
        self._prefix = ""
        self._ends: list[int] = []
        self._messages: list[Any] = []

    def parse(self, body: bytes) -> Any:
        """``json.loads(body)``: the same value, or the same error."""
        try:
            text = body.decode(json.detect_encoding(body), "surrogatepass")
            with self._lock:
                return self._parse(text)
        except Exception:  # _Unrecognised, invalid JSON: json.loads decides
            with self._lock:
                self._prefix, self._ends, self._messages = "", [], []
            return json.loads(body)

    def _parse(self, text: str) -> dict[str, Any]:
        i = _ws(text, 0).end()
        if text[i] != "{":
            raise _Unrecognised
        i = _ws(text, i + 1).end()
        out: dict[str, Any] = {}
        found: tuple[list[int], list[Any]] | None = None
        while True:
            if text[i] != '"':
                raise _Unrecognised  # an empty object, or invalid JSON
            key, i = scanstring(text, i + 1, True)
            if key in out:
                raise _Unrecognised  # a repeated key: json.loads keeps the last
            i = _ws(text, i).end()
            if text[i] != ":":
                raise _Unrecognised
            i = _ws(text, i + 1).end()
            if key == "messages" and text[i] == "[":
                value, i, ends = self._messages_at(text, i)
                found = (ends, value)
            else:
                value, i = _DECODER.raw_decode(text, i)
            out[key] = value
            i = _ws(text, i).end()
            if text[i] == ",":
                i = _ws(text, i + 1).end()
                continue
            if text[i] != "}":
                raise _Unrecognised
            i = _ws(text, i + 1).end()
            break
        if i != len(text):
            raise _Unrecognised  # extra data: json.loads says where
        if found is None:
            self._prefix, self._ends, self._messages = "", [], []
        else:
            ends, messages = found
            self._prefix = text[: ends[-1]] if ends else ""
            self._ends, self._messages = ends, list(messages)
        return out

    def _messages_at(self, text: str, i: int) -> tuple[list[Any], int, list[int]]:
        """The array at ``text[i] == "["``: its items, the offset after it, and the
        offset after each item."""
        prefix = self._prefix
        if prefix and text.startswith(prefix) and self._ends[0] > i:
            # The same text as the last body up to the end of its last message: the same
            # messages (the opening bracket is at the same place, inside the prefix).
            items = list(self._messages)
            ends = list(self._ends)
            i = len(prefix)
        else:
            items, ends = [], []
            i += 1
        i = _ws(text, i).end()
        if not items:
            if text[i] == "]":
                return items, i + 1, ends
        elif text[i] == ",":
            i = _ws(text, i + 1).end()
        elif text[i] == "]":
            return items, i + 1, ends
        else:
            raise _Unrecognised
        while True:
            value, i = _DECODER.raw_decode(text, i)
            items.append(value)
            ends.append(i)
            i = _ws(text, i).end()
            if text[i] == ",":
                i = _ws(text, i + 1).end()
                continue
            if text[i] == "]":
                return items, i + 1, ends
            raise _Unrecognised
