"""The World records every effect once, atomically, across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reference_agent.demo_tools import demo_toolbox
from reference_agent.world import Effect, World


class _Crash(BaseException):
    pass


def test_an_honoured_key_returns_the_first_result_without_a_second_effect() -> None:
    world = World()
    calls = []

    def effect() -> str:
        calls.append(1)
        return f"sent {len(calls)}"

    first = world.perform("send", {"to": "a"}, idempotency_key="k", honour_key=True, effect=effect)
    again = world.perform("send", {"to": "a"}, idempotency_key="k", honour_key=True, effect=effect)
    assert (first, again, len(calls)) == ("sent 1", "sent 1", 1)
    assert world.effects() == [Effect(1, "send", {"to": "a"}, "k", "sent 1")]


def test_a_key_that_is_not_honoured_repeats_the_effect() -> None:
    world = World()
    for _ in range(2):
        world.perform("create", {"n": 1}, idempotency_key="k", honour_key=False, effect=lambda: "ok")
    assert world.count("create", {"n": 1}) == 2


def test_keys_are_per_tool() -> None:
    world = World()
    world.perform("a", {}, idempotency_key="k", honour_key=True, effect=lambda: "a")
    assert world.perform("b", {}, idempotency_key="k", honour_key=True, effect=lambda: "b") == "b"
    assert [e.tool for e in world.effects()] == ["a", "b"]


def test_a_crash_inside_the_effect_leaves_no_record() -> None:
    world = World()

    def crash() -> str:
        raise _Crash

    with pytest.raises(_Crash):
        world.perform("send", {}, idempotency_key="k", honour_key=True, effect=crash)
    assert world.effects() == []
    # The key was not consumed: the next attempt takes effect.
    assert world.perform("send", {}, idempotency_key="k", honour_key=True, effect=lambda: "ok") == "ok"


def test_count_ignores_key_order_and_effects_filter_by_tool(tmp_path: Path) -> None:
    world = World(tmp_path / "w.db")
    world.perform("w", {"a": 1, "b": 2}, idempotency_key=None, honour_key=False, effect=lambda: "x")
    world.perform("v", {}, idempotency_key=None, honour_key=False, effect=lambda: "y")
    assert world.count("w", {"b": 2, "a": 1}) == 1
    assert [e.tool for e in world.effects("v")] == ["v"]
    world.clear()
    assert world.effects() == []


def test_a_file_world_is_shared_with_another_process(tmp_path: Path) -> None:
    path = tmp_path / "world.db"
    World(path)  # creates the schema
    code = (
        "from reference_agent.world import World; import sys\n"
        "w = World(sys.argv[1])\n"
        "w.perform('send', {'to': 'x'}, idempotency_key='k', honour_key=True, effect=lambda: 'child')\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    world = World(path)
    assert world.perform("send", {"to": "x"}, idempotency_key="k", honour_key=True,
                         effect=lambda: "parent") == "child"
    assert len(world.effects()) == 1


def test_demo_tools_idempotent_ones_honour_keys_and_create_file_does_not() -> None:
    world = World()
    tools = demo_toolbox(world)
    for _ in range(2):
        tools.call("write_record", {"key": "k", "value": "v"}, idempotency_key="key1")
        tools.call("create_file", {"name": "f", "content": "c"}, idempotency_key="key2")
    assert len(world.effects("write_record")) == 1
    assert len(world.effects("create_file")) == 2
    assert tools.spec("create_file").irreversible and not tools.spec("create_file").idempotent
    assert not tools.spec("search").irreversible
    assert "Idempotency keys" in tools.call("search", {"query": "idempotency"}).content
    assert tools.call("fetch_page", {"url": "docs://nope"}).is_error
