"""Message threads (beta ``message-threads-2026-08-12``) for the fake Messages API.

A request with ``thread: {"type": "create"}`` asks the server to hold the conversation
under the reply's ``id``; ``{"type": "continue", "previous_message_id": ...}`` sends only
the new messages, and the server takes the rest — history, ``system``, ``tools`` — from
the thread. :class:`ThreadStore` keeps each reply's thread as a shared
:class:`~reference_agent.offline_record.History`, resolves a continue into the full request
the API stands for, and answers the API's errors: ``thread_not_found`` (404),
``thread_already_continued`` and ``thread_continue_in_flight`` (400), a continue that
repeats ``system`` or ``tools`` (400).

>>> store = ThreadStore()
>>> request = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
...            "thread": {"type": "create"}}
>>> store.resolve(request) is None
True
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .offline_record import EMPTY, History

__all__ = ["THREADS_BETA", "ThreadError", "ThreadStore"]

THREADS_BETA = "message-threads-2026-08-12"
# What the server takes from the thread on a continue, and refuses to be sent again.
_CREATE_ONLY = ("system", "tools")


class ThreadError(Exception):
    """A thread request the API refuses: ``status``, ``error_type``, ``error_code``."""

    def __init__(self, status: int, error_type: str, message: str, error_code: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.error_code = error_code


@dataclass
class _Thread:
    history: History  # up to and including the reply
    fields: dict[str, Any]  # the create-only fields the thread was created with
    continued: bool = False
    in_flight: bool = False


@dataclass
class Resolved:
    """A continue resolved: the full request and the thread it continues."""

    request: dict[str, Any]
    base: History
    previous_id: str


class ThreadStore:
    """The threads the fake holds, by reply id (see the module docstring)."""

    def __init__(self) -> None:
        self._threads: dict[str, _Thread] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._threads)

    def resolve(self, request: Mapping[str, Any]) -> Resolved | None:
        """The full request a ``continue`` stands for (``None`` for other requests).

        Marks the thread in flight until :meth:`finish`; raises :class:`ThreadError`.
        """
        thread = request.get("thread")
        if not isinstance(thread, Mapping) or thread.get("type") != "continue":
            if isinstance(thread, Mapping) and thread.get("type") not in ("create", "continue"):
                raise ThreadError(
                    400,
                    "invalid_request_error",
                    "thread.type: Input should be 'create' or 'continue'",
                    None,
                )
            return None
        previous = thread.get("previous_message_id")
        if not isinstance(previous, str) or not previous:
            raise ThreadError(
                400, "invalid_request_error", "thread.previous_message_id: Field required", None
            )
        repeated = [f"`{name}`" for name in _CREATE_ONLY if name in request]
        if repeated:
            raise ThreadError(
                400,
                "invalid_request_error",
                f"{' and '.join(repeated)}: not allowed when `thread.type` is `continue`; "
                "the thread keeps the ones it was created with",
                None,
            )
        with self._lock:
            held = self._threads.get(previous)
            if held is None:
                raise ThreadError(
                    404,
                    "not_found_error",
                    f"No thread state was found for previous_message_id {previous!r}. "
                    'Replay the full conversation with `thread: {"type": "create"}`.',
                    "thread_not_found",
                )
            if held.continued:
                raise ThreadError(
                    400,
                    "invalid_request_error",
                    f"The response {previous!r} has already been continued; each response "
                    "can be continued only once. Continue from the thread's most recent "
                    "response `id`.",
                    "thread_already_continued",
                )
            if held.in_flight:
                raise ThreadError(
                    400,
                    "invalid_request_error",
                    f"Another request is still continuing from {previous!r}.",
                    "thread_continue_in_flight",
                )
            held.in_flight = True
        new = request.get("messages")
        new_messages = list(new) if isinstance(new, list) else []
        full = {**request, **held.fields, "messages": held.history.messages() + new_messages}
        return Resolved(full, held.history, previous)

    def finish(self, resolved: Resolved | None, *, continued: bool) -> None:
        """The continue ended; ``continued``: the server moved its thread on."""
        if resolved is None:
            return
        with self._lock:
            held = self._threads.get(resolved.previous_id)
            if held is not None:
                held.in_flight = False
                held.continued = held.continued or continued

    def hold(
        self, reply_id: str, history: History, reply: Mapping[str, Any], request: Mapping[str, Any]
    ) -> None:
        """Hold the conversation of ``request`` (whose messages are ``history``) and its
        ``reply`` under ``reply_id``."""
        message = {"role": "assistant", "content": reply.get("content") or []}
        fields = {name: request[name] for name in _CREATE_ONLY if name in request}
        with self._lock:
            self._threads[reply_id] = _Thread((history or EMPTY).extend([message]), fields)

    def __contains__(self, reply_id: object) -> bool:
        return reply_id in self._threads


def is_threaded(request: Mapping[str, Any]) -> bool:
    """Whether ``request`` carries a ``thread`` field."""
    return isinstance(request.get("thread"), Mapping)
