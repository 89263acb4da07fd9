"""A fake Messages API: a scripted model behind the real ``anthropic`` SDK, offline.

:class:`FakeMessagesAPI` answers ``POST /v1/messages`` (plain and streaming) and
``POST /v1/messages/count_tokens`` as the API does — same JSON shapes, same error bodies
and status codes — from an ``httpx2`` transport the SDK sends through, or from a real HTTP
server on loopback (:meth:`FakeMessagesAPI.serve`) for agents in child processes. Every
request is checked with :func:`~reference_agent.validation.validate_messages`, so an
invalid history gets the API's HTTP 400, and every exchange is recorded.

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
import functools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal, get_args
from urllib.parse import urlsplit

import httpx2

from .scripted import Plan, PlanModel, ScriptedModel
from .validation import InvalidHistoryError, validate_messages

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "FAKE_API_KEY",
    "Exchange",
    "FakeMessagesAPI",
    "FaultKind",
    "Hook",
    "offline_client",
]

#: The API key the fake's clients send. Any non-empty key is accepted.
FAKE_API_KEY = "sk-ant-offline-fake"

#: Faults :meth:`FakeMessagesAPI.fail_next` can inject.
#:
#: - ``rate_limit``: HTTP 429 ``rate_limit_error`` with ``retry-after-ms`` / ``retry-after``;
#: - ``server_error``: HTTP 500 ``api_error``;
#: - ``overloaded``: HTTP 529 ``overloaded_error``;
#: - ``timeout``: no answer in time (``httpx2.ReadTimeout``);
#: - ``disconnect``: the connection drops before an answer (``httpx2.RemoteProtocolError``);
#: - ``connect_error``: the connection cannot be opened (``httpx2.ConnectError``);
#: - ``lost_response``: the model *did* reply — the exchange is recorded and the plan has
#:   advanced server-side — but the answer never reaches the client (connection dropped).
FaultKind = Literal[
    "rate_limit",
    "server_error",
    "overloaded",
    "timeout",
    "disconnect",
    "connect_error",
    "lost_response",
]
_FAULT_KINDS: frozenset[str] = frozenset(get_args(FaultKind))
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

#: ``fn(event, index, body)``: ``event`` is ``"request"`` (before the model is consulted;
#: ``body`` is the request JSON) or ``"response"`` (after the reply is built, before it is
#: delivered; ``body`` is the ``Message`` JSON). What it raises propagates out of the
#: transport — including ``BaseException`` subclasses, which is how crashes are injected.
Hook = Callable[[Literal["request", "response"], int, dict[str, Any]], None]

_MESSAGES = "/v1/messages"
_COUNT_TOKENS = "/v1/messages/count_tokens"


@dataclass(frozen=True)
class Exchange:
    """One request the fake received and what became of it.

    ``status`` is the HTTP status sent, or ``0`` when no answer reached the client (a
    timeout, a dropped connection, a lost response). ``response`` is the JSON body sent
    (for a stream, the ``Message`` it carried), or what would have been sent.
    ``model_called`` says whether the scripted model was consulted; ``delivered`` whether
    the client received the answer. ``request`` is the request's JSON body, parsed from
    ``body`` on first use: the record keeps bytes, which cost the garbage collector
    nothing however many requests a test makes.
    """

    index: int
    path: str
    headers: Mapping[str, str]
    body: bytes
    status: int
    response: dict[str, Any] | None
    stream: bool = False
    fault: str | None = None
    model_called: bool = False
    delivered: bool = True

    @functools.cached_property
    def request(self) -> dict[str, Any]:
        """The request's JSON body (``{}`` if it was not a JSON object)."""
        try:
            parsed = json.loads(self.body or b"null")
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}


@dataclass
class _Fault:
    kind: str
    retry_after: float | None


@dataclass
class _Reply:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    # Set when no answer is delivered: "timeout", "disconnect" or "connect_error".
    drop: str | None = None


def _error_body(kind: str, message: str, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": request_id,
    }


# One encoder for every body: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


