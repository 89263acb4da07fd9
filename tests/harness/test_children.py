"""Children of process mode and certify start from a fork server yet see the parent as it is now."""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_agentckpt._children import process_context, with_environment


def _report(conn: Any) -> None:
    conn.send((os.environ.get("AGENTCKPT_CHILD_PROBE"), os.getcwd()))
    conn.close()


def _ask_child() -> tuple[str | None, str]:
    context = process_context()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=with_environment(_report), args=(sender,), daemon=True)
    child.start()
    sender.close()
    try:
        assert receiver.poll(60), "the child did not answer within 60 s"
        answer: tuple[str | None, str] = receiver.recv()
    finally:
        child.join(10)
    assert child.exitcode == 0
    return answer


def test_a_child_sees_the_environment_and_directory_the_parent_has_at_its_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # The first child starts the fork server (if nothing in this process has): what is set
    # after that is what a server's child would miss.
    monkeypatch.delenv("AGENTCKPT_CHILD_PROBE", raising=False)
    assert _ask_child()[0] is None
    monkeypatch.setenv("AGENTCKPT_CHILD_PROBE", "set after the server started")
    monkeypatch.chdir(tmp_path)
    assert _ask_child() == ("set after the server started", str(tmp_path))
    monkeypatch.delenv("AGENTCKPT_CHILD_PROBE")
    assert _ask_child()[0] is None
