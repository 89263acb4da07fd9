"""The model side of a test: the fake Messages API, respx working with the SDK, fast retries.

The fake itself (:class:`FakeMessagesAPI`, its faults, hooks, record and loopback server)
lives in :mod:`reference_agent.offline`, because the reference agent runs on it offline;
this module re-exports it and adds what only tests need.

``anthropic`` sends over ``httpx2``, which ``respx`` does not patch. Three bridges fix that:

- :func:`respx_transport` / :func:`respx_async_transport`: an ``httpx2`` transport that
  resolves requests through a respx router (routes, side effects, call counts and
  ``assert_all_called`` behave as in respx);
- :func:`intercept_httpx2`: every ``httpx2`` client in the process — including the one an
  ``anthropic.Anthropic()`` built deep inside the code under test — sends to a router, a
  fake or a transport instead of the network;
- :func:`respx_mock`: ``respx.mock`` that also sees ``httpx2``.

>>> import anthropic, respx
>>> with respx_mock(base_url="https://api.anthropic.com") as router:
...     route = router.post("/v1/messages").respond(json=message_json("Hi from respx"))
...     client = anthropic.Anthropic(api_key="k")
...     client.messages.create(model="m", max_tokens=8,
...         messages=[{"role": "user", "content": "?"}]).content[0].text
'Hi from respx'
>>> route.call_count
1
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import httpx2

from reference_agent.offline import (
    FAKE_API_KEY,
    Exchange,
    FakeMessagesAPI,
    FaultKind,
    Hook,
    RequestHeaders,
    network_error,
    offline_client,
    sse_body,
)
from reference_agent.scripted import message_json

if TYPE_CHECKING:
    import respx

__all__ = [
    "FAKE_API_KEY",
    "ActiveRoutes",
    "Exchange",
    "FakeMessagesAPI",
    "FaultKind",
    "Hook",
    "fake_side_effect",
    "instant_retries",
    "intercept_httpx2",
    "message_json",
    "offline_client",
    "respx_async_transport",
    "respx_mock",
    "respx_transport",
    "sse_body",
]


# -- httpx <-> httpx2 ----------------------------------------------------------------


def _to_httpx_request(request: httpx2.Request, body: bytes) -> httpx.Request:
    return httpx.Request(
        request.method, str(request.url), headers=list(request.headers.raw), content=body
    )


def _to_httpx2_response(response: httpx.Response, request: httpx2.Request) -> httpx2.Response:
    if hasattr(response, "_content"):
        # Read already (respx reads plain bodies): hand the decoded body over; its old
        # framing headers would lie.
        return httpx2.Response(
            response.status_code,
            headers=[
                (k, v)
                for k, v in response.headers.raw
                if k.lower() not in (b"content-encoding", b"transfer-encoding")
            ],
            content=response.content,
            request=request,
        )
    # A streamed body stays a stream: chunks reach the SDK as the route yields them.
    return httpx2.Response(
        response.status_code,
        headers=[(k, v) for k, v in response.headers.raw if k.lower() != b"transfer-encoding"],
        stream=_BridgedStream(response, request),
        request=request,
    )


class _BridgedStream(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """An ``httpx`` response's body as an ``httpx2`` stream, read as the client reads it;
    an ``httpx`` transport error while reading becomes its ``httpx2`` twin."""

    def __init__(self, response: httpx.Response, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._response.iter_raw()
        except httpx.TransportError as exc:
            raise _to_httpx2_error(exc, self._request) from exc

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.TransportError as exc:
            raise _to_httpx2_error(exc, self._request) from exc

    def close(self) -> None:
        self._response.close()

    async def aclose(self) -> None:
        await self._response.aclose()


def _to_httpx2_error(exc: httpx.TransportError, request: httpx2.Request) -> Exception:
    # Same class name in both libraries (ReadTimeout, ConnectError, ...), so the SDK sees
    # the timeout or connection error a respx side effect meant.
    twin = getattr(httpx2, type(exc).__name__, None)
    if isinstance(twin, type) and issubclass(twin, httpx2.TransportError):
        return twin(str(exc), request=request)
    return httpx2.TransportError(str(exc), request=request)


def _to_httpx_error(drop: str, request: httpx.Request) -> httpx.TransportError:
    error: httpx.TransportError = network_error(drop, request, httpx)
    return error


# -- respx bridge ----------------------------------------------------------------------


class ActiveRoutes:
    """Every respx router a request should meet, as respx itself would resolve it.

    ``primary`` first; then the routers respx has started (``with respx.mock``,
    ``@respx.mock``, the ``respx_mock`` fixture), then routes added with respx's
    module-level API (``respx.post(...)``) to its default router. The first router with
    a matching route answers; when none has one, respx's "not mocked" error is raised.

    >>> import respx
    >>> routes = ActiveRoutes(respx.MockRouter(base_url="https://api.anthropic.com"))
    >>> routes.routers()[0] is routes.primary
    True
    """

    def __init__(self, primary: respx.Router) -> None:
        self.primary = primary

    def routers(self) -> list[respx.Router]:
        """The routers to try, in order."""
        import respx
        from respx.mocks import Mocker

        out: list[respx.Router] = [self.primary]
        candidates = [r for mocker in Mocker.registry.values() for r in mocker.routers]
        candidates.append(respx.mock)
        for router in candidates:
            if all(router is not known for known in out) and (
                router is not respx.mock or router.routes
            ):
                out.append(router)
        return out

    def handler(self, request: httpx.Request) -> httpx.Response:
        """Resolve ``request`` (see the class docstring)."""
        from respx.models import AllMockedAssertionError

        first: AllMockedAssertionError | None = None
        for router in self.routers():
            try:
                return router.handler(request)
            except AllMockedAssertionError as exc:
                first = first or exc
        assert first is not None
        raise first

    async def async_handler(self, request: httpx.Request) -> httpx.Response:
        """The async twin of :meth:`handler`."""
        from respx.models import AllMockedAssertionError

        first: AllMockedAssertionError | None = None
        for router in self.routers():
            try:
                return await router.async_handler(request)
            except AllMockedAssertionError as exc:
                first = first or exc
        assert first is not None
        raise first


_Resolver = Any  # a respx router, or anything with its handler / async_handler


class _RespxTransport(httpx2.BaseTransport):
    def __init__(self, router: _Resolver, fallback: httpx2.BaseTransport | None) -> None:
        self._router = router
        self._fallback = fallback

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        from respx.models import PassThrough

        body = request.read()
        try:
            response = self._router.handler(_to_httpx_request(request, body))
        except PassThrough:
            if self._fallback is None:
                raise
            return self._fallback.handle_request(request)
        except httpx.TransportError as exc:
            raise _to_httpx2_error(exc, request) from exc
        return _to_httpx2_response(response, request)


class _AsyncRespxTransport(httpx2.AsyncBaseTransport):
    def __init__(self, router: _Resolver, fallback: httpx2.AsyncBaseTransport | None) -> None:
        self._router = router
        self._fallback = fallback

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        from respx.models import PassThrough

        body = await request.aread()
        try:
            response = await self._router.async_handler(_to_httpx_request(request, body))
        except PassThrough:
            if self._fallback is None:
                raise
            return await self._fallback.handle_async_request(request)
        except httpx.TransportError as exc:
            raise _to_httpx2_error(exc, request) from exc
        return _to_httpx2_response(response, request)


def respx_transport(
    router: respx.Router | ActiveRoutes, *, fallback: httpx2.BaseTransport | None = None
) -> httpx2.BaseTransport:
    """An ``httpx2`` transport that answers from a respx router.

    Requests are converted to ``httpx`` and resolved by ``router`` exactly as respx
    resolves them (so routes, side effects, ``route.calls`` and ``assert_all_called``
    work); responses and transport errors raised by side effects (``httpx.ReadTimeout``
    ...) are converted back. A route marked ``pass_through`` goes to ``fallback``.

    >>> import anthropic, httpx2, respx
    >>> router = respx.MockRouter(base_url="https://api.anthropic.com")
    >>> _ = router.post("/v1/messages").respond(json=message_json("routed"))
    >>> client = anthropic.Anthropic(
    ...     api_key="k", http_client=httpx2.Client(transport=respx_transport(router)))
    >>> client.messages.create(model="m", max_tokens=8,
    ...     messages=[{"role": "user", "content": "?"}]).content[0].text
    'routed'
    """
    return _RespxTransport(router, fallback)


def respx_async_transport(
    router: respx.Router | ActiveRoutes, *, fallback: httpx2.AsyncBaseTransport | None = None
) -> httpx2.AsyncBaseTransport:
    """The async twin of :func:`respx_transport`, for ``httpx2.AsyncClient``."""
    return _AsyncRespxTransport(router, fallback)


def fake_side_effect(api: FakeMessagesAPI) -> Callable[[httpx.Request], httpx.Response]:
    """A respx side effect that answers from the fake API (its model, faults, record).

    Lets respx routes decide *which* requests reach the fake while the fake decides
    *what* they get:

    >>> import respx
    >>> from reference_agent.scripted import CannedModel
    >>> api = FakeMessagesAPI(CannedModel(["from the fake"]))
    >>> router = respx.MockRouter(base_url="https://api.anthropic.com")
    >>> route = router.post("/v1/messages").mock(side_effect=fake_side_effect(api))
    """

    def side_effect(request: httpx.Request) -> httpx.Response:
        url = request.url
        reply = api.respond(
            request.method,
            url.path,
            RequestHeaders.of(request.headers.raw),
            request.read(),
            query=url.query.decode("ascii"),
            base_url=f"{url.scheme}://{url.netloc.decode('ascii')}",
        )
        if reply.drop is not None:
            raise _to_httpx_error(reply.drop, request)
        if reply.events is not None:
            stream = _EventStream(reply.events, reply.stream_drop, request, reply.delivered)
            return httpx.Response(
                reply.status, headers=reply.headers, stream=stream, request=request
            )
        return httpx.Response(
            reply.status, headers=reply.headers, content=reply.body, request=request
        )

    return side_effect


class _EventStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    # The fake's stream events for a respx route: one per read, then the drop, if any.
    def __init__(
        self, events: list[bytes], drop: bool, request: httpx.Request, delivered: Callable[[], None] | None
    ) -> None:
        self._events = events
        self._drop = drop
        self._request = request
        self._delivered = delivered

    def __iter__(self) -> Iterator[bytes]:
        yield from self._events
        if self._drop:
            raise _to_httpx_error("disconnect", self._request)
        if self._delivered is not None:
            self._delivered()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self._events:
            yield event
        if self._drop:
            raise _to_httpx_error("disconnect", self._request)
        if self._delivered is not None:
            self._delivered()


# -- patching mode -----------------------------------------------------------------------


def _transports(target: Any) -> tuple[httpx2.BaseTransport, httpx2.AsyncBaseTransport | None]:
    if isinstance(target, FakeMessagesAPI):
        return target.transport(), target.async_transport()
    if isinstance(target, httpx2.BaseTransport):
        return target, None
    if hasattr(target, "handler") and hasattr(target, "async_handler"):
        return respx_transport(target), respx_async_transport(target)
    raise TypeError(
        "target must be a FakeMessagesAPI, a respx router or an httpx2.BaseTransport, "
        f"not {type(target).__name__}"
    )


@contextlib.contextmanager
def intercept_httpx2(
    target: FakeMessagesAPI | respx.Router | ActiveRoutes | httpx2.BaseTransport,
    *,
    async_target: httpx2.AsyncBaseTransport | None = None,
) -> Iterator[None]:
    """Send every ``httpx2`` request in the process to ``target`` instead of the network.

    For code that builds its own ``anthropic.Anthropic()`` where a test cannot pass a
    client: the SDK's default transport (``httpx2.HTTPTransport`` and its async twin) is
    patched at the class level, so clients created before or inside the block, with the
    default base URL or ``ANTHROPIC_BASE_URL``, are all intercepted. ``target`` is a
    :class:`FakeMessagesAPI`, a respx router, or an ``httpx2`` transport (then pass
    ``async_target`` for async clients). Nested blocks stack; the last one wins.

    >>> import anthropic
    >>> from reference_agent.scripted import CannedModel
    >>> api = FakeMessagesAPI(CannedModel(["intercepted"]))
    >>> def code_under_test() -> str:
    ...     client = anthropic.Anthropic(api_key="k")  # builds its own client
    ...     reply = client.messages.create(model="m", max_tokens=8,
    ...         messages=[{"role": "user", "content": "?"}])
    ...     return reply.content[0].text
    >>> with intercept_httpx2(api):
    ...     code_under_test()
    'intercepted'
    """
    sync_transport, async_transport = _transports(target)
    if async_target is not None:
        async_transport = async_target

    original_sync = httpx2.HTTPTransport.handle_request
    original_async = httpx2.AsyncHTTPTransport.handle_async_request

    def handle_request(self: httpx2.HTTPTransport, request: httpx2.Request) -> httpx2.Response:
        return sync_transport.handle_request(request)

    async def handle_async_request(
        self: httpx2.AsyncHTTPTransport, request: httpx2.Request
    ) -> httpx2.Response:
        if async_transport is None:
            raise RuntimeError(
                "intercept_httpx2 got a sync transport only; pass async_target= for async clients"
            )
        return await async_transport.handle_async_request(request)

    httpx2.HTTPTransport.handle_request = handle_request  # type: ignore[method-assign]
    httpx2.AsyncHTTPTransport.handle_async_request = handle_async_request  # type: ignore[method-assign]
    try:
        yield
    finally:
        httpx2.HTTPTransport.handle_request = original_sync  # type: ignore[method-assign]
        httpx2.AsyncHTTPTransport.handle_async_request = original_async  # type: ignore[method-assign]


@contextlib.contextmanager
def respx_mock(
    *,
    assert_all_called: bool = True,
    assert_all_mocked: bool = True,
    base_url: str | None = None,
) -> Iterator[respx.MockRouter]:
    """``respx.mock`` that also sees ``httpx2`` — and so the ``anthropic`` SDK.

    Yields the respx router; on exit respx checks ``assert_all_called`` as usual. Inside
    the block the SDK's requests also meet the routes of other active respx routers
    (``respx_mock``, ``@respx.mock``) and of respx's module-level API (``respx.post``),
    see :class:`ActiveRoutes`.

    >>> import anthropic
    >>> with respx_mock(base_url="https://api.anthropic.com") as router:
    ...     route = router.post("/v1/messages").respond(json=message_json("mocked"))
    ...     _ = anthropic.Anthropic(api_key="k").messages.create(
    ...         model="m", max_tokens=8, messages=[{"role": "user", "content": "?"}])
    >>> route.called
    True
    """
    import respx

    router = respx.mock(
        assert_all_called=assert_all_called,
        assert_all_mocked=assert_all_mocked,
        base_url=base_url,
    )
    import respx as respx_module

    # Routes added with respx's module-level API during the block are dropped after it,
    # as ``with respx.mock:`` drops them.
    default = respx_module.mock
    default.snapshot()
    try:
        with router, intercept_httpx2(ActiveRoutes(router)):
            yield router
    finally:
        default.rollback()


# -- retries ---------------------------------------------------------------------------


@contextlib.contextmanager
def instant_retries(delay: float = 0.001) -> Iterator[None]:
    """Make the SDK's retry backoff ``delay`` seconds instead of 0.5 s and up.

    The fake's network faults carry no ``retry-after`` header, so the SDK backs off
    exponentially; tests that inject many faults wait for nothing. The retry policy
    itself (what is retried, how often, ``x-stainless-retry-count``) is untouched.

    >>> with instant_retries():
    ...     pass
    """
    from anthropic import _base_client

    # The SDK reads this module global at every retry.
    name = "INITIAL_RETRY_DELAY"
    original = vars(_base_client)[name]
    setattr(_base_client, name, delay)
    try:
        yield
    finally:
        setattr(_base_client, name, original)