def sse_body(message: Mapping[str, Any]) -> bytes:
    """The API's server-sent event stream for ``message``.

    ``message_start``, then per block ``content_block_start`` / ``content_block_delta``
    (``text_delta``, ``input_json_delta`` for tool input, ``thinking_delta`` and
    ``signature_delta``) / ``content_block_stop``, then ``message_delta`` and
    ``message_stop``.
    """
    out: list[str] = []

    def event(name: str, data: Mapping[str, Any]) -> None:
        out.append(f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n")

    usage = dict(message.get("usage") or {})
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    event("message_start", {"type": "message_start", "message": start})
    event("ping", {"type": "ping"})
    for index, block in enumerate(message.get("content") or ()):
        kind = block.get("type")
        if kind == "text":
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            text = str(block.get("text", ""))
            for piece in _chunks(text):
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
        elif kind in ("tool_use", "server_tool_use"):
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                },
            )
            partial = json.dumps(block.get("input") or {}, ensure_ascii=False)
            for piece in _chunks(partial):
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        elif kind == "thinking":
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            )
            for piece in _chunks(str(block.get("thinking", ""))):
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": piece},
                    },
                )
            event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block.get("signature", "")},
                },
            )
        else:
            # Blocks the API sends whole (redacted thinking, server tool results).
            event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": dict(block)},
            )
        event("content_block_stop", {"type": "content_block_stop", "index": index})
    event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message.get("stop_reason"),
                "stop_sequence": message.get("stop_sequence"),
            },
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        },
    )
    event("message_stop", {"type": "message_stop"})
    return "".join(out).encode()


