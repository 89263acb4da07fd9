"""``async def`` tools: ``call`` returns an awaitable, errors and crashes behave as for sync tools."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from reference_agent.toolbox import Toolbox, ToolResult, ToolSpec


class Crash(BaseException):
    pass


async def fetch(url: str) -> str:
    """Fetch a page."""
    await asyncio.sleep(0)
    return f"page {url}"


async def upload(name: str, idempotency_key: str | None = None) -> str:
    """Upload a file."""
    return f"uploaded {name} with {idempotency_key}"


async def broken(x: int) -> str:
    """Fails."""
    raise RuntimeError("service down")


async def dies() -> str:
    """The process dies inside the tool."""
    raise Crash


def lookup(q: str) -> str:
    """A sync tool beside the async ones."""
    return q


BOX = Toolbox.from_functions(fetch, upload, broken, dies, lookup, kinds={"upload": "keyed"})


def test_an_async_tool_call_is_an_awaitable_of_the_result() -> None:
    pending = BOX.call("fetch", {"url": "a"})
    assert inspect.isawaitable(pending)
    assert asyncio.run(pending) == ToolResult("page a")  # type: ignore[arg-type]


def test_a_sync_tool_in_the_same_toolbox_answers_at_once() -> None:
    assert BOX.call("lookup", {"q": "x"}) == ToolResult("x")
    assert not BOX.spec("lookup").is_async and BOX.spec("fetch").is_async


def test_async_tools_run_together_under_gather() -> None:
    async def batch() -> list[ToolResult]:
        return list(await asyncio.gather(*(BOX.call("fetch", {"url": u}) for u in "abc")))  # type: ignore[misc]

    assert [r.content for r in asyncio.run(batch())] == ["page a", "page b", "page c"]


def test_an_async_keyed_tool_gets_the_key() -> None:
    result = asyncio.run(BOX.call("upload", {"name": "f"}, idempotency_key="k"))  # type: ignore[arg-type]
    assert result.content == "uploaded f with k"


def test_an_async_tools_exception_and_bad_input_become_error_results() -> None:
    assert asyncio.run(BOX.call("broken", {"x": 1})) == ToolResult("RuntimeError: service down", is_error=True)  # type: ignore[arg-type]
    bad = asyncio.run(BOX.call("fetch", {"nope": 1}))  # type: ignore[arg-type]
    assert bad.is_error and "invalid input for fetch" in str(bad.content)


def test_a_crash_inside_an_async_tool_propagates_to_the_awaiting_agent() -> None:
    with pytest.raises(Crash):
        asyncio.run(BOX.call("dies", {}))  # type: ignore[arg-type]


def test_an_unawaited_async_call_performs_nothing() -> None:
    ran: list[str] = []

    async def effect() -> str:
        ran.append("x")
        return "done"

    box = Toolbox.from_functions(effect)
    pending = box.call("effect", {})
    assert ran == []
    asyncio.run(pending)  # type: ignore[arg-type]
    assert ran == ["x"]


def test_wrapping_an_async_tool_keeps_it_async_and_awaitable() -> None:
    seen: list[str] = []

    def wrap(spec: ToolSpec):  # type: ignore[no-untyped-def]
        function = spec.function

        def instrumented(**kwargs: object) -> object:  # a sync wrapper returning the coroutine
            seen.append(spec.name)
            return function(**kwargs)

        return instrumented

    wrapped: Toolbox = BOX.replace_functions(wrap)
    assert wrapped.spec("fetch").is_async
    assert asyncio.run(wrapped.call("fetch", {"url": "z"})) == ToolResult("page z")  # type: ignore[arg-type]
    assert seen == ["fetch"]


def test_a_callable_object_with_an_async_call_is_async() -> None:
    class Fetcher:
        async def __call__(self, url: str) -> str:
            return url

    spec = ToolSpec("fetcher", "Fetch.", {"type": "object"}, Fetcher())
    assert spec.is_async
