"""In memory mode a hung attempt cannot be stopped; the run says where it waits.

An outside round's AutoGen fit ended an attempt with an exception that killed AutoGen's
tool task: the agent then waited for ever on a queue no one filled, and the test run
hung without a word."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pytest_agentckpt import FaultPlan, Plan, Step, ToolCall, _progress, _scenario, replay
from tests.buggy_agents._loop import Bugs, make_agent
from tests.harness.toolkit import toolbox


def test_an_attempt_that_does_nothing_for_long_is_told_where_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scenario, "HANG_NOTICE", 0.3)
    monkeypatch.setattr(_scenario, "HANG_POLL", 0.05)
    monkeypatch.setattr(_scenario, "_HANG_WATCH", _scenario._HangWatch())
    written: list[str] = []
    monkeypatch.setattr(_progress, "sink", _progress.Sink(write=written.append, live=False))
    sound, queue_filled = make_agent(Bugs()), threading.Event()

    def waits_first(task_id: str, goal: str, **kwargs: Any) -> str:
        queue_filled.wait(10)  # a queue no one fills, until the notice is out
        return sound(task_id, goal, **kwargs)

    def fill_once_told() -> None:
        deadline = time.monotonic() + 10
        while not written and time.monotonic() < deadline:
            time.sleep(0.02)
        queue_filled.set()

    threading.Thread(target=fill_once_told, daemon=True).start()
    plan = Plan((Step((ToolCall("search", {"query": "q"}),)),), "done")
    replay(waits_first, toolbox(), plan, FaultPlan())
    told = "".join(written)
    assert "attempt 1 of the agent has made no model call, tool call or store operation for" in told, told
    assert "test_hang_watch.py" in told and "queue_filled.wait(10)" in told
    assert "mode='process'" in told
    # Told once per attempt, and not at all of one that keeps working.
    assert told.count("has made no model call") == 1