def _chunks(text: str, size: int = 24) -> list[str]:
    # Several deltas per block, as the API sends them, so clients that accumulate
    # deltas are exercised; an empty string still yields one delta.
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FakeMessagesAPI:
    """The Messages API, offline: a :class:`~reference_agent.scripted.ScriptedModel`
    behind ``httpx2`` transports (sync and async) and an optional loopback HTTP server.

    ``model``: the scripted model (a :class:`~reference_agent.scripted.Plan` is wrapped
    in a :class:`~reference_agent.scripted.PlanModel`). ``validate``: answer invalid
    histories with HTTP 400 as the API does. ``api_key_required``: answer requests with
    no credentials with HTTP 401. ``allow_prefill``: accept a final assistant message.
Without it, a final assistant message is still accepted when it is a reply this fake
sent with ``stop_reason: "pause_turn"``: the API lets a paused turn be sent back as is
to continue it.

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
    ) -> None:
        self.model: ScriptedModel = PlanModel(model) if isinstance(model, Plan) else model
        self.validate = validate
        self.api_key_required = api_key_required
        self.allow_prefill = allow_prefill
        # Replies sent with stop_reason "pause_turn", by the shape of their content.
        self._paused: set[tuple[tuple[str, str], ...]] = set()
        #: Every exchange, in the order the answers were built.
        self.exchanges: list[Exchange] = []
        #: What hooks raised while serving over HTTP (:meth:`serve`), where no caller
        #: could receive it; the connection was dropped instead.
        self.server_errors: list[BaseException] = []
        self._hooks: list[Hook] = []
        self._faults: deque[_Fault] = deque()
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._counter = 0

    # -- configuration -------------------------------------------------------------

    def add_hook(self, fn: Hook) -> None:
        """Call ``fn(event, index, body)`` around every model call (see :data:`Hook`).

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

    def fail_next(
        self, kind: FaultKind, *, times: int = 1, retry_after: float | None = None
    ) -> None:
        """Answer the next ``times`` requests with the fault ``kind`` (see :data:`FaultKind`).

        ``retry_after`` (seconds) sets the ``retry-after-ms`` / ``retry-after`` headers of
        a status fault; a ``rate_limit`` defaults to 1 ms so that tests stay fast. Faults
        queue up in the order they are added.

        >>> api = FakeMessagesAPI(Plan(steps=(), final_answer="ok"))
        >>> api.fail_next("rate_limit")
        >>> _ = api.client().messages.create(
        ...     model="m", max_tokens=8, messages=[{"role": "user", "content": "?"}])
        >>> [e.status for e in api.exchanges]
        [429, 200]
        """
        if kind not in _FAULT_KINDS:
            raise ValueError(f"kind must be one of {sorted(_FAULT_KINDS)}, not {kind!r}")
        if times < 1:
            raise ValueError(f"times must be at least 1, not {times}")
        if retry_after is not None and retry_after < 0:
            raise ValueError(f"retry_after must be >= 0, not {retry_after}")
        if retry_after is None and kind == "rate_limit":
            retry_after = 0.001
        with self._lock:
            self._faults.extend(_Fault(kind, retry_after) for _ in range(times))

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
        """The JSON bodies of the ``messages.create`` requests the model answered."""
        return [e.request for e in self.exchanges if e.model_called and e.path == _MESSAGES]

    @property
    def model_calls(self) -> int:
        """How many times the scripted model was consulted."""
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

        A dummy API key is set unless credentials are passed; ``max_retries`` keeps the
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
        connections; what a hook raises is kept in :attr:`server_errors` and the
        connection is dropped. The server stops when the block exits.

        >>> import anthropic
        >>> api = FakeMessagesAPI(Plan(steps=(), final_answer="served"))
        >>> with api.serve() as url:
        ...     client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        ...     client.messages.create(model="m", max_tokens=8,
        ...         messages=[{"role": "user", "content": "?"}]).content[0].text
        'served'
        """
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
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
        client must see instead (``timeout``, ``disconnect``, ``connect_error``). Used by
        the transports and the HTTP server; exposed for other front ends.
        """
        reply = self._handle(method, path, headers, body)
        return reply.status, reply.headers, reply.body, reply.drop

    def _next_index(self) -> int:
        with self._lock:
            index = self._counter
            self._counter += 1
            return index

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def _continues_paused_turn(self, request: Mapping[str, Any]) -> bool:
        messages = request.get("messages")
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

    def _handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes
    ) -> _Reply:
        index = self._next_index()
        request_id = f"req_offline{index:012d}"
        base_headers = [("request-id", request_id)]
        path = _route(raw_path)

        def error(status: int, kind: str, message: str, **extra: str) -> _Reply:
            payload = _error_body(kind, message, request_id)
            reply_headers = [*base_headers, ("content-type", "application/json")]
            reply_headers.extend(extra.items())
            return _Reply(status, _dumps(payload), reply_headers)

        def finish(
            reply: _Reply,
            message: dict[str, Any] | None = None,
            **fields: Any,
        ) -> _Reply:
            if message is None and reply.body:
                message = json.loads(reply.body)
            self._record(
                Exchange(
                    index=index,
                    path=path or raw_path,
                    headers=headers,
                    body=body,
                    status=reply.status if reply.drop is None else 0,
                    response=message,
                    **fields,
                )
            )
            return reply

        if method != "POST" or path is None:
            return finish(error(404, "not_found_error", "Not found"))
        try:
            request = json.loads(body or b"null")
        except ValueError:
            return finish(
                error(400, "invalid_request_error", "There was an error parsing the body")
            )
        if not isinstance(request, dict):
            return finish(error(400, "invalid_request_error", "Input should be a valid dictionary"))

        self._run_hooks("request", index, request)

        if self.api_key_required and not _has_credentials(headers):
            return finish(error(401, "authentication_error", "x-api-key header is required"))

        with self._lock:
            fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind in _STATUS_FAULTS:
            status, kind, text = _STATUS_FAULTS[fault.kind]
            extra = {}
            if fault.retry_after is not None:
                extra["retry-after-ms"] = str(max(1, round(fault.retry_after * 1000)))
                extra["retry-after"] = str(max(1, round(fault.retry_after)))
            return finish(error(status, kind, text, **extra), fault=fault.kind)
        if fault is not None and fault.kind != "lost_response":
            return finish(
                _Reply(0, b"", base_headers, drop=fault.kind),
                fault=fault.kind,
                delivered=False,
            )

        problem = _check_request(request, path)
        if problem is None and self.validate:
            try:
                validate_messages(
                    request["messages"],
                    allow_prefill=self.allow_prefill or self._continues_paused_turn(request),
                    thinking=_thinking_enabled(request),
                )
            except InvalidHistoryError as exc:
                problem = str(exc)
        if problem is not None:
            return finish(error(400, "invalid_request_error", problem))

        if path == _COUNT_TOKENS:
            counted = {"input_tokens": max(1, len(body) // 4)}
            return finish(
                _Reply(200, _dumps(counted), [*base_headers, ("content-type", "application/json")]),
            )

        try:
            with self._model_lock:
                message = self.model.respond(request)
        except Exception as exc:
            # A broken script is the test's bug, not a transient fault: tell the SDK not
            # to retry, and say what went wrong in the error it raises.
            return finish(
                error(
                    500,
                    "api_error",
                    f"scripted model failed: {type(exc).__name__}: {exc}",
                    **{"x-should-retry": "false"},
                ),
                model_called=True,
            )
        if message.get("stop_reason") == "pause_turn":
            with self._lock:
                self._paused.add(_content_shape(message.get("content")))
        usage = message.get("usage")
        if isinstance(usage, dict) and not usage.get("input_tokens"):
            usage["input_tokens"] = max(1, len(body) // 4)

        stream = bool(request.get("stream"))
        if stream:
            reply = _Reply(
                200,
                sse_body(message),
                [*base_headers, ("content-type", "text/event-stream; charset=utf-8")],
            )
        else:
            reply = _Reply(
                200, _dumps(message), [*base_headers, ("content-type", "application/json")]
            )
        try:
            self._run_hooks("response", index, message)
        except BaseException:
            # The model did the work; the client never hears of it.
            finish(
                reply,
                stream=stream,
                model_called=True,
                delivered=False,
                message=message,
            )
            raise
        if fault is not None:  # lost_response
            reply.drop = "disconnect"
            return finish(
                reply,
                stream=stream,
                fault=fault.kind,
                model_called=True,
                delivered=False,
                message=message,
            )
        return finish(reply, stream=stream, model_called=True, message=message)


def _content_shape(content: Any) -> tuple[tuple[str, str], ...]:
    """What identifies a reply's content when it comes back: each block's type and its id
    or text (the SDK may add or drop empty fields when it serializes blocks)."""
    if isinstance(content, str):
        return (("text", content),)
    shape = []
    for block in content or ():
        if not isinstance(block, dict):
            continue
        key = block.get("id") or block.get("text") or block.get("signature") or ""
        shape.append((str(block.get("type")), str(key)))
    return tuple(shape)


def _route(path: str) -> str | None:
    # The base URL may carry a prefix (a proxy path); the API's routes end the path.
    path = path.rstrip("/")
    if path.endswith(_COUNT_TOKENS):
        return _COUNT_TOKENS
    if path.endswith(_MESSAGES):
        return _MESSAGES
    return None


def _has_credentials(headers: Mapping[str, str]) -> bool:
    # ``in`` first: a missing key costs ``httpx2.Headers.get`` a raised KeyError.
    api_key = headers.get("x-api-key") if "x-api-key" in headers else None
    if api_key:
        return True
    authorization = headers.get("authorization") or ""
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


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


class _SyncTransport(httpx2.BaseTransport):
    def __init__(self, api: FakeMessagesAPI) -> None:
        self._api = api

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        reply = self._api._handle(request.method, request.url.path, request.headers, request.read())
        if reply.drop is not None:
            raise network_error(reply.drop, request)
        return httpx2.Response(
            reply.status, headers=reply.headers, content=reply.body, request=request
        )


class _AsyncTransport(httpx2.AsyncBaseTransport):
    def __init__(self, api: FakeMessagesAPI) -> None:
        self._api = api

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        reply = self._api._handle(request.method, request.url.path, request.headers, body)
        if reply.drop is not None:
            raise network_error(reply.drop, request)
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
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                reply = api._handle(self.command, urlsplit(self.path).path, headers, body)
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
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_POST = _serve
        do_GET = _serve

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
