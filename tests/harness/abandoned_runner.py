"""A child-process check: SDK tool runners that a crash abandons, finalized by the cyclic
collector in the middle of a ``ContextVar`` update (CPython 3.11 and earlier).

Run as ``python -m tests.harness.abandoned_runner``; exit status 0 means the interpreter
survived. Each round abandons a ``tool_runner`` of the harness's SDK client (its tool
raises a ``BaseException`` inside ``generate_tool_call_response()``), then makes the
collector's pass start at the first, second, ... tracked allocation inside a plain
``ContextVar.set``/``reset`` of the current context, whose HAMT is made deep where
OpenTelemetry's context variable lives. With the SDK's spans on, the runner's finalizer
sets and resets that variable there and the outer update reads freed memory (CPython
gh-148891): a segmentation fault, or a ``MemoryError`` or ``SystemError`` from a size
read out of a freed node.
"""

from __future__ import annotations

import contextvars
import gc
import sys
from typing import Any

from anthropic import beta_tool
from opentelemetry import context as otel_context

from pytest_agentckpt._scenario import _Router
from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, PlanModel, Step, ToolCall

OTEL_VAR: contextvars.ContextVar[Any] = otel_context._RUNTIME_CONTEXT._current_context  # type: ignore[attr-defined]
_MADE: list[contextvars.ContextVar[Any]] = []  # a ContextVar's hash depends on its address


class _Crash(BaseException):
    pass


def _hamt_hash(var: contextvars.ContextVar[Any]) -> int:
    h = hash(var) & 0xFFFFFFFFFFFFFFFF
    return ((h & 0xFFFFFFFF) ^ (h >> 32)) & 0xFFFFFFFF


def _near_otel(n: int, bits: int) -> list[contextvars.ContextVar[Any]]:
    """``n`` variables whose HAMT path shares its first ``bits // 5`` levels with OTEL_VAR's."""
    mask, found = (1 << bits) - 1, []
    while len(found) < n:
        var: contextvars.ContextVar[Any] = contextvars.ContextVar(f"v{len(_MADE)}")
        _MADE.append(var)
        if _hamt_hash(var) & mask == _hamt_hash(OTEL_VAR) & mask:
            found.append(var)
    return found


def main(rounds: int = 1) -> int:
    for var in _near_otel(24, 5) + _near_otel(6, 10):
        var.set(object())
    churn = _near_otel(2, 5) + _near_otel(1, 10)

    @beta_tool
    def lookup(order_id: str) -> str:
        """Look up an order."""
        raise _Crash()

    router = _Router()
    router.use(FakeMessagesAPI(PlanModel(Plan((Step((ToolCall("lookup", {"order_id": "A"}),)),), "done"))))
    client = router.client()

    def abandon_a_runner() -> None:
        runner = client.beta.messages.tool_runner(
            model="m", max_tokens=16, messages=[{"role": "user", "content": "go"}], tools=[lookup]
        )
        try:
            for _ in runner:
                runner.generate_tool_call_response()
        except _Crash:
            pass

    threshold = gc.get_threshold()
    for _ in range(rounds):
        for var in churn:
            for delta in range(4):
                for op in ("set", "reset"):
                    gc.disable()
                    abandon_a_runner()  # young garbage that only the collector frees
                    token = var.set(object()) if op == "reset" else None
                    gc.set_threshold(gc.get_count()[0] + delta)
                    gc.enable()
                    try:
                        if op == "set":
                            var.reset(var.set(object()))
                        else:
                            assert token is not None
                            var.reset(token)
                    except (MemoryError, SystemError) as exc:
                        print(f"{op} with a pass at allocation {delta}: {exc!r}", file=sys.stderr)
                        return 1
                    finally:
                        gc.set_threshold(*threshold)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
