"""A child process running one agent on the demo task, for SIGKILL tests.

``python -m tests.reference_agent.agent_process --agent reference|common ...``

It talks to the parent's fake API (``--base-url``), uses a store URL and a World file,
and prints JSON lines on stdout: ``saved`` (after every durable save, with the iteration),
``paused`` (stopped dead at the requested point, waiting for the parent's SIGKILL),
``held`` (after the first load, waiting for a line on stdin), and ``result``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import anthropic

from reference_agent.demo_tools import DEMO_GOAL, demo_toolbox
from reference_agent.errors import AgentStoppedError
from reference_agent.offline import FAKE_API_KEY
from reference_agent.toolbox import ToolSpec
from reference_agent.world import World
from stores import Checkpoint, CheckpointStore, open_store


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def pause(at: str) -> None:
    emit(event="paused", at=at, pid=os.getpid())
    time.sleep(60)  # the parent SIGKILLs us; bounded so an orphan cannot linger
    os._exit(3)


class WatchedStore:
    """Reports saves; pauses after the nth save; holds after the first load."""

    def __init__(self, inner: CheckpointStore, pause_after_save: int | None, hold: bool) -> None:
        self.inner = inner
        self.pause_after_save = pause_after_save
        self.hold = hold
        self.saves = 0

    def load(self, task_id: str) -> Checkpoint | None:
        loaded = self.inner.load(task_id)
        if self.hold:
            self.hold = False
            emit(event="held", version=loaded.version if loaded else 0)
            sys.stdin.readline()
        return loaded

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = self.inner.save(checkpoint)
        self.saves += 1
        emit(event="saved", iteration=saved.iteration, version=saved.version)
        if self.saves == self.pause_after_save:
            pause(f"save:{self.saves}")
        return saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", choices=("reference", "common"), required=True)
    parser.add_argument("--task-id", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--world", required=True)
    parser.add_argument("--pause-after-tool", default=None, help="TOOL:N")
    parser.add_argument("--pause-after-save", type=int, default=None)
    parser.add_argument("--hold-after-load", action="store_true")
    args = parser.parse_args()

    counts: dict[str, int] = {}
    target = None
    if args.pause_after_tool:
        name, n = args.pause_after_tool.split(":")
        target = (name, int(n))

    def wrap(spec: ToolSpec) -> Callable[..., Any]:
        def call(**kwargs: Any) -> Any:
            result = spec.function(**kwargs)
            counts[spec.name] = counts.get(spec.name, 0) + 1
            if target == (spec.name, counts[spec.name]):
                pause(f"tool:{spec.name}:{counts[spec.name]}")  # effect done, not recorded
            return result

        return call

    tools = demo_toolbox(World(args.world)).replace_functions(wrap)
    store = WatchedStore(open_store(args.store), args.pause_after_save, args.hold_after_load)
    client = anthropic.Anthropic(api_key=FAKE_API_KEY, base_url=args.base_url, max_retries=0)
    if args.agent == "reference":
        from reference_agent import run
    else:
        from tests.buggy_agents.common_design import run  # type: ignore[assignment]
    try:
        answer = run(args.task_id, DEMO_GOAL, client=client, store=store, tools=tools)
    except AgentStoppedError as exc:
        emit(event="result", error=type(exc).__name__, message=str(exc))
        return 1
    emit(event="result", answer=answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
