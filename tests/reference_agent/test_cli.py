"""``python -m reference_agent``: the demo's verdict, the commands, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reference_agent.cli import choose_kill_point, main

ROOT = Path(__file__).resolve().parents[2]


def test_demo_kills_resumes_and_exits_0_with_every_check_holding() -> None:
    # Seed 5 kills the agent after write_record took effect, before its outcome was saved.
    done = subprocess.run(
        [sys.executable, "-m", "reference_agent", "demo", "--seed", "5", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["kill_points"] == ["tool_call:write_record:2"]
    assert [p["killed"] for p in report["processes"]] == [True, False]
    assert {c["name"] for c in report["checks"]} >= {
        "valid_requests", "once:write_record", "once:send_message", "once:create_file",
        "answer", "iterations", "completed_again",
    }
    settled = [e for e in report["processes"][1]["events"] if e["event"] == "tool_call"
               and e["outcome"] == "rerun_with_key"]
    assert [e["tool"] for e in settled] == ["write_record"]


def test_a_seed_reproduces_the_kill_point() -> None:
    import random

    assert choose_kill_point(random.Random(42)) == choose_kill_point(random.Random(42))


def test_run_then_status_list_and_inspect_read_the_stored_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["run", "--task-id", "t1", "--goal", "demo", "--store", store]) == 0
    answer = capsys.readouterr().out.strip()
    assert answer.startswith("Summary recorded")
    assert main(["status", "t1", "--store", store, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["status"], status["iteration"], status["actions"]["done"]) == ("completed", 7, 4)
    assert main(["list", "--store", store, "--status", "completed"]) == 0
    assert "t1" in capsys.readouterr().out
    assert main(["inspect", "t1", "--store", store]) == 0
    shown = capsys.readouterr().out
    assert "ledger (4 irreversible actions)" in shown and "tool_use write_record" in shown
    # A completed task: the same answer again, from the checkpoint.
    assert main(["run", "--task-id", "t1", "--goal", "demo", "--store", store, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in lines] == ["loaded", "already_completed", "result"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["list", "--store", "bogus://x"], "unknown store scheme"),
        (["status", "missing", "--store", "memory://"], "no checkpoint for task 'missing'"),
        (["run", "--task-id", "a", "--goal", "b", "--model", "claude-x", "--store", "memory://"],
         "needs ANTHROPIC_API_KEY"),
    ],
)
def test_errors_are_one_line_and_a_non_zero_exit(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


def test_an_unreadable_store_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    assert main(["list", "--store", f"sqlite:///{bad}"]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["demo", "run", "status", "list", "inspect", "prune", "delete"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "--store" in capsys.readouterr().out


def test_prune_deletes_old_finished_checkpoints_and_never_running_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime

    import stores.sqlite
    from stores import Checkpoint, open_store
    from stores.checkpoint import utcnow

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store = open_store(url)
    # The old tasks were saved two hours ago (the store's clock set back), the new one now:
    # no sleep, so a busy machine cannot age the new one past the cutoff.
    two_hours_ago = utcnow() - datetime.timedelta(hours=2)
    monkeypatch.setattr(stores.sqlite, "utcnow", lambda: two_hours_ago)
    for task_id, status in (("old-running", "running"), ("old-done", "completed"), ("old-failed", "failed")):
        store.save(Checkpoint(task_id=task_id, status=status))  # type: ignore[arg-type]
    monkeypatch.undo()
    store.save(Checkpoint(task_id="new-done", status="completed"))
    store.close()

    def remaining() -> list[str]:
        reopened = open_store(url)
        try:
            return [s.task_id for s in reopened.list_checkpoints()]
        finally:
            reopened.close()

    # Completed ones by default: a failed task may be continued (a larger budget), and one
    # pruned starts over (a CLI round's re-run created a file twice). It says so.
    assert main(["prune", "--older-than", "1h", "--store", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 1 completed checkpoint " in out and "old-done" in out
    assert "kept 1 failed checkpoint as old" in out and "add --status failed" in out
    assert remaining() == ["new-done", "old-done", "old-failed", "old-running"]
    assert main(["prune", "--older-than", "3600s", "--store", url]) == 0
    assert "deleted 1 completed checkpoint " in capsys.readouterr().out
    assert remaining() == ["new-done", "old-failed", "old-running"]
    assert main(["prune", "--older-than", "3600", "--status", "failed", "--store", url, "--json"]) == 0
    assert [r["task_id"] for r in json.loads(capsys.readouterr().out)["pruned"]] == ["old-failed"]
    assert remaining() == ["new-done", "old-running"]


@pytest.mark.parametrize("duration", ["a while", "\u0663"])  # an Arabic-Indic three was taken for 3
def test_prune_refuses_a_duration_it_cannot_read(capsys: pytest.CaptureFixture[str], duration: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["prune", "--older-than", duration])
    assert exit_info.value.code == 2
    assert f"{duration!r} is not a duration" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["not a url", "ftp://host", "http://", "http://h:port"])
def test_run_refuses_a_base_url_it_cannot_use_before_writing(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A CLI round: --base-url 'not a url' wrote a running checkpoint, then failed.
    db = tmp_path / "tasks.db"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--task-id", "t", "--goal", "g", "--store", f"sqlite:///{db}", "--base-url", url])
    assert exit_info.value.code == 2
    assert "is not an http:// or https:// URL with a host" in capsys.readouterr().err
    assert not db.exists()


def test_run_on_a_memory_store_warns_that_nothing_outlives_the_process(capsys: pytest.CaptureFixture[str]) -> None:
    # The demo refuses memory://; run takes it (a quick try) but says what it means.
    assert main(["run", "--task-id", "t-mem", "--goal", "demo", "--store", "memory://"]) == 0
    err = capsys.readouterr().err
    assert "memory:// keeps the checkpoint inside this process only" in err
    assert "sqlite:///" in err
