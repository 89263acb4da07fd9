"""A fake Messages API: a scripted model behind the real ``anthropic`` SDK, offline.

:class:`FakeMessagesAPI` answers what the SDK sends to the Messages API as the API does —
same JSON shapes, same error bodies and status codes — from an ``httpx2`` transport the SDK
sends through, or from a real HTTP server on loopback (:meth:`FakeMessagesAPI.serve`) for
agents in child processes:

- ``POST /v1/messages`` (plain and streaming, message threads included) and
  ``/v1/messages/count_tokens``;
- Message Batches (``/v1/messages/batches``) and Models (``/v1/models``);
- the same generation on the URLs of ``AnthropicVertex`` (``:rawPredict``,
  ``:streamRawPredict``) and ``AnthropicBedrock`` (``/model/{id}/invoke`` and
  ``invoke-with-response-stream``, in AWS event-stream messages).

Every request is checked with :func:`~reference_agent.validation.validate_messages`, so an
invalid history gets the API's HTTP 400, and every exchange is recorded in memory that
grows with the messages, not with the square of the run (see
:mod:`reference_agent.offline_record`).

>>> from reference_agent.scripted import CannedModel
>>> api = FakeMessagesAPI(CannedModel(["Hello!"]))
>>> client = api.client()
>>> reply = client.messages.create(
...     model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
>>> reply.content[0].text, len(api.exchanges)
('Hello!', 1)

Faults make the fake answer the next requests as a struggling API would (the SDK's own
retry loop sees them as real ones): ``api.fail_next("rate_limit")``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import math
import re
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal, get_args
from urllib.parse import parse_qs, urlsplit

import httpx2

from .client_tools import client_tool_error
from .offline_batches import MODELS, BatchError, BatchStore, model_info, page
from .offline_parse import BodyParser
from .offline_record import Exchange, History, HistoryIndex
from .offline_streams import (
    AsyncEventStream,
    StreamPlan,
    SyncEventStream,
    bedrock_event,
    sse_body,
    sse_events,
)
from .offline_threads import THREADS_BETA, Resolved, ThreadError, ThreadStore, is_threaded
from .scripted import (
    INTERLEAVED_THINKING_BETA,
    CannedModel,
    Plan,
    PlanModel,
    ScriptedModel,
    interleaved_thinking,
    limited_reply,
    max_tokens_reply,
    signature_matches,
)
from .validation import (
    InvalidHistoryError,
    RequestValidator,
    Shape,
    breakpoint_error,
    check_interleaved_thinking,
    fixed_marks,
    message_marks,
    remember_shape,
    request_rule_error,
    thinking_shape,
    validate_messages,
)

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "FAKE_API_KEY",
    "THREADS_BETA",
    "Exchange",
    "FakeMessagesAPI",
    "FaultKind",
    "Hook",
    "Reply",
    "offline_client",
    "sse_body",
    "sse_events",
]

#: The API key the fake's clients send. Any non-empty key is accepted.
FAKE_API_KEY = "sk-ant-offline-fake"

#: Faults :meth:`FakeMessagesAPI.fail_next` can inject.
#:
#: - ``rate_limit``: HTTP 429 ``rate_limit_error`` with ``retry-after-ms`` / ``retry-after``
#:   (the same wait, see :func:`retry_after_headers`);
#: - ``server_error``: HTTP 500 ``api_error``;
#: - ``overloaded``: HTTP 529 ``overloaded_error``;
#: - ``timeout``: no answer in time (``httpx2.ReadTimeout``);
#: - ``disconnect``: the connection drops before an answer (``httpx2.RemoteProtocolError``);
#: - ``connect_error``: the connection cannot be opened (``httpx2.ConnectError``);
#: - ``lost_response``: the model *did* reply — the exchange is recorded and the plan has
#:   advanced server-side — but the answer never reaches the client (connection dropped);
#: - ``stream_disconnect``: a streamed reply's connection drops after ``after_events``
#:   events (``httpx2.RemoteProtocolError`` while the SDK reads the stream; anthropic 2.17
#:   and later wrap it in ``anthropic.APIConnectionError``);
#: - ``stream_error``: a streamed reply sends an ``error`` event (``overloaded_error``)
#:   after ``after_events`` events, as the API does when it is overloaded mid-stream;
#: - ``max_tokens``: the model's reply reaches the request's ``max_tokens``: it arrives
#:   cut short with ``stop_reason: "max_tokens"``
#:   (:func:`~reference_agent.scripted.max_tokens_reply`: the last tool call loses its
#:   last argument, or the text its second half). The cut reply may be sent back as a
#:   prefill to be continued, as the API allows.
#:
#: The two stream faults wait for the next *streaming* generation, and ``max_tokens`` for
#: the next generation; other requests pass.
FaultKind = Literal[
    "rate_limit",
    "server_error",
    "overloaded",
    "timeout",
    "disconnect",
    "connect_error",
    "lost_response",
    "stream_disconnect",
    "stream_error",
    "max_tokens",
]
_FAULT_KINDS: frozenset[str] = frozenset(get_args(FaultKind))
_STREAM_FAULTS = frozenset({"stream_disconnect", "stream_error"})
# Faults that shape the model's reply instead of failing the request.
_REPLY_FAULTS = frozenset({"lost_response", "max_tokens", *_STREAM_FAULTS})
#: The rate limits the fake reports in the ``anthropic-ratelimit-*`` headers of every
#: generation's answer, as the API does (generous: an agent that paces itself on them
#: never needs to wait); a ``rate_limit`` fault reports its request limit spent.
_RATE_LIMITS = {"requests": 4_000, "tokens": 2_000_000, "input-tokens": 2_000_000, "output-tokens": 400_000}


def rate_limit_headers(*, exhausted: bool = False) -> list[tuple[str, str]]:
    """The API's ``anthropic-ratelimit-*`` response headers: for requests, tokens, input
    and output tokens, the ``-limit``, what ``-remaining`` of it, and the RFC 3339 time of
    its ``-reset`` (a second from now). ``exhausted``: no request remains (a 429's).

    >>> dict(rate_limit_headers())["anthropic-ratelimit-requests-remaining"]
    '3999'
    >>> dict(rate_limit_headers(exhausted=True))["anthropic-ratelimit-requests-remaining"]
    '0'
    """
    # The reset times have a resolution of a second: the headers of one second are made
    # once (every generation's answer carries them).
    second = int(time.time())
    cached = _rate_limit_cache.get(exhausted)
    if cached is None or cached[0] != second:
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second + 1))
        made: list[tuple[str, str]] = []
        for name, limit in _RATE_LIMITS.items():
            remaining = 0 if exhausted and name == "requests" else limit - 1 if name == "requests" else limit
            made.append((f"anthropic-ratelimit-{name}-limit", str(limit)))
            made.append((f"anthropic-ratelimit-{name}-remaining", str(remaining)))
            made.append((f"anthropic-ratelimit-{name}-reset", reset))
        cached = _rate_limit_cache[exhausted] = (second, tuple(made))
    return list(cached[1])


_rate_limit_cache: dict[bool, tuple[int, tuple[tuple[str, str], ...]]] = {}


def retry_after_headers(seconds: float) -> dict[str, str]:
    """The ``retry-after-ms`` and ``retry-after`` headers of an answer that asks the client
    to wait ``seconds``: the same wait in both, each rounded *up* to its unit (whole
    milliseconds; whole seconds, as the API sends ``retry-after``), so that a client that
    honours either never comes back before it was asked to. ``retry-after`` is always
    ``ceil(retry-after-ms / 1000)``.

    >>> retry_after_headers(2.5), retry_after_headers(0.001), retry_after_headers(0)
    ({'retry-after-ms': '2500', 'retry-after': '3'}, {'retry-after-ms': '1', 'retry-after': '1'}, {'retry-after-ms': '0', 'retry-after': '0'})
    """
    # Rounded to a microsecond first: 0.3 * 1000 is 300.00000000000006, not above 300 ms.
    ms = math.ceil(round(seconds * 1000, 3))
    return {"retry-after-ms": str(ms), "retry-after": str(-(-ms // 1000))}


class RequestHeaders(dict[str, str]):
    """A request's headers as the fake records them: names lower-cased, looked up in any
    case (``exchange.headers["X-Api-Key"]``), a name sent twice joined with ``", "``.

    >>> headers = RequestHeaders.of([(b"X-Api-Key", b"k"), (b"Accept", b"a"), (b"accept", b"b")])
    >>> headers["x-api-key"], headers.get("X-API-KEY"), headers["accept"], "ACCEPT" in headers
    ('k', 'k', 'a, b', True)
    """

    @classmethod
    def of(cls, raw: Iterable[tuple[bytes, bytes]] | Iterable[tuple[str, str]]) -> RequestHeaders:
        headers = cls()
        for name, value in raw:
            key = (name.decode("latin-1") if isinstance(name, bytes) else name).lower()
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            headers[key] = f"{dict.__getitem__(headers, key)}, {text}" if dict.__contains__(headers, key) else text
        return headers

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key.lower() if isinstance(key, str) else key)

    def get(self, key: str, default: Any = None) -> Any:
        return dict.get(self, key.lower(), default)


_STATUS_FAULTS: dict[str, tuple[int, str, str]] = {
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization. "
        "Please reduce the prompt length or the maximum tokens requested, or try again later.",
    ),
    "server_error": (500, "api_error", "Internal server error"),
    "overloaded": (529, "overloaded_error", "Overloaded"),
}

#: ``fn(event, index, body)``, called around every *generation* (``messages.create`` /
#: ``stream``, Vertex's ``rawPredict``, Bedrock's ``invoke``; not ``count_tokens``, batches
#: or models, which are no model calls): ``event`` is ``"request"`` (before the model is
#: consulted; ``body`` is the request JSON — for a thread's ``continue``, with the whole
#: history the thread stands for) or ``"response"`` (after the reply is built, before it
#: is delivered; ``body`` is the ``Message`` JSON). ``index`` is the exchange's
#: :attr:`Exchange.index`. What it raises propagates out of the transport — including
#: ``BaseException`` subclasses, which is how crashes are injected. ``body`` is shared with
#: the record (and the next requests' checks): read it, do not edit it.
Hook = Callable[[Literal["request", "response"], int, dict[str, Any]], None]
#: ``fn(index, message)``, called once a streamed reply's last event has been handed to
#: the client (:meth:`FakeMessagesAPI.add_delivery_hook`): until then the client holds at
#: most part of it.
DeliveryHook = Callable[[int, dict[str, Any]], None]

_MESSAGES = "/v1/messages"
_COUNT_TOKENS = "/v1/messages/count_tokens"
_BATCHES = "/v1/messages/batches"
_MODELS = "/v1/models"
# What the fake serves, for the error an unserved endpoint gets.
_SERVED = (
    "POST /v1/messages, POST /v1/messages/count_tokens, /v1/messages/batches "
    "(create, list, retrieve, cancel, delete, results), GET /v1/models[/{id}], "
    "Vertex :rawPredict / :streamRawPredict, Bedrock /model/{id}/invoke[-with-response-stream]"
)
# Prompts shorter than this are not cached, as with the API's minimum cacheable length.
DEFAULT_CACHE_MIN_TOKENS = 1024


#: Where a stream fault cuts by default: after ``message_start``, ``ping`` and the first
#: block's ``content_block_start``, before any of its content.
CUT_AFTER_EVENTS = 3


@dataclass
class _Fault:
    kind: str
    retry_after: float | None
    after_events: int = 0
    mid_reply: bool = False


@dataclass
class Reply:
    """One answer of the fake: ``status``, ``headers`` and ``body``; a stream carries its
    ``events`` (``body`` is them joined) and ``stream_drop`` when the connection drops
    after them; ``drop`` is set when no answer is delivered at all (``"timeout"``,
    ``"disconnect"``, ``"connect_error"``)."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    drop: str | None = None
    events: list[bytes] | None = None
    stream_drop: bool = False
    #: Called once the last event of a whole stream has been handed to the client (the
    #: in-process transports call it; a stream cut short never calls it, nor does the HTTP
    #: server of :meth:`FakeMessagesAPI.serve`, which cannot know when the client read it).
    delivered: Callable[[], None] | None = None


def _error_body(
    kind: str, message: str, request_id: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if details:
        error["details"] = dict(details)
    return {"type": "error", "error": error, "request_id": request_id}


# One encoder for every body: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


@dataclass(frozen=True)
class _Route:
    kind: str  # messages, count_tokens, batch_*, models_*, unserved
    path: str  # the path recorded
    arg: str = ""  # a batch id, a model id
    platform: str = "anthropic"  # anthropic, vertex, bedrock
    stream: bool | None = None  # set by the URL (Vertex, Bedrock)


_BATCH_PATH = re.compile(r"/v1/messages/batches/([^/]+)(/cancel|/results)?$")
_MODEL_PATH = re.compile(r"/v1/models/([^/]+)$")
_VERTEX_PATH = re.compile(r"/publishers/anthropic/models/([^/:]+):(rawPredict|streamRawPredict)$")
_BEDROCK_PATH = re.compile(r"/model/([^/]+)/(invoke|invoke-with-response-stream)$")


def _route(method: str, raw_path: str) -> _Route:
    # The base URL may carry a prefix (a proxy path); the API's routes end the path.
    path = raw_path.rstrip("/")
    if method == "POST" and path.endswith(_COUNT_TOKENS):
        return _Route("count_tokens", _COUNT_TOKENS)
    if path.endswith(_BATCHES):
        if method == "POST":
            return _Route("batch_create", _BATCHES)
        if method == "GET":
            return _Route("batch_list", _BATCHES)
    match = _BATCH_PATH.search(path)
    if match is not None:
        batch_id, tail = match[1], match[2]
        kinds = {
            ("GET", None): "batch_retrieve",
            ("DELETE", None): "batch_delete",
            ("POST", "/cancel"): "batch_cancel",
            ("GET", "/results"): "batch_results",
        }
        kind = kinds.get((method, tail))
        if kind is not None:
            return _Route(kind, f"{_BATCHES}/{{id}}{tail or ''}", batch_id)
    if method == "POST" and path.endswith(_MESSAGES):
        return _Route("messages", _MESSAGES)
    if method == "GET" and path.endswith(_MODELS):
        return _Route("models_list", _MODELS)
    match = _MODEL_PATH.search(path)
    if method == "GET" and match is not None:
        return _Route("models_retrieve", f"{_MODELS}/{{id}}", match[1])
    match = _VERTEX_PATH.search(path)
    if method == "POST" and match is not None:
        if match[1] == "count-tokens":
            return _Route("count_tokens", path, platform="vertex")
        return _Route(
            "messages", path, match[1], platform="vertex", stream=match[2] == "streamRawPredict"
        )
    match = _BEDROCK_PATH.search(path)
    if method == "POST" and match is not None:
        return _Route("messages", path, match[1], platform="bedrock", stream=match[2] != "invoke")
    return _Route("unserved", path)


def _input_tokens(request: Mapping[str, Any], body: bytes, resolved: bool) -> int:
    """The fake's count of a request's input tokens: one for every 4 bytes of its JSON
    (of the request as resolved, when it named stored content: a thread, a file)."""
    return max(1, (len(_dumps(request)) if resolved else len(body)) // 4)


class FakeMessagesAPI:
    """The Messages API, offline: a :class:`~reference_agent.scripted.ScriptedModel`
    behind ``httpx2`` transports (sync and async) and an optional loopback HTTP server.

    ``model``: the scripted model (a :class:`~reference_agent.scripted.Plan` is wrapped
    in a :class:`~reference_agent.scripted.PlanModel`). ``validate``: answer invalid
    histories with HTTP 400 as the API does. ``api_key_required``: answer requests with
    no credentials with HTTP 401. ``allow_prefill``: accept a final assistant message.
    Without it, a final assistant message is still accepted when it is a reply this fake
    sent with ``stop_reason: "pause_turn"``: the API lets a paused turn be sent back as is
    to continue it. ``cache_min_tokens``: the shortest prefix prompt caching caches.
    ``context_window``: when given, a generation whose input is longer than this many
    tokens (a token for every 4 bytes of the request, as the fake's ``usage`` counts) is
    answered with HTTP 400 ``prompt is too long: N tokens > M maximum``, as the API
    answers a prompt beyond the model's context window: for an agent that compacts its
    history, a test with a small window. None (the default): no limit.

    >>> from reference_agent.scripted import Plan
    >>> api = FakeMessagesAPI(Plan(steps=(), final_answer="42"))
    >>> client = api.client(max_retries=0)
    >>> client.messages.create(model="m", max_tokens=8,
    ...     messages=[{"role": "user", "content": "?"}]).content[0].text
    '42'
    """

    def __init__(
        self,
        model: ScriptedModel | Plan,
        *,
        validate: bool = True,
        api_key_required: bool = True,
        allow_prefill: bool = False,
        cache_min_tokens: int = DEFAULT_CACHE_MIN_TOKENS,
        context_window: int | None = None,
    ) -> None:
        if context_window is not None and (
            isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
        ):
            raise ValueError(f"context_window must be a positive int (tokens) or None, not {context_window!r}")
        self.context_window = context_window
        self.model: ScriptedModel = PlanModel(model) if isinstance(model, Plan) else model
        self.validate = validate
        self.api_key_required = api_key_required
        self.allow_prefill = allow_prefill
        self.cache_min_tokens = cache_min_tokens
        # Replies sent with stop_reason "pause_turn" or cut at max_tokens, by the
        # shape of their content: sent back as the last message, they are continued.
        self._paused: set[tuple[tuple[str, str], ...]] = set()
        # The thinking and calls of every reply sent that thought, in order, by the id of
        # each call in it: with interleaved thinking, the open turn must bring them back
        # as they came (see check_interleaved_thinking).
        self._served: dict[str, Shape] = {}
        #: Every exchange, in the order the answers were built.
        self.exchanges: list[Exchange] = []
        #: What hooks raised while serving over HTTP (:meth:`serve`), where no caller
        #: could receive it; the connection was dropped instead.
        self.server_errors: list[BaseException] = []
        #: The message threads the fake holds (beta ``message-threads-2026-08-12``).
        self.threads = ThreadStore()
        #: The Message Batches the fake holds.
        self.batches = BatchStore(_weakly(self._answer_batch_request))
        self._hooks: list[Hook] = []
        self._delivery_hooks: list[DeliveryHook] = []
        self._faults: deque[_Fault] = deque()
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._counter = 0
        self._histories = HistoryIndex()
        self._last_fields: dict[str, Any] = {}
        self._cached: set[str] = set()
        self._models_seen: dict[str, None] = {}
        # The generations of one conversation extend each other: each checks only the
        # messages it adds to the last valid one (a changed prefix is checked in full).
        self._validator = RequestValidator()
        self._validator_lock = threading.Lock()
        #: The messages of the last request the validator knows, and their cache_control marks.
        self._marks: tuple[int, int] = (0, 0)
        #: The last request's tools and system (one shared copy each), and their marks.
        self._fixed_marks: tuple[Any, Any, int] = (None, None, 0)
        # Their bodies repeat the last one's messages: parsed once.
        self._parser = BodyParser()

    # -- configuration -------------------------------------------------------------

    def add_hook(self, fn: Hook) -> None:
        """Call ``fn(event, index, body)`` around every generation (see :data:`Hook`).

        >>> api = FakeMessagesAPI(Plan(steps=(), final_answer="ok"))
        >>> seen = []
        >>> api.add_hook(lambda event, index, body: seen.append((event, index)))
        >>> _ = api.client().messages.create(
        ...     model="m", max_tokens=8, messages=[{"role": "user", "content": "?"}])
        >>> seen
        [('request', 0), ('response', 0)]
        """
        with self._lock:
            self._hooks.append(fn)

    def remove_hook(self, fn: Hook) -> None:
        """Stop calling ``fn``; a hook that is not registered is ignored."""
        with self._lock, contextlib.suppress(ValueError):
            self._hooks.remove(fn)

    def add_delivery_hook(self, fn: DeliveryHook) -> None:
        """Call ``fn(index, message)`` once a streamed reply has reached the client whole:
        its last event handed over (see :data:`DeliveryHook`). A reply that is not
        streamed arrives whole with its response; a stream cut short never does. Over
        :meth:`serve`'s HTTP server nothing says when the client read the last event: it
        is never called there.

        >>> api = FakeMessagesAPI(Plan(steps=(), final_answer="ok"))
        >>> seen = []
        >>> api.add_delivery_hook(lambda index, message: seen.append(index))
        >>> with api.client().messages.stream(
        ...     model="m", max_tokens=8, messages=[{"role": "user", "content": "?"}]) as s:
        ...     _ = s.get_final_message()
        >>> seen
        [0]
        """
        with self._lock:
            self._delivery_hooks.append(fn)

    def remove_delivery_hook(self, fn: DeliveryHook) -> None:
        """Stop calling ``fn``; a hook that is not registered is ignored."""
        with self._lock, contextlib.suppress(ValueError):
            self._delivery_hooks.remove(fn)

    def _delivered(self, index: int, message: dict[str, Any]) -> None:
        for hook in tuple(self._delivery_hooks):
            hook(index, message)

    def fail_next(
        self,
        kind: FaultKind,
        *,
        times: int = 1,
        retry_after: float | None = None,
        after_events: int = CUT_AFTER_EVENTS,
        mid_reply: bool = False,
    ) -> None:
        """Answer the next ``times`` requests with the fault ``kind`` (see :data:`FaultKind`).

        ``retry_after`` (seconds) sets the ``retry-after-ms`` / ``retry-after`` headers of
        a status fault, each rounded up to its unit (:func:`retry_after_headers`: 2.5 s is
        ``2500`` ms and ``3`` s); a ``rate_limit`` defaults to 1 ms (``1`` and ``1``) so
        that tests stay fast.
        ``after_events``: how many events a stream fault lets through first (3: the
        reply's first block has opened, none of its content has come). ``mid_reply``: a
        stream fault lets the reply through up to the first delta of its last block
        instead, so that a part of its text or of its last call's input has come (the
        input's JSON unfinished when it takes more than one delta). Faults queue up in
        the order they are added.

        >>> api = FakeMessagesAPI(Plan(steps=(), final_answer="ok"))
        >>> api.fail_next("rate_limit")
        >>> _ = api.client().messages.create(
        ...     model="m", max_tokens=8, messages=[{"role": "user", "content": "?"}])
        >>> [e.status for e in api.exchanges]
        [429, 200]
        """
        if kind not in _FAULT_KINDS:
            raise ValueError(f"kind must be one of {sorted(_FAULT_KINDS)}, not {kind!r}")
        # A bool is an int to Python; times=True is a mistake, not one fault.
        if not isinstance(times, int) or isinstance(times, bool):
            raise ValueError(f"times must be int, not {times!r}")
        if not isinstance(after_events, int) or isinstance(after_events, bool):
            raise ValueError(f"after_events must be int, not {after_events!r}")
        if retry_after is not None and (not isinstance(retry_after, int | float) or isinstance(retry_after, bool)):
            raise ValueError(f"retry_after must be int or float or None, not {retry_after!r}")
        if not isinstance(mid_reply, bool):
            raise ValueError(f"mid_reply must be bool, not {mid_reply!r}")
        if times < 1:
            raise ValueError(f"times must be at least 1, not {times}")
        if retry_after is not None and retry_after < 0:
            raise ValueError(f"retry_after must be >= 0, not {retry_after}")
        if after_events < 0:
            raise ValueError(f"after_events must be >= 0, not {after_events}")
        if retry_after is None and kind == "rate_limit":
            retry_after = 0.001
        with self._lock:
            self._faults.extend(_Fault(kind, retry_after, after_events, mid_reply) for _ in range(times))

    def clear_faults(self) -> None:
        """Drop the faults not yet injected."""
        with self._lock:
            self._faults.clear()

    @property
    def pending_faults(self) -> int:
        """How many injected faults are still waiting for a request."""
        return len(self._faults)

    # -- records -------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the generation requests the model answered (a thread's
        ``continue`` with its whole history)."""
        return [e.request for e in self.exchanges if e.model_called and e.generation]

    @property
    def model_calls(self) -> int:
        """How many generations the scripted model answered (batch requests excluded)."""
        return sum(1 for e in self.exchanges if e.model_called)

    # -- clients and transports ----------------------------------------------------

    def transport(self) -> httpx2.BaseTransport:
        """An ``httpx2`` transport serving this API: ``httpx2.Client(transport=...)``."""
        return _SyncTransport(self)

    def async_transport(self) -> httpx2.AsyncBaseTransport:
        """The async twin of :meth:`transport`."""
        return _AsyncTransport(self)

    def client(self, **kwargs: Any) -> anthropic.Anthropic:
        """An ``anthropic.Anthropic`` talking to this fake; ``kwargs`` go to the SDK.

        Credentials default to :data:`FAKE_API_KEY`; ``max_retries`` keeps the
        SDK's default unless given.
        """
        import anthropic

        _default_credentials(kwargs)
        kwargs.setdefault("http_client", httpx2.Client(transport=self.transport()))
        return anthropic.Anthropic(**kwargs)

    def async_client(self, **kwargs: Any) -> anthropic.AsyncAnthropic:
        """An ``anthropic.AsyncAnthropic`` talking to this fake (see :meth:`client`)."""
        import anthropic

        _default_credentials(kwargs)
        kwargs.setdefault("http_client", httpx2.AsyncClient(transport=self.async_transport()))
        return anthropic.AsyncAnthropic(**kwargs)

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """Serve this API over real HTTP on ``127.0.0.1`` at a free port; yield the base URL.

        For agents in child processes (which the harness may SIGKILL): point them at the
        URL with ``base_url=`` or ``ANTHROPIC_BASE_URL``. Network faults become dropped
        connections; streams are sent event by event (chunked); what a hook raises is kept
        in :attr:`server_errors` and the connection is dropped. The server stops when the
        block exits.

        >>> import anthropic
        >>> api = FakeMessagesAPI(Plan(steps=(), final_answer="served"))
        >>> with api.serve() as url:
        ...     client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        ...     client.messages.create(model="m", max_tokens=8,
        ...         messages=[{"role": "user", "content": "?"}]).content[0].text
        'served'
        """
        server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="agentckpt-fake-api",
            daemon=True,
        )
        thread.start()
        try:
            host, port = server.server_address[:2]
            yield f"http://{host!s}:{port}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

    # -- the API -------------------------------------------------------------------

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes, str | None]:
        """Serve one raw request: ``(status, headers, body, drop)``.

        ``drop`` is ``None`` when the answer is delivered, else the network failure the
        client must see instead (``timeout``, ``disconnect``, ``connect_error``; a stream
        cut short is ``disconnect`` with the events sent before it in ``body``). Used by
        front ends that take whole bodies; :meth:`respond` gives the events of a stream.
        """
        reply = self.respond(method, path, headers, body)
        drop = reply.drop or ("disconnect" if reply.stream_drop else None)
        return reply.status, reply.headers, reply.body, drop

    def respond(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        query: str = "",
        base_url: str = "",
    ) -> Reply:
        """Serve one raw request as a :class:`Reply` (a stream's events one by one).

        ``query`` is the URL's query string; ``base_url`` (``scheme://host[/prefix]``) is
        where the client reaches this fake, for the URLs the fake hands out (a batch's
        ``results_url``).
        """
        return self._handle(method, path, headers, body, query=query, base_url=base_url)

    def _next_index(self) -> int:
        with self._lock:
            index = self._counter
            self._counter += 1
            return index

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def _continues_paused_turn(self, messages: Any) -> bool:
        if not isinstance(messages, list) or not messages:
            return False
        last = messages[-1]
        if not isinstance(last, dict) or last.get("role") != "assistant":
            return False
        with self._lock:
            return _content_shape(last.get("content")) in self._paused

    def _run_hooks(self, event: Literal["request", "response"], index: int, body: Any) -> None:
        for hook in tuple(self._hooks):
            hook(event, index, body)

    def _share_fields(self, request: Mapping[str, Any]) -> dict[str, Any]:
        # Tools and system repeat in every request of a conversation: keep one copy.
        fields = {}
        last = self._last_fields
        for name, value in request.items():
            if name == "messages":
                continue
            previous = last.get(name)
            if (
                isinstance(value, (list, dict))
                and type(previous) is type(value)
                and previous is not value
                and previous == value
            ):
                value = previous
            fields[name] = value
        self._last_fields = fields
        return fields

    def _handle(
        self,
        method: str,
        raw_path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        query: str = "",
        base_url: str = "",
    ) -> Reply:
        index = self._next_index()
        request_id = f"req_offline{index:012d}"
        base_headers = [("request-id", request_id)]
        route = _route(method, raw_path)
        generation = route.kind == "messages"
        if generation:
            # The API reports its rate limits on every generation's answer; agents that
            # pace themselves read them (``with_raw_response``).
            base_headers.extend(rate_limit_headers())
        record: dict[str, Any] = {"fields": {}, "history": None}

        def error(
            status: int,
            kind: str,
            message: str,
            details: Mapping[str, Any] | None = None,
            headers: Mapping[str, str] | None = None,
        ) -> Reply:
            payload = _error_body(kind, message, request_id, details)
            extra = dict(headers or {})
            # A header the error sets (a 429's spent rate limit) replaces the base one.
            reply_headers = [(k, v) for k, v in base_headers if k not in extra]
            reply_headers.append(("content-type", "application/json"))
            reply_headers.extend(extra.items())
            return Reply(status, _dumps(payload), reply_headers)

        def finish(reply: Reply, message: dict[str, Any] | None = None, **fields: Any) -> Reply:
            if message is None and reply.body and reply.events is None:
                with contextlib.suppress(ValueError):
                    parsed = json.loads(reply.body)
                    message = parsed if isinstance(parsed, dict) else {"data": parsed}
            self._record(
                Exchange(
                    index=index,
                    path=route.path,
                    headers=headers,
                    status=reply.status if reply.drop is None else 0,
                    response=message,
                    reply_headers=reply.headers,
                    generation=generation,
                    method=method,
                    **record,
                    **fields,
                )
            )
            return reply

        if route.kind == "unserved":
            return finish(
                error(
                    404,
                    "not_found_error",
                    f"The fake Messages API does not serve {method} {route.path}. "
                    f"It serves: {_SERVED}.",
                )
            )
        request: dict[str, Any] = {}
        if method == "POST" and (body.strip() or generation or route.kind == "count_tokens"):
            try:
                parsed = self._parser.parse(body or b"null") if generation else json.loads(body or b"null")
            except ValueError:
                record["raw"] = body
                return finish(
                    error(400, "invalid_request_error", "There was an error parsing the body")
                )
            if not isinstance(parsed, dict):
                record["raw"] = body
                return finish(
                    error(400, "invalid_request_error", "Input should be a valid dictionary")
                )
            request = parsed
        if route.platform != "anthropic" and route.arg:
            request["model"] = route.arg

        resolved: Resolved | None = None
        if generation:
            try:
                resolved = self.threads.resolve(request)
            except ThreadError as exc:
                record["fields"] = request
                details = {"error_code": exc.error_code} if exc.error_code else None
                return finish(error(exc.status, exc.error_type, str(exc), details))
            if resolved is not None:
                record["sent_fields"] = {k: v for k, v in request.items() if k != "messages"}
                sent = request.get("messages")
                record["sent_messages"] = list(sent) if isinstance(sent, list) else []
                request = resolved.request
            messages = request.get("messages")
            if isinstance(messages, list):
                history: History
                if resolved is not None:
                    history = resolved.base.extend(record["sent_messages"])
                    self._histories.remember(history, messages)
                else:
                    history = self._histories.share(messages)
                record["history"] = history
                record["fields"] = self._share_fields(request)
            else:
                record["fields"] = request
            # The model, the checks and the hooks see the interleaved-thinking beta of the
            # header (the record keeps the body as sent).
            request = _with_header_betas(request, headers)
            self._run_hooks("request", index, request)
        else:
            record["fields"] = request

        try:
            if self.api_key_required and not _has_credentials(headers):
                return finish(error(401, "authentication_error", "x-api-key header is required"))

            stream = bool(request.get("stream")) if route.stream is None else route.stream
            with self._lock:
                fault = self._faults[0] if self._faults else None
                if (
                    fault is not None
                    and fault.kind in _STREAM_FAULTS
                    and not (generation and stream)
                ):
                    fault = None  # a stream fault waits for a streaming generation
                elif fault is not None and fault.kind == "max_tokens" and not generation:
                    fault = None  # a cut reply waits for a generation
                elif fault is not None:
                    self._faults.popleft()
            if fault is not None and fault.kind in _STATUS_FAULTS:
                status, kind, text = _STATUS_FAULTS[fault.kind]
                extra: dict[str, str] = {}
                if fault.kind == "rate_limit":
                    extra.update(rate_limit_headers(exhausted=True))
                if fault.retry_after is not None:
                    extra.update(retry_after_headers(fault.retry_after))
                return finish(error(status, kind, text, headers=extra), fault=fault.kind)
            if fault is not None and fault.kind not in _REPLY_FAULTS:
                return finish(
                    Reply(0, b"", base_headers, drop=fault.kind),
                    fault=fault.kind,
                    delivered=False,
                )

            if not generation:
                return finish(
                    self._serve_other(route, request, body, query, base_url, base_headers, error)
                )
            reply = self._generate(
                index,
                request,
                body,
                stream,
                fault,
                resolved,
                record["history"],
                base_headers,
                error,
                finish,
            )
            if route.platform == "bedrock" and reply.events is not None:
                # Bedrock frames each event as an AWS event-stream message.
                reply.events = [bedrock_event(event) for event in reply.events]
                reply.body = b"".join(reply.events)
                reply.headers = [
                    (k, "application/vnd.amazon.eventstream" if k == "content-type" else v)
                    for k, v in reply.headers
                ]
            return reply
        finally:
            # Whatever became of it, the continue is no longer in flight.
            self.threads.finish(resolved, continued=False)

    def _breakpoint_error(self, request: Mapping[str, Any], in_messages: int) -> str | None:
        """:func:`~reference_agent.validation.breakpoint_error`, the marks of tools and
        system counted again only when they changed (they repeat, shared, in every
        request of a conversation)."""
        tools, system, fixed = self._fixed_marks
        if tools is not request.get("tools") or system is not request.get("system"):
            tools, system, fixed = request.get("tools"), request.get("system"), fixed_marks(request)
            self._fixed_marks = (tools, system, fixed)
        return breakpoint_error(in_messages + fixed + (request.get("cache_control") is not None))

    def _check_generation(
        self, request: Mapping[str, Any], path: str, *, incremental: bool = True
    ) -> str | None:
        problem = _check_request(request, path)
        if problem is None and self.validate:
            messages = request["messages"]
            allow_prefill = self.allow_prefill or self._continues_paused_turn(messages)
            thinking = _thinking_enabled(request)
            try:
                if incremental:
                    with self._validator_lock:
                        start = self._validator.validate(
                            messages, allow_prefill=allow_prefill, thinking=thinking
                        )
                        problem = _check_signatures(messages, start)
                        # Cache marks, counted in the messages this request adds only:
                        # the validator knows the rest, the last request's.
                        count, marks = self._marks if start and start == self._marks[0] else (0, 0)
                        for message in messages[count:]:
                            marks += message_marks(message)
                        self._marks = (len(messages), marks)
                        problem = problem or self._breakpoint_error(request, marks)
                        if problem is not None:
                            self._validator.forget()
                            self._marks = (0, 0)
                else:
                    validate_messages(messages, allow_prefill=allow_prefill, thinking=thinking)
                    problem = _check_signatures(messages) or request_rule_error(request)
                if problem is None and thinking and interleaved_thinking(request):
                    # Every thinking block of the open turn, unchanged and in place: only
                    # those of replies this fake sent can be checked.
                    check_interleaved_thinking(messages, self._served)
            except InvalidHistoryError as exc:
                problem = str(exc)
        return problem

    def _remember_thinking(self, content: Any) -> None:
        """Remember a reply's thinking and calls, in order, when it thought."""
        shape = thinking_shape(content)
        if shape is None:
            return
        with self._lock:
            if len(self._served) > 100_000:
                self._served.clear()
            remember_shape(self._served, shape)

    def _generate(
        self,
        index: int,
        request: dict[str, Any],
        body: bytes,
        stream: bool,
        fault: _Fault | None,
        resolved: Resolved | None,
        history: History | None,
        base_headers: list[tuple[str, str]],
        error: Callable[..., Reply],
        finish: Callable[..., Reply],
    ) -> Reply:
        problem = self._check_generation(request, _MESSAGES)
        if problem is None and self.context_window is not None:
            tokens = _input_tokens(request, body, resolved is not None)
            if tokens > self.context_window:
                problem = f"prompt is too long: {tokens} tokens > {self.context_window} maximum"
        if problem is not None:
            return finish(error(400, "invalid_request_error", problem))
        try:
            # The fake parsed this request itself: a model that can resume its reading of
            # the last request's history (a PlanModel) reads only the messages added.
            respond = getattr(self.model, "_respond_parsed", None)
            if respond is None:
                respond = getattr(self.model, "respond", None)
                if not callable(respond):
                    # Inside the try: a model without respond() is a broken script too,
                    # not a connection error for the SDK to retry.
                    raise TypeError(
                        f"{self.model!r:.200} has no respond(request) method: the model is a "
                        "Plan, a PlanModel, a CannedModel, or an object with "
                        "respond(request) -> Message JSON"
                    )
                if not isinstance(self.model, CannedModel):
                    # A model of the test's own gets a request of its own: the parsed
                    # messages are shared with the next request's parse (and the record), so
                    # an edit it made would change the history the fake sees next.
                    respond = _on_a_copy(respond)
            with self._model_lock:
                message = respond(request)
        except Exception as exc:
            # A broken script is the test's bug, not a transient fault: tell the SDK not
            # to retry, and say what went wrong in the error it raises.
            reply = error(
                500,
                "api_error",
                f"scripted model failed: {type(exc).__name__}: {exc}",
                headers={"x-should-retry": "false"},
            )
            return finish(reply, model_called=True)
        scripted = message
        if fault is not None and fault.kind == "max_tokens":
            limit = request.get("max_tokens")
            message = max_tokens_reply(message, limit if isinstance(limit, int) else None)
        else:
            # The request's stop_sequences and max_tokens end the reply as they end
            # Claude's: cut before a stop sequence, or where the token limit falls.
            message = limited_reply(message, request)
        if message is not scripted and message.get("stop_reason") == "max_tokens":
            blocks = message.get("content") or ()
            if not any(b.get("type") == "tool_use" for b in blocks):
                # A cut text may come back as a prefill to be continued; a cut tool call
                # may not (it has no result), as with the API.
                with self._lock:
                    self._paused.add(_content_shape(blocks))
        self._remember_thinking(message.get("content"))
        threaded = is_threaded(request)
        if threaded and isinstance(message.get("id"), str) and message["id"] in self.threads:
            # Thread state is kept by reply id: two replies may not share one.
            message["id"] = f"{message['id']}_{index:06d}"
        if message.get("stop_reason") == "pause_turn":
            with self._lock:
                self._paused.add(_content_shape(message.get("content")))
        self._fill_usage(message, request, body, resolved is not None)

        if stream:
            events = sse_events(message)
            plan = StreamPlan()
            if fault is not None and fault.kind in _STREAM_FAULTS:
                cut = "disconnect" if fault.kind == "stream_disconnect" else "error"
                after = _mid_reply(events) if fault.mid_reply else fault.after_events
                plan = StreamPlan(cut, min(after, len(events) - 1))
            sent = plan.events(events)
            reply = Reply(
                200,
                b"".join(sent),
                [
                    *base_headers,
                    ("content-type", "text/event-stream; charset=utf-8"),
                    ("cache-control", "no-cache"),
                ],
                events=sent,
                stream_drop=plan.drops,
            )
            whole = plan.cut is None
            if whole:
                reply.delivered = functools.partial(self._delivered, index, message)
        else:
            reply = Reply(
                200, _dumps(message), [*base_headers, ("content-type", "application/json")]
            )
            whole = True
        stream_fault = fault is not None and fault.kind in _STREAM_FAULTS

        def held() -> None:
            # The server holds a reply it built whole, delivered or not; a stream cut
            # short holds none of it (the SDK starts a new thread then).
            if threaded and whole and history is not None:
                self.threads.hold(str(message.get("id")), history, message, request)
                self.threads.finish(resolved, continued=True)

        try:
            self._run_hooks("response", index, message)
        except BaseException:
            # The model did the work; the client never hears of it.
            held()
            finish(reply, message, stream=stream, model_called=True, delivered=False)
            raise
        held()
        if fault is not None and fault.kind == "lost_response":
            reply.drop = "disconnect"
        if fault is not None and (fault.kind == "lost_response" or stream_fault):
            return finish(
                reply,
                message,
                stream=stream,
                fault=fault.kind,
                model_called=True,
                delivered=False,
            )
        if fault is not None and fault.kind == "max_tokens":
            return finish(reply, message, stream=stream, fault=fault.kind, model_called=True)
        return finish(reply, message, stream=stream, model_called=True)

    def _fill_usage(
        self, message: dict[str, Any], request: Mapping[str, Any], body: bytes, resolved: bool
    ) -> None:
        """Usage as the API returns it: numbers for every token count it sends."""
        usage = message.get("usage")
        if not isinstance(usage, dict):
            usage = message["usage"] = {"input_tokens": 0, "output_tokens": 1}
        total = _input_tokens(request, body, resolved)
        if not resolved and b"cache_control" not in body and b"\\u" not in body:
            # The body is the whole request and names no cache breakpoint (nor escapes a
            # character that could spell one): nothing is cached, as a walk would find.
            creation = read = 0
        else:
            creation, read = self._cache_usage(request)
        if not usage.get("input_tokens"):
            usage["input_tokens"] = max(1, total - creation - read)
        usage.setdefault("cache_creation_input_tokens", creation)
        usage.setdefault("cache_read_input_tokens", read)
        if usage["cache_creation_input_tokens"] is None:
            usage["cache_creation_input_tokens"] = creation
        if usage["cache_read_input_tokens"] is None:
            usage["cache_read_input_tokens"] = read
        if not isinstance(usage.get("cache_creation"), dict):
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": usage["cache_creation_input_tokens"],
                "ephemeral_1h_input_tokens": 0,
            }
        if usage.get("output_tokens") is None:
            usage["output_tokens"] = 1
        usage.setdefault("service_tier", "standard")

    def _cache_usage(self, request: Mapping[str, Any]) -> tuple[int, int]:
        """``(cache_creation_input_tokens, cache_read_input_tokens)`` for ``request``.

        A prefix ending at a ``cache_control`` block (tools, then system, then messages;
        a top-level ``cache_control`` marks the last block) is written to the cache the
        first time and read from it later, if it is at least ``cache_min_tokens`` long.
        """
        segments: list[tuple[Any, bool]] = []
        tools = request.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            segments.append((tool, isinstance(tool, dict) and "cache_control" in tool))
        system = request.get("system")
        if isinstance(system, list):
            for block in system:
                segments.append((block, isinstance(block, dict) and "cache_control" in block))
        elif system:
            segments.append((system, False))
        messages = request.get("messages")
        for message in messages if isinstance(messages, list) else ():
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                for block in content:
                    segments.append((block, isinstance(block, dict) and "cache_control" in block))
            else:
                segments.append((content, False))
        if request.get("cache_control") and segments:
            segments[-1] = (segments[-1][0], True)
        if not any(marked for _, marked in segments):
            return 0, 0
        digest = hashlib.sha256()
        chars = 0
        points: list[tuple[str, int]] = []
        for value, marked in segments:
            encoded = _CANONICAL.encode(_without_cache_control(value))
            digest.update(encoded.encode())
            chars += len(encoded)
            if marked:
                points.append((digest.hexdigest(), chars // 4))
        points = [(key, tokens) for key, tokens in points if tokens >= self.cache_min_tokens]
        if not points:
            return 0, 0
        with self._lock:
            read = max((tokens for key, tokens in points if key in self._cached), default=0)
            if len(self._cached) > 100_000:
                self._cached.clear()
            self._cached.update(key for key, _ in points)
        return max(0, points[-1][1] - read), read

    # -- batches, models, count_tokens -----------------------------------------------

    def _answer_batch_request(
        self, params: dict[str, Any], custom_id: str
    ) -> tuple[str, dict[str, Any]]:
        index = self._next_index()
        request_id = f"req_offline{index:012d}"
        if params.get("stream"):
            problem: str | None = "stream: streaming is not supported in a batch request"
        else:
            # Batch requests are conversations of their own: each is checked in full.
            problem = self._check_generation(params, _MESSAGES, incremental=False)
        if problem is not None:
            return "errored", _error_body("invalid_request_error", problem, request_id)
        try:
            with self._model_lock:
                message = self.model.respond(params)
        except Exception as exc:
            text = f"scripted model failed: {type(exc).__name__}: {exc}"
            return "errored", _error_body("api_error", text, request_id)
        message = limited_reply(message, params)
        self._fill_usage(message, params, _dumps(params), False)
        message["usage"]["service_tier"] = "batch"
        return "succeeded", message

    def _serve_other(
        self,
        route: _Route,
        request: dict[str, Any],
        body: bytes,
        query: str,
        base_url: str,
        base_headers: list[tuple[str, str]],
        error: Callable[..., Reply],
    ) -> Reply:
        kind = route.kind

        def ok(payload: Any, content_type: str = "application/json") -> Reply:
            return Reply(200, payload, [*base_headers, ("content-type", content_type)])

        if kind == "count_tokens":
            problem = _check_request(request, _COUNT_TOKENS)
            if problem is None and self.validate:
                try:
                    validate_messages(
                        request["messages"],
                        allow_prefill=True,
                        thinking=_thinking_enabled(request),
                    )
                except InvalidHistoryError as exc:
                    problem = str(exc)
            if problem is not None:
                return error(400, "invalid_request_error", problem)
            return ok(_dumps({"input_tokens": max(1, len(body) // 4)}))
        params = parse_qs(query)
        try:
            if kind == "batch_create":
                return ok(_dumps(self.batches.create(request, base_url)))
            if kind == "batch_list":
                return ok(_dumps(self.batches.listing(params)))
            if kind == "batch_retrieve":
                return ok(_dumps(self.batches.retrieve(route.arg)))
            if kind == "batch_cancel":
                return ok(_dumps(self.batches.cancel(route.arg)))
            if kind == "batch_delete":
                return ok(_dumps(self.batches.delete(route.arg)))
            if kind == "batch_results":
                lines = self.batches.results(route.arg)
                jsonl = b"".join(_dumps(line) + b"\n" for line in lines)
                return ok(jsonl, "application/binary")
        except BatchError as exc:
            return error(exc.status, exc.error_type, str(exc))
        catalogue = self._catalogue()
        if kind == "models_list":
            return ok(_dumps(page(catalogue, params)))
        known = {info["id"]: info for info in catalogue}
        if route.arg in known:
            return ok(_dumps(known[route.arg]))
        return error(404, "not_found_error", f"model: {route.arg}")

    def _catalogue(self) -> list[dict[str, Any]]:
        listed = [model_info(mid, name, rank) for rank, (mid, name) in enumerate(MODELS)]
        ids = {info["id"] for info in listed}
        model = getattr(self.model, "model", None)
        if isinstance(model, str) and model not in ids:
            listed.append(model_info(model, None, len(listed)))
        return listed


def _weakly(method: Callable[[dict[str, Any], str], tuple[str, dict[str, Any]]]) -> Callable[[dict[str, Any], str], tuple[str, dict[str, Any]]]:
    """``method`` without a strong reference to its object: the fake's batch store calls
    back into the fake, and a strong reference would make every fake a reference cycle
    (freed only by the garbage collector's passes, not when the last user drops it)."""
    ref = weakref.WeakMethod(method)

    def call(params: dict[str, Any], custom_id: str) -> tuple[str, dict[str, Any]]:
        bound = ref()
        if bound is None:
            raise RuntimeError("the FakeMessagesAPI that owns this batch store is gone: keep the fake, not only its batches")
        return bound(params, custom_id)

    return call


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict) and "cache_control" in value:
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


def _check_signatures(messages: Any, start: int = 0) -> str | None:
    """The API's complaint about a thinking block a scripted model signed and the client
    changed (the API checks every signature; offline only ours can be checked), in
    ``messages[start:]`` (the messages before ``start`` are known to have passed)."""
    for i in range(start, len(messages)):
        message = messages[i]
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for k, block in enumerate(content):
            is_thinking = isinstance(block, dict) and block.get("type") == "thinking"
            if is_thinking and signature_matches(block) is False:
                return f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block"
    return None


def _with_header_betas(request: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """``request``, with the betas of an ``anthropic-beta`` header that turns on interleaved
    thinking in ``anthropic_beta`` (where Bedrock carries them in the body), so that the
    model and the checks see them; ``request`` itself when there is none to add."""
    header = headers.get("anthropic-beta") or ""
    if INTERLEAVED_THINKING_BETA not in header or "anthropic_beta" in request:
        return request
    return {**request, "anthropic_beta": [b.strip() for b in header.split(",") if b.strip()]}


def _content_shape(content: Any) -> tuple[tuple[str, str], ...]:
    """What identifies a reply's content when it comes back: each block's type and its id
    or text (the SDK may add or drop empty fields when it serializes blocks)."""
    if isinstance(content, str):
        return (("text", content),)
    shape = []
    for block in content or ():
        if not isinstance(block, dict):
            continue
        key = (
            block.get("id")
            or block.get("text")
            or block.get("signature")
            or block.get("tool_use_id")
            or ""
        )
        shape.append((str(block.get("type")), str(key)))
    return tuple(shape)


def _has_credentials(headers: Mapping[str, str]) -> bool:
    # ``in`` first: a missing key costs ``httpx2.Headers.get`` a raised KeyError.
    api_key = headers.get("x-api-key") if "x-api-key" in headers else None
    if api_key:
        return True
    authorization = headers.get("authorization") or ""
    scheme, _, token = authorization.partition(" ")
    # Bearer tokens (OAuth, Vertex) and AWS SigV4 signatures (Bedrock).
    return scheme.lower() in ("bearer", "aws4-hmac-sha256") and bool(token.strip())


def _thinking_enabled(request: Mapping[str, Any]) -> bool:
    config = request.get("thinking")
    return isinstance(config, Mapping) and config.get("type") in ("enabled", "adaptive")


def _check_request(request: Mapping[str, Any], path: str) -> str | None:
    """The API's complaint about the request's top-level fields, if any."""
    if "model" not in request:
        return "model: Field required"
    if path == _MESSAGES and "max_tokens" not in request:
        return "max_tokens: Field required"
    if "messages" not in request:
        return "messages: Field required"
    if not isinstance(request["messages"], list):
        return "messages: Input should be a valid list"
    if path == _MESSAGES:
        limit = request["max_tokens"]
        if not isinstance(limit, int) or isinstance(limit, bool):
            return "max_tokens: Input should be a valid integer"
        if limit < 1:
            return "max_tokens: Input should be greater than or equal to 1"
    system = request.get("system")
    if system is not None and not isinstance(system, str):
        # A string, or a list of text blocks: a number or an object is a 400.
        if not isinstance(system, list):
            return "system: Input should be a valid string or a valid list"
        for index, block in enumerate(system):
            if not isinstance(block, Mapping) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                return f"system.{index}: Input should be a text block ({{'type': 'text', 'text': ...}})"
    metadata = request.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            return "metadata: Input should be a valid dictionary"
        user = metadata.get("user_id")
        if user is not None and not isinstance(user, str):
            return "metadata.user_id: Input should be a valid string"
    stops = request.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list):
            return "stop_sequences: Input should be a valid list"
        for index, stop in enumerate(stops):
            if not isinstance(stop, str):
                return f"stop_sequences.{index}: Input should be a valid string"
    tools = request.get("tools")
    names: set[Any] = set()
    for index, tool in enumerate(tools if isinstance(tools, list) else ()):
        problem = client_tool_error(index, tool)
        if problem is not None:
            return problem
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if name is not None and name in names:
            return "tools: Tool names must be unique."
        names.add(name)
    choice = request.get("tool_choice")
    if choice is not None and not names:
        # The API refuses any tool_choice, "auto" and "none" included, on a request that
        # offers no tools.
        kind = choice.get("type") if isinstance(choice, Mapping) else None
        where = f"tool_choice.{kind}" if isinstance(kind, str) else "tool_choice"
        return f"{where}: tool_choice may only be specified while providing tools"
    if isinstance(choice, Mapping) and choice.get("type") == "tool" and choice.get("name") not in names:
        return f"tool_choice: the tool {choice.get('name')!r} is not among the request's tools"
    if (
        path == _MESSAGES
        and _thinking_enabled(request)
        and isinstance(choice, Mapping)
        and choice.get("type") in ("any", "tool")
    ):
        return "Thinking may not be enabled when tool_choice forces tool use."
    return _budget_error(request)


#: The least ``thinking.budget_tokens`` the API takes.
MIN_THINKING_BUDGET = 1024


def _budget_error(request: Mapping[str, Any]) -> str | None:
    """The API's complaint about manual thinking's ``budget_tokens``: at least 1024, and
    below ``max_tokens`` unless thinking is interleaved (the budget then spans every
    thinking block of the assistant turn, and may exceed ``max_tokens``)."""
    config = request.get("thinking")
    if not isinstance(config, Mapping) or config.get("type") != "enabled":
        return None
    budget = config.get("budget_tokens")
    if budget is None:
        return "thinking.enabled.budget_tokens: Field required"
    if not isinstance(budget, int) or isinstance(budget, bool):
        return "thinking.enabled.budget_tokens: Input should be a valid integer"
    if budget < MIN_THINKING_BUDGET:
        return f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}"
    max_tokens = request.get("max_tokens")
    if isinstance(max_tokens, int) and budget >= max_tokens and not interleaved_thinking(request):
        return (
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation "
            "at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
        )
    return None


def _default_credentials(kwargs: dict[str, Any]) -> None:
    credentials = ("api_key", "auth_token", "credentials", "config", "profile")
    if not any(kwargs.get(name) is not None for name in credentials):
        kwargs["api_key"] = FAKE_API_KEY


def network_error(drop: str, request: Any, http: Any = httpx2) -> Any:
    """The transport error a dropped reply raises: ``http`` is ``httpx2`` (the SDK's) or
    ``httpx`` (respx's), whose error classes have the same names and signatures."""
    if drop == "timeout":
        return http.ReadTimeout("The read operation timed out", request=request)
    if drop == "connect_error":
        return http.ConnectError("[Errno 111] Connection refused", request=request)
    return http.RemoteProtocolError(
        "Server disconnected without sending a response.", request=request
    )


def _base_url(request: httpx2.Request) -> str:
    url = request.url
    path = url.path
    cut = path.find("/v1/")
    prefix = path[:cut] if cut > 0 else ""
    return f"{url.scheme}://{url.netloc.decode('ascii')}{prefix}"


def _query(request: httpx2.Request) -> str:
    return request.url.query.decode("ascii")


class _SyncTransport(httpx2.BaseTransport):
    def __init__(self, api: FakeMessagesAPI) -> None:
        self._api = api

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        reply = self._api.respond(
            request.method,
            request.url.path,
            RequestHeaders.of(request.headers.raw),
            request.read(),
            query=_query(request),
            base_url=_base_url(request),
        )
        if reply.drop is not None:
            raise network_error(reply.drop, request)
        if reply.events is not None:
            return httpx2.Response(
                reply.status,
                headers=reply.headers,
                stream=SyncEventStream(
                    reply.events, drop=reply.stream_drop, request=request, delivered=reply.delivered
                ),
                request=request,
            )
        return httpx2.Response(
            reply.status, headers=reply.headers, content=reply.body, request=request
        )


class _AsyncTransport(httpx2.AsyncBaseTransport):
    def __init__(self, api: FakeMessagesAPI) -> None:
        self._api = api

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        reply = self._api.respond(
            request.method,
            request.url.path,
            RequestHeaders.of(request.headers.raw),
            body,
            query=_query(request),
            base_url=_base_url(request),
        )
        if reply.drop is not None:
            raise network_error(reply.drop, request)
        if reply.events is not None:
            return httpx2.Response(
                reply.status,
                headers=reply.headers,
                stream=AsyncEventStream(
                    reply.events, drop=reply.stream_drop, request=request, delivered=reply.delivered
                ),
                request=request,
            )
        return httpx2.Response(
            reply.status, headers=reply.headers, content=reply.body, request=request
        )


def _handler_for(api: FakeMessagesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # A client that vanishes (SIGKILLed) must not pin a server thread forever.
        timeout = 60

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = RequestHeaders.of(self.headers.items())
            url = urlsplit(self.path)
            host = headers.get("host") or "127.0.0.1"
            cut = url.path.find("/v1/")
            base_url = f"http://{host}{url.path[:cut] if cut > 0 else ''}"
            try:
                reply = api.respond(
                    self.command, url.path, headers, body, query=url.query, base_url=base_url
                )
            except BaseException as exc:  # a hook's crash: drop the connection
                api.server_errors.append(exc)
                self.close_connection = True
                return
            if reply.drop is not None:
                # No answer at all: the client sees the connection close.
                self.close_connection = True
                return
            self.send_response(reply.status)
            for name, value in reply.headers:
                self.send_header(name, value)
            if reply.events is None:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            # A stream goes out event by event, chunked, as the API sends it; a cut
            # stream closes without the last chunk, which clients see as a broken body.
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for event in reply.events:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            if reply.stream_drop:
                self.close_connection = True
                return
            # No delivery here: the last chunk written is not the last chunk read (the
            # client may still be reading the first), and over a socket nothing says when.
            self.wfile.write(b"0\r\n\r\n")

        do_POST = _serve
        do_GET = _serve
        do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean; the exchanges are the log

    return Handler


def offline_client(model: ScriptedModel | Plan, **kwargs: Any) -> anthropic.Anthropic:
    """An ``anthropic.Anthropic`` whose replies come from ``model``, offline.

    >>> from reference_agent.scripted import CannedModel
    >>> client = offline_client(CannedModel(["pong"]))
    >>> client.messages.create(model="m", max_tokens=8,
    ...     messages=[{"role": "user", "content": "ping"}]).content[0].text
    'pong'
    """
    return FakeMessagesAPI(model).client(**kwargs)


def _on_a_copy(respond: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    """``respond`` called on a deep copy of each request."""

    def call(request: dict[str, Any]) -> Any:
        return respond(copy.deepcopy(request))

    return call


class _QuietServer(ThreadingHTTPServer):
    """The fake's HTTP server: a client that goes away mid-exchange (a SIGKILLed child, a
    keep-alive connection reset) is what the harness does on purpose, not an error to
    print with a traceback, as socketserver does by default."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


def _mid_reply(events: Sequence[bytes]) -> int:
    """How many of a reply's ``events`` a cut in the middle lets through: up to and with
    the first delta of its last content block (:data:`CUT_AFTER_EVENTS`, the first block
    opened, if it has none).

    >>> _mid_reply([b"event: message_start", b"event: ping", b"event: content_block_start",
    ...             b"event: content_block_delta", b"event: content_block_delta"])
    4
    """
    starts = [i for i, event in enumerate(events) if event.startswith(b"event: content_block_start")]
    if not starts:
        return CUT_AFTER_EVENTS
    for i in range(starts[-1] + 1, len(events)):
        if events[i].startswith(b"event: content_block_delta"):
            return i + 1
    return CUT_AFTER_EVENTS
