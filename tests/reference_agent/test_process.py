"""Real processes, real stores: SIGKILL the agent, resume it, check the World.

The agent runs in a child process (``tests.reference_agent.agent_process``) against the
parent's fake API over loopback HTTP, a real store, and a World in an SQLite file. The
parent SIGKILLs it at chosen points (after an effect and before its checkpoint, after a
checkpoint write, while it waits for the model) and starts it again until it finishes.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reference_agent import FakeMessagesAPI, Toolbox, World, demo_plan, demo_toolbox
from reference_agent.offline import FAKE_API_KEY
from stores import open_store
from tests.buggy_agents import common_design

ROOT = Path(__file__).resolve().parents[2]
PLAN = demo_plan()
IRREVERSIBLE = {"write_record", "send_message", "create_file"}
CALLS = [call for step in PLAN.steps for call in step.calls if call.name in IRREVERSIBLE]


class _Killed(Exception):
    """Raised in the fake's hook after it SIGKILLed the agent mid-request."""


@dataclass
class Child:
    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    killed: bool = False
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        def pump() -> None:
            assert self.proc.stdout is not None
            for raw in self.proc.stdout:
                self.lines.put(raw)
            self.lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def next_event(self, timeout: float = 90) -> dict[str, Any] | None:
        raw = self.lines.get(timeout=timeout)
        if raw is None:
            return None
        event: dict[str, Any] = json.loads(raw)
        self.events.append(event)
        if event["event"] == "paused":
            os.kill(self.proc.pid, signal.SIGKILL)
            self.killed = True
        return event

    def wait_for(self, kind: str) -> dict[str, Any]:
        for _ in range(1000):
            event = self.next_event()
            if event is None:
                raise AssertionError(f"child ended before {kind!r}: {self.events}")
            if event["event"] == kind:
                return event
        raise AssertionError(f"no {kind!r} event")

    def finish(self) -> int:
        while self.next_event() is not None:
            pass
        return self.proc.wait(timeout=90)

    @property
    def result(self) -> dict[str, Any] | None:
        return next((e for e in self.events if e["event"] == "result"), None)


class Scenario:
    """One task run through a sequence of agent processes."""

    def __init__(self, tmp_path: Path, store_url: str, agent: str = "reference") -> None:
        self.agent = agent
        self.store_url = store_url
        self.task_id = "task-" + uuid.uuid4().hex[:8]
        self.world_path = tmp_path / "world.db"
        self.world = World(self.world_path)
        self.api = FakeMessagesAPI(PLAN)
        self.children: list[Child] = []
        self._kill_request: tuple[Child, int] | None = None
        self._requests_seen = 0
        self.api.add_hook(self._hook)

    def _hook(self, event: str, index: int, body: dict[str, Any]) -> None:
        if event != "request" or self._kill_request is None:
            return
        self._requests_seen += 1
        child, nth = self._kill_request
        if self._requests_seen == nth:
            os.kill(child.proc.pid, signal.SIGKILL)
            child.killed = True
            raise _Killed

    def start(self, base_url: str, *extra: str, kill_at_request: int | None = None) -> Child:
        command = [
            sys.executable, "-m", "tests.reference_agent.agent_process", "--agent", self.agent,
            "--task-id", self.task_id, "--store", self.store_url, "--base-url", base_url,
            "--world", str(self.world_path), *extra,
        ]
        proc = subprocess.Popen(command, cwd=ROOT, text=True, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        child = Child(proc)
        self.children.append(child)
        self._requests_seen = 0
        self._kill_request = (child, kill_at_request) if kill_at_request else None
        return child

    def run(self, base_url: str, *extra: str, kill_at_request: int | None = None) -> Child:
        child = self.start(base_url, *extra, kill_at_request=kill_at_request)
        child.finish()
        return child

    def assert_oracles(self) -> None:
        rejected = [e.status for e in self.api.exchanges if e.status != 200]
        assert not rejected, f"the fake API rejected requests: {rejected}"
        assert all(isinstance(e, _Killed) for e in self.api.server_errors)
        for call in CALLS:
            assert self.world.count(call.name, call.input) == 1, (
                f"{call.name} {dict(call.input)} took effect "
                f"{self.world.count(call.name, call.input)} times"
            )
        last = self.children[-1].result
        assert last is not None and last.get("answer") == PLAN.final_answer
        saved = [e["iteration"] for c in self.children for e in c.events if e["event"] == "saved"]
        assert saved == sorted(saved), f"iteration went backwards: {saved}"


def _sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'checkpoints.db'}"


def test_sigkill_at_many_points_resumes_with_every_effect_once(tmp_path: Path) -> None:
    scenario = Scenario(tmp_path, _sqlite_url(tmp_path))
    with scenario.api.serve() as url:
        assert scenario.run(url, "--pause-after-tool", "write_record:1").killed  # effect, no outcome
        assert scenario.run(url, "--pause-after-tool", "send_message:1").killed
        assert scenario.run(url, kill_at_request=1).killed  # waiting for the model
        assert scenario.run(url, "--pause-after-save", "2").killed  # right after a save
        final = scenario.run(url)
    assert not final.killed and final.proc.returncode == 0
    scenario.assert_oracles()
    checkpoint = open_store(scenario.store_url).load(scenario.task_id)
    assert checkpoint is not None and checkpoint.status == "completed"
    assert checkpoint.iteration == 7


def test_sigkill_between_effect_and_checkpoint_on_every_backend(
    tmp_path: Path, any_checkpoint_store_url: str
) -> None:
    if any_checkpoint_store_url.startswith("memory://"):
        pytest.skip("an in-process store does not outlive a killed process")
    scenario = Scenario(tmp_path, any_checkpoint_store_url)
    with scenario.api.serve() as url:
        assert scenario.run(url, "--pause-after-tool", "send_message:1").killed
        scenario.run(url)
    scenario.assert_oracles()


def test_two_resumers_one_finishes_the_other_stops_on_conflict(tmp_path: Path) -> None:
    scenario = Scenario(tmp_path, _sqlite_url(tmp_path))
    with scenario.api.serve() as url:
        assert scenario.run(url, "--pause-after-tool", "write_record:1").killed
        first = scenario.start(url, "--hold-after-load")
        first.wait_for("held")
        second = scenario.start(url, "--hold-after-load")
        second.wait_for("held")
        # Both loaded the same checkpoint; the first runs to the end, then the second.
        assert first.proc.stdin is not None and second.proc.stdin is not None
        first.proc.stdin.write("\n")
        first.proc.stdin.flush()
        assert first.finish() == 0
        second.proc.stdin.write("\n")
        second.proc.stdin.flush()
        assert second.finish() == 1
    assert second.result is not None and second.result["error"] == "TaskOwnedElsewhereError"
    assert "another worker owns" in second.result["message"]
    scenario.children.remove(second)  # the finisher's answer is the task's answer
    scenario.assert_oracles()


def test_the_common_design_fails_the_same_checks_with_a_duplicated_effect(tmp_path: Path) -> None:
    scenario = Scenario(tmp_path, _sqlite_url(tmp_path), agent="common")
    with scenario.api.serve() as url:
        assert scenario.run(url, "--pause-after-tool", "write_record:1").killed
        scenario.run(url)
    summary = CALLS[0]
    assert summary.name == "write_record"
    # No checkpoint before iteration 5, so the restart redid everything, effects included.
    assert scenario.world.count(summary.name, summary.input) == 2
    assert scenario.api.model_calls > 7
    with pytest.raises(AssertionError, match=r"write_record .* took effect 2 times"):
        scenario.assert_oracles()


def test_the_common_design_redoes_a_completed_task() -> None:
    world = World()
    api = FakeMessagesAPI(PLAN)
    store = open_store("memory://")
    tools: Toolbox = demo_toolbox(world)
    client = api.client(api_key=FAKE_API_KEY)
    for _ in range(2):
        common_design.run("t", "goal", client=client, store=store, tools=tools)
    assert api.model_calls == 14
    assert len(world.effects("send_message")) == 2
