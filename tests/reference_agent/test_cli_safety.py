"""The CLI is safe by default: bad input refused before writing, one ``error:`` line for
every failure (never a traceback), read-only commands that create nothing, no volatile
store without saying so, graceful Ctrl-C and SIGTERM, a demo line that replays its run."""

from __future__ import annotations

import http.server
import json
import os
import re
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reference_agent import FakeMessagesAPI, Toolbox, run
from reference_agent.cli import _PROG, main
from reference_agent.scripted import Plan, PlanModel
from reference_agent.world import World
from stores import Checkpoint, CorruptCheckpointError, open_store

ROOT = Path(__file__).resolve().parents[2]
AGENT = [sys.executable, "-m", "reference_agent"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTCKPT_STORE_URL")}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def _cli(argv: list[str | bytes], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENT, *argv], cwd=cwd, env=env or _env(), capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL, errors="replace",
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def refusing_api() -> Iterator[str]:
    """A Messages API on loopback that answers every request as the API does a bad key."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            body = json.dumps({"type": "error", "error": {
                "type": "authentication_error", "message": "invalid x-api-key"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _refuse

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _corrupt_sqlite_task(path: Path, task_id: str, *, status: str = "running") -> None:
    store = open_store(f"sqlite:///{path}")
    store.save(Checkpoint(task_id=task_id, status=status,  # type: ignore[arg-type]
                          messages=[{"role": "user", "content": "go"}]))
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE messages SET body = ? WHERE task_id = ?", (b"\x00 not json", task_id))


# -- point 6: one table of every CLI error path -----------------------------------------------


@dataclass(frozen=True)
class ErrorPath:
    name: str
    argv: list[str | bytes]
    says: str  # a part of the error line (what is wrong, or what to do)
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    status: int = 1


ERROR_PATHS = [
    ErrorPath("empty goal", ["run", "--task-id", "t", "--goal", "", "--store", "sqlite:///c.db"],
              "the goal is empty"),
    ErrorPath("blank goal", ["run", "--task-id", "t", "--goal", "  \n", "--store", "sqlite:///c.db"],
              "the goal is empty"),
    ErrorPath("empty task id", ["run", "--task-id", "", "--goal", "g", "--store", "sqlite:///c.db"],
              "the task id is empty"),
    ErrorPath("blank task id", ["status", " ", "--store", "memory://"], "the task id is empty"),
    ErrorPath("task id not UTF-8", ["status", b"t\xff", "--store", "memory://", "--json"],
              "is not valid UTF-8"),
    ErrorPath("task id not UTF-8 (run)", ["run", "--task-id", b"\xfe", "--goal", "g",
                                          "--store", "sqlite:///c.db"], "is not valid UTF-8"),
    ErrorPath("goal not UTF-8", ["run", "--task-id", "t", "--goal", b"g\xff",
                                 "--store", "sqlite:///c.db"], "is not valid UTF-8"),
    ErrorPath("typo in a PostgreSQL URL parameter",
              ["list", "--store", "postgresql://127.0.0.1/test?tabel_prefix=x_", "--json"],
              "tabel_prefix"),
    ErrorPath("typo in a Redis URL parameter", ["list", "--store", "{redis}?kye_prefix=x:"],
              "kye_prefix"),
    ErrorPath("Redis database index out of range", ["list", "--store", "{redis_host}/99"], "99"),
    ErrorPath("prune duration past the calendar",
              ["prune", "--older-than", "99999999999d", "--store", "memory://", "--json"],
              "give a shorter duration"),
    ErrorPath("demo on a memory store", ["demo", "--store", "memory://", "--json"],
              "cannot survive that"),
    ErrorPath("run --model with a key the API refuses",
              ["run", "--task-id", "t", "--goal", "g", "--model", "claude-x",
               "--store", "sqlite:///c.db", "--json"],
              "refused the API key", env={"ANTHROPIC_API_KEY": "bogus",
                                          "ANTHROPIC_BASE_URL": "{refusing_api}"}),
    ErrorPath("run --model with the API unreachable",
              ["run", "--task-id", "t", "--goal", "g", "--model", "claude-x",
               "--store", "sqlite:///c.db"],
              "cannot reach the Messages API", env={"ANTHROPIC_API_KEY": "bogus",
                                                    "ANTHROPIC_BASE_URL": "{closed}"}),
    ErrorPath("run --model without a key",
              ["run", "--task-id", "t", "--goal", "g", "--model", "claude-x", "--store", "memory://"],
              "needs ANTHROPIC_API_KEY"),
    ErrorPath("the API unreachable mid-run",
              ["run", "--task-id", "t", "--goal", "g", "--base-url", "{closed}",
               "--store", "sqlite:///c.db", "--json"],
              "run the same command again to resume it"),
    ErrorPath("--base-url with a password, the API unreachable",
              ["run", "--task-id", "t", "--goal", "g", "--base-url", "{closed_with_password}",
               "--store", "sqlite:///c.db"], "http://agent:***@127.0.0.1"),
    ErrorPath("ANTHROPIC_BASE_URL with a password, the API unreachable",
              ["run", "--task-id", "t", "--goal", "g", "--model", "claude-x",
               "--store", "sqlite:///c.db", "--json"],
              "http://agent:***@127.0.0.1", env={"ANTHROPIC_API_KEY": "bogus",
                                                 "ANTHROPIC_BASE_URL": "{closed_with_password}"}),
    ErrorPath("run --model with --base-url unreachable: the URL given, not the default API",
              ["run", "--task-id", "t", "--goal", "g", "--model", "claude-x", "--base-url", "{closed_with_password}",
               "--store", "sqlite:///c.db"],
              "cannot reach the Messages API at http://agent:***@127.0.0.1", env={"ANTHROPIC_API_KEY": "bogus"}),
    ErrorPath("--world is a directory", ["run", "--task-id", "t", "--goal", "g",
                                         "--store", "sqlite:///c.db", "--world", "w"],
              "--world w: that is a directory", setup=lambda tmp: (tmp / "w").mkdir()),
    ErrorPath("--world is not a database", ["run", "--task-id", "t", "--goal", "g",
                                            "--store", "sqlite:///c.db", "--world", "w.db"],
              "--world w.db: cannot use it as the World's SQLite file (file is not a database)",
              setup=lambda tmp: _write(tmp / "w.db", "not a database")),
    ErrorPath("unknown store scheme", ["list", "--store", "bogus://x"], "unknown store scheme"),
    ErrorPath("missing task", ["status", "missing", "--store", "memory://"],
              "no checkpoint for task 'missing'"),
    ErrorPath("a file that is not a database", ["list", "--store", "sqlite:///bad.db"],
              "the file is not a SQLite database",
              setup=lambda tmp: _write(tmp / "bad.db", "not a database")),
    ErrorPath("mistyped SQLite path", ["inspect", "t", "--store", "sqlite:///tyop/c.db"],
              "there is no store at"),
    ErrorPath("Redis without AOF", ["run", "--task-id", "t", "--goal", "g",
                                    "--store", "{redis}?key_prefix={prefix}"],
              "--allow-volatile-store"),
    ErrorPath("delete without --yes, stdin not a terminal",
              ["delete", "t", "--store", "sqlite:///c.db"], "pass --yes",
              setup=lambda tmp: _corrupt_sqlite_task(tmp / "c.db", "t")),
    ErrorPath("delete a missing task", ["delete", "nope", "--yes", "--store", "memory://", "--json"],
              "nothing deleted"),
    ErrorPath("corrupt checkpoint", ["status", "t", "--store", "sqlite:///c.db", "--json"],
              "python -m reference_agent delete t --store sqlite:///c.db",
              setup=lambda tmp: _corrupt_sqlite_task(tmp / "c.db", "t")),
    ErrorPath("a stored history no repair mends", ["run", "--task-id", "t", "--goal", "g",
                                                  "--store", "sqlite:///c.db"],
              "python -m reference_agent delete t --store sqlite:///c.db",
              setup=lambda tmp: _stored(tmp / "c.db", "t", [{"role": "user"}])),
    ErrorPath("agent state that is not an object", ["run", "--task-id", "t", "--goal", "g",
                                                    "--store", "sqlite:///c.db"],
              "metadata['reference_agent'] is a JSON str",
              setup=lambda tmp: _stored(tmp / "c.db", "t", [{"role": "user", "content": "g"}],
                                        {"reference_agent": "x"})),
    ErrorPath("a task that failed before", ["run", "--task-id", "t", "--goal", "g",
                                            "--store", "sqlite:///c.db"],
              "the task failed earlier",
              setup=lambda tmp: _failed_task(tmp / "c.db", "t")),
]


def _stored(path: Path, task_id: str, messages: list[dict[str, Any]],
            metadata: dict[str, Any] | None = None) -> None:
    store = open_store(f"sqlite:///{path}")
    store.save(Checkpoint(task_id=task_id, messages=messages, metadata=metadata or {}))
    store.close()


@pytest.mark.parametrize("argv", [
    ["-v", "list", "--store", "s3://bucket/p?endpoint_url=http://key:{password}@127.0.0.1:{port}"],
    ["-v", "run", "--task-id", "t", "--goal", "g", "--store", "sqlite:///c.db",
     "--base-url", "http://agent:{password}@127.0.0.1:{port}"],
], ids=["S3 endpoint", "base URL"])
def test_verbose_logs_of_the_drivers_never_show_a_password(argv: list[str], tmp_path: Path) -> None:
    # botocore and httpx log the URLs they were given at DEBUG level.
    port = _free_port()
    done = _cli([a.format(password=_PASSWORD, port=port) for a in argv], tmp_path, timeout=120)
    assert done.returncode == 1
    assert "DEBUG" in done.stderr and "***@127.0.0.1" in done.stderr
    assert _PASSWORD not in done.stderr + done.stdout


@pytest.mark.parametrize("which", ["another program's", "the checkpoint store's"])
def test_world_refuses_a_file_of_another_program_and_leaves_it_byte_for_byte(tmp_path: Path, which: str) -> None:
    # An outside round: --world created its table in such a file and set WAL mode on it.
    world = tmp_path / "w.db"
    if which == "another program's":
        with sqlite3.connect(world) as db:
            db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
            db.execute("INSERT INTO users (name) VALUES ('ann')")
        db.close()
    else:
        _stored(world, "other", [{"role": "user", "content": "go"}])
    before = world.read_bytes()
    done = _cli(["run", "--task-id", "t", "--goal", "g", "--store", "sqlite:///c.db", "--world", "w.db"], tmp_path)
    assert done.returncode == 1
    assert "--world w.db: holds tables of another program" in done.stderr
    assert "Traceback" not in done.stderr
    assert world.read_bytes() == before
    assert not (tmp_path / "w.db-wal").exists()


def test_inspect_shows_damaged_content_as_it_is_stored(tmp_path: Path) -> None:
    _stored(tmp_path / "c.db", "t", [{"role": "user", "content": 5},
                                     {"role": "assistant", "content": ["loose text"]}])
    done = _cli(["inspect", "t", "--store", "sqlite:///c.db"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "(not a content block: 5)" in done.stdout
    assert "(not a content block: loose text)" in done.stdout


def _failed_task(path: Path, task_id: str) -> None:
    store = open_store(f"sqlite:///{path}")
    store.save(Checkpoint(task_id=task_id, status="failed", messages=[{"role": "user", "content": "go"}],
                          metadata={"reference_agent": {"failure": "refused", "failure_kind": "refusal"}}))
    store.close()


_PASSWORD = "hunter2secret"  # in a URL of some error paths: never in any output


@pytest.mark.parametrize("path", ERROR_PATHS, ids=[p.name for p in ERROR_PATHS])
def test_every_cli_error_path_is_one_error_line_and_a_non_zero_exit(
    path: ErrorPath, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    port = _free_port()
    values: dict[str, str] = {"closed": f"http://127.0.0.1:{port}",
                              "closed_with_password": f"http://agent:{_PASSWORD}@127.0.0.1:{port}",
                              "prefix": f"clitest-{uuid.uuid4().hex[:8]}:"}
    text = " ".join(str(a) for a in path.argv) + " ".join(path.env.values())
    if "{redis" in text:
        url = request.getfixturevalue("agentckpt_redis_url")
        values["redis"] = url.split("?")[0]
        values["redis_host"] = values["redis"].rsplit("/", 1)[0]
    if "{refusing_api}" in text:
        values["refusing_api"] = request.getfixturevalue("refusing_api")
    if path.setup:
        path.setup(tmp_path)
    argv = [a.format(**values) if isinstance(a, str) else a for a in path.argv]
    env = _env(**{k: v.format(**values) for k, v in path.env.items()})
    before = sorted(p.name for p in tmp_path.iterdir())

    done = _cli(argv, tmp_path, env)

    lines = done.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert done.returncode == path.status, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert _PASSWORD not in done.stderr + done.stdout
    assert len(errors) == 1, done.stderr
    assert path.says in errors[0]
    if "--json" in argv:
        reply = json.loads(done.stdout.splitlines()[-1])
        assert reply["ok"] is False and reply["error"] == errors[0].removeprefix("error: ")
    if path.name in ("empty goal", "blank goal", "empty task id", "mistyped SQLite path",
                     "task id not UTF-8 (run)", "goal not UTF-8",
                     "run --model with a key the API refuses", "run --model with the API unreachable"):
        # Refused before anything was written: no store file, no directory.
        assert sorted(p.name for p in tmp_path.iterdir()) == before
    if path.name == "Redis without AOF":
        store = open_store(f"{values['redis']}?key_prefix={values['prefix']}")
        assert store.list_checkpoints() == []
        store.close()


def test_the_api_failing_mid_run_leaves_a_task_that_resumes(tmp_path: Path) -> None:
    store = "sqlite:///c.db"
    broken = _cli(["run", "--task-id", "t", "--goal", "g", "--store", store,
                   "--base-url", f"http://127.0.0.1:{_free_port()}"], tmp_path)
    assert broken.returncode == 1 and "resume" in broken.stderr
    resumed = _cli(["run", "--task-id", "t", "--goal", "g", "--store", store, "--json"], tmp_path)
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert resumed.returncode == 0, resumed.stderr
    assert events[0] == {"event": "loaded", "task_id": "t", "iteration": 0, "found": True,
                         "version": 1, "status": "running"}
    assert events[-1]["ok"] is True and events[-1]["answer"].startswith("Summary recorded")


def _big_task(path: Path) -> None:
    store = open_store(f"sqlite:///{path}")
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 20}
                for i in range(3000)]
    store.save(Checkpoint(task_id="big", messages=messages))
    store.close()


@pytest.mark.parametrize("argv", [["inspect", "big"], ["run", "--task-id", "new", "--goal", "g", "--json"]])
def test_output_into_a_reader_that_stops_early_exits_quietly(argv: list[str], tmp_path: Path) -> None:
    _big_task(tmp_path / "c.db")
    proc = subprocess.Popen(
        [*AGENT, *argv, "--store", "sqlite:///c.db"], cwd=tmp_path, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    stderr = proc.stderr.read().decode()
    status = proc.wait(timeout=90)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert not [line for line in stderr.splitlines() if line.startswith("error:")]
    assert status in (0, 1)
    if argv[0] == "run":
        # The reader went away; the task did not: it ran to its end.
        store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
        assert store.load("new").status == "completed"  # type: ignore[union-attr]
        store.close()


# -- point 4: invalid input refused before anything is written; delete; prune -------------


@pytest.mark.parametrize(
    ("task_id", "goal", "says"),
    [
        ("t1", "", "the goal is empty"),
        ("t1", " \t\n", "the goal is empty"),
        ("", "do it", "the task id is empty"),
        ("   ", "do it", "the task id is empty"),
        ("t\udcff", "do it", "not valid UTF-8"),
        ("t1", "do \udcfe it", "not valid UTF-8"),
    ],
)
def test_run_refuses_invalid_input_before_writing_anything(task_id: str, goal: str, says: str) -> None:
    store = open_store("memory://")
    api = FakeMessagesAPI(PlanModel(Plan(steps=(), final_answer="done")))
    with pytest.raises(ValueError, match=says):
        run(task_id, goal, client=api.client(), store=store, tools=Toolbox([]))
    assert store.list_checkpoints() == []
    assert api.exchanges == []


def test_delete_clears_a_corrupt_checkpoint_named_by_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _corrupt_sqlite_task(tmp_path / "c.db", "t")
    assert main(["run", "--task-id", "t", "--goal", "g", "--store", "sqlite:///c.db"]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    command = error.split("to delete it: ")[1].rstrip(")")
    assert command == "python -m reference_agent delete t --store sqlite:///c.db"
    assert main([*shlex.split(command)[3:], "--yes"]) == 0
    assert "deleted task 't'" in capsys.readouterr().out
    assert main(["run", "--task-id", "t", "--goal", "g", "--store", "sqlite:///c.db"]) == 0
    assert capsys.readouterr().out.startswith("Summary recorded")


class _Terminal:
    """stdin as a terminal, answering ``reply``."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        return self.reply


@pytest.mark.parametrize(("reply", "status", "kept"), [("y\n", 0, False), ("n\n", 1, True), ("\n", 1, True)])
def test_delete_asks_on_a_terminal_and_keeps_the_task_unless_told_yes(
    reply: str, status: int, kept: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["run", "--task-id", "t", "--goal", "g", "--store", url]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", _Terminal(reply))
    assert main(["delete", "t", "--store", url]) == status
    err = capsys.readouterr().err
    assert "task 't': completed at iteration 7, 4 irreversible action(s) done" in err
    store = open_store(url)
    assert (store.load("t") is not None) == kept
    store.close()


def test_delete_refuses_without_yes_when_stdin_is_not_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["run", "--task-id", "t", "--goal", "g", "--store", url]) == 0
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115
    assert main(["delete", "t", "--store", url]) == 1
    assert "stdin is not a terminal: pass --yes" in capsys.readouterr().err
    assert main(["delete", "t", "--store", url, "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"ok": True, "deleted": "t"}


def test_prune_skips_and_reports_a_corrupt_task_and_prunes_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    path = tmp_path / "c.db"
    _corrupt_sqlite_task(path, "bad", status="completed")
    store = open_store(f"sqlite:///{path}")
    for task_id in ("done-1", "done-2"):
        store.save(Checkpoint(task_id=task_id, status="completed"))
    store.close()
    time.sleep(0.2)
    assert main(["prune", "--older-than", "0.1s", "--store", f"sqlite:///{path}", "--json"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert [r["task_id"] for r in report["pruned"]] == ["done-1", "done-2"]
    assert [s["task_id"] for s in report["skipped"]] == ["bad"]
    assert "skipped bad: unreadable" in err and "python -m reference_agent delete bad" in err
    store = open_store(f"sqlite:///{path}")
    assert [s.task_id for s in store.list_checkpoints()] == ["bad"]
    store.close()


def test_list_and_prune_name_an_unreadable_task_and_go_on_with_the_others(
    any_checkpoint_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from pytest_agentckpt.certify.hooks import hooks_for

    url = any_checkpoint_store_url
    if url.startswith("memory:"):
        pytest.skip("memory:// stores share nothing between instances (the contract test covers it)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a non-durable Redis warns on open
        store = open_store(url)
    for task_id in ("bad", "done-1", "done-2"):
        store.save(Checkpoint(task_id=task_id, status="completed"))
    corrupt = hooks_for(store).corrupt
    assert corrupt is not None
    corrupt("bad")
    time.sleep(0.2)
    try:
        assert main(["list", "--store", url]) == 1
        out, err = capsys.readouterr()
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["done-1", "done-2"]
        assert "skipped bad: unreadable" in err and f"{_PROG} delete bad --store" in err

        assert main(["prune", "--older-than", "0.1s", "--store", url, "--json"]) == 1
        out, err = capsys.readouterr()
        report = json.loads(out)
        assert [r["task_id"] for r in report["pruned"]] == ["done-1", "done-2"]
        assert [s["task_id"] for s in report["skipped"]] == ["bad"]  # once, not once per status
        assert err.count("skipped bad: unreadable") == 1
        assert store.load("done-1") is None
        with pytest.raises(CorruptCheckpointError):
            store.load("bad")  # left as it is
    finally:
        store.close()


@pytest.mark.parametrize("dry_run", [False, True], ids=["prune", "dry-run"])
def test_prune_never_deletes_a_task_whose_checkpoint_is_running_though_the_listing_says_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dry_run: bool
) -> None:
    # An outside round: the status column said completed, the stored head running (a
    # restore, a hand edit, another tool's write). prune listed it by the column, checked
    # only the version, and deleted a running task's ledger; its output said "running".
    path = tmp_path / "c.db"
    store = open_store(f"sqlite:///{path}")
    store.save(Checkpoint(task_id="keep", status="running", iteration=7))
    store.save(Checkpoint(task_id="done", status="completed"))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE checkpoints SET status = 'completed' WHERE task_id = 'keep'")
    db.close()
    time.sleep(0.2)
    argv = ["prune", "--older-than", "0.1s", "--store", f"sqlite:///{path}", "--json"]
    assert main(argv + (["--dry-run"] if dry_run else [])) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert [r["task_id"] for r in report["pruned"]] == ["done"]
    assert [s["task_id"] for s in report["skipped"]] == ["keep"]
    assert "skipped keep: the store lists it as completed" in err and "its checkpoint says running" in err
    assert "to delete it" not in err
    store = open_store(f"sqlite:///{path}")
    kept = store.load("keep")
    assert kept is not None and (kept.status, kept.iteration) == ("running", 7)
    assert (store.load("done") is None) is not dry_run
    store.close()


def test_list_names_a_task_of_a_newer_schema_as_one_to_upgrade_for_not_to_delete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.db"
    store = open_store(f"sqlite:///{path}")
    store.save(Checkpoint(task_id="new", status="completed"))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE checkpoints SET head = CAST(replace(CAST(head AS TEXT), "
                   "'\"schema_version\":1', '\"schema_version\":99') AS BLOB)")
    db.close()
    assert main(["list", "--store", f"sqlite:///{path}"]) == 1
    err = capsys.readouterr().err
    assert "skipped new: written with schema_version 99" in err and "upgrade pytest-agentckpt" in err
    assert "to delete it" not in err


_FORGED_ID = "t\n+fake-row  completed\x1b[2J\u202e"  # a newline, a clear-screen sequence, a bidi override


def test_a_task_id_with_control_characters_cannot_forge_output_or_move_the_cursor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = open_store(url)
    store.save(Checkpoint(task_id=_FORGED_ID, goal="line one\nline two\x1b[31m", status="completed",
                          final_answer="done\n\tindented\x07",
                          messages=[{"role": "user", "content": "go\x1b]0;title\x07"}]))
    store.close()
    time.sleep(0.01)
    shown = "t\\n+fake-row  completed\\x1b[2J\\u202e"
    for argv in (["list"], ["status", _FORGED_ID], ["inspect", _FORGED_ID],
                 ["prune", "--older-than", "0.001s", "--dry-run"]):
        assert main([*argv, "--store", url]) == 0, argv
        out, err = capsys.readouterr()
        assert "\x1b" not in out + err and "\u202e" not in out + err and "\x07" not in out, (argv, out)
        assert shown in out, (argv, out)
        assert "+fake-row" not in [line.split()[0] for line in out.splitlines() if line.split()], (argv, out)
    # Multi-line texts keep their lines: only what moves the cursor or rings is escaped.
    main(["status", _FORGED_ID, "--store", url])
    out, _ = capsys.readouterr()
    assert "answer: done\n\tindented\\x07" in out, out
    # The delete command a report gives for such an id is one shell word that means it.
    from reference_agent.cli import _delete_command

    word = _delete_command(_FORGED_ID, None).split(" delete ", 1)[1]
    assert "\x1b" not in word and "\n" not in word
    done = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True)
    assert done.stdout == _FORGED_ID


# -- point 7: read-only commands create nothing -------------------------------------------------


@pytest.mark.parametrize("argv", [["list"], ["status", "t"], ["inspect", "t"], ["delete", "t", "--yes"],
                                  ["prune", "--older-than", "1d"]])
def test_read_only_commands_on_a_mistyped_path_say_no_store_and_create_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTCKPT_STORE_URL", raising=False)
    assert main([*argv, "--store", f"sqlite:///{tmp_path / 'tpyo' / 'deep' / 'c.db'}"]) == 1
    assert "there is no store at" in capsys.readouterr().err
    assert main(argv) == 1  # the default store of a directory that has none
    assert "there is no store at sqlite:///.agentckpt/checkpoints.db" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# -- point 8: a Redis without AOF ---------------------------------------------------------------


def test_run_on_a_redis_without_aof_needs_the_explicit_opt_out_and_warns_once(
    agentckpt_redis_url: str, tmp_path: Path
) -> None:
    prefix = f"clitest-{uuid.uuid4().hex[:8]}:"
    url = f"{agentckpt_redis_url.split('?')[0]}?key_prefix={prefix}"
    store = open_store(url)
    if store.info().durable is not False:
        store.close()
        pytest.skip("the test Redis has AOF on")
    try:
        refused = _cli(["run", "--task-id", "t", "--goal", "g", "--store", url], tmp_path)
        assert refused.returncode == 1 and "appendonly yes" in refused.stderr
        assert store.list_checkpoints() == []
        allowed = _cli(["run", "--task-id", "t", "--goal", "g", "--store", url,
                        "--allow-volatile-store"], tmp_path)
        assert allowed.returncode == 0, allowed.stderr
        warned = [line for line in allowed.stderr.splitlines() if "restart" in line]
        assert len(warned) == 1 and warned[0].startswith("warning:")
        assert "RedisNotDurableWarning" not in allowed.stderr
        # Reading is harmless: no refusal, no warning.
        listed = _cli(["list", "--store", url], tmp_path)
        assert listed.returncode == 0 and listed.stderr == "" and "completed" in listed.stdout
    finally:
        store.delete("t")
        store.close()


def test_run_on_a_redis_with_aof_goes_ahead_without_a_warning(tmp_path: Path) -> None:
    from pytest_agentckpt.services.redis import PrivateRedis

    try:
        server = PrivateRedis(tmp_path / "redis", appendonly=True)
        server.start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        done = _cli(["run", "--task-id", "t", "--goal", "g", "--store", server.url], tmp_path)
        assert done.returncode == 0, done.stderr
        assert "warning" not in done.stderr.lower()
        assert done.stdout.startswith("Summary recorded")
    finally:
        server.stop()


# -- point 9: Ctrl-C and SIGTERM record the outcome they hold -----------------------------------


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_right_after_an_unkeyed_effect_records_its_outcome_and_resume_does_not_repeat_it(
    signum: int, status: int, tmp_path: Path
) -> None:
    store_url = "sqlite:///c.db"
    command = [*AGENT, "run", "--task-id", "t", "--goal", "g", "--store", store_url,
               "--world", "world.db", "--json"]
    proc = subprocess.Popen(
        [*command, "--hold-at", "tool_call:create_file:1"], cwd=tmp_path, env=_env(),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:
        if json.loads(line)["event"] == "held":
            break
    # create_file (no idempotency key) took effect; its outcome is not saved yet.
    proc.send_signal(signum)
    proc.stdin.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == status, stderr
    assert "Traceback" not in stderr and "run the same command again to resume it from its last checkpoint" in stderr
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    stored = store.load("t")
    store.close()
    assert stored is not None
    assert [(a.tool_name, a.state) for a in stored.actions] == [("write_record", "done"),
                                                                ("create_file", "done")]
    resumed = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                             timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    settled = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert [e["outcome"] for e in settled if e.get("tool") == "create_file"] == ["from_ledger"]
    world = World(tmp_path / "world.db")
    assert len(world.effects("create_file")) == 1
    world.close()


def _signal_twice(reached: list[str]) -> None:
    from reference_agent.agent import _signals_held

    with _signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("held once")
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("not reached")


def _signal_once(reached: list[str]) -> None:
    from reference_agent.agent import _signals_held

    with _signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("the action finished")
    reached.append("not reached")


@pytest.mark.parametrize(("signum", "status", "says"), [
    (signal.SIGINT, 130, "interrupted (Ctrl-C): task 't' stopped"),
    (signal.SIGTERM, 143, "terminated (SIGTERM): task 't' stopped"),
])
def test_a_stop_signal_a_library_wrapped_in_its_own_error_is_still_a_stop(
    signum: int, status: int, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # pydantic turns a KeyboardInterrupt raised while it builds a schema into a SchemaError:
    # Ctrl-C at that moment was "error: unexpected SchemaError ... KeyboardInterrupt".
    import reference_agent.cli as cli

    def wrapping(args: Any) -> int:
        try:
            signal.raise_signal(signum)
        except BaseException as exc:
            raise RuntimeError(f"Error building validator: {type(exc).__name__}") from None
        return 0

    monkeypatch.setattr(cli, "cmd_status", wrapping)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert main(["status", "t", "--store", "memory://"]) == status
    err = capsys.readouterr().err
    assert says in err and "unexpected" not in err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_second_signal_during_an_action_is_delivered_at_once() -> None:
    reached: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _signal_twice(reached)
    assert reached == ["held once"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_held_signal_is_delivered_when_the_action_is_recorded() -> None:
    reached: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _signal_once(reached)
    assert reached == ["the action finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- point 13: the demo's Reproduce line replays the scenario ------------------------------------


def test_the_demo_reproduce_line_replays_the_same_scenario(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    first = _cli(["demo", "--seed", "11", "--kills", "2", "--store", store], tmp_path, timeout=180)
    assert first.returncode == 0, first.stderr
    line = re.search(r"Reproduce: (.+)$", first.stdout, re.M)
    assert line is not None
    words = shlex.split(line[1])
    assert words[:3] == ["python", "-m", "reference_agent"]
    kills = re.findall(r"^  kill \d+: (.+)$", first.stdout, re.M)
    assert len(kills) == 2
    replay = _cli([*words[3:], "--json"], tmp_path, timeout=180)
    assert replay.returncode == 0, replay.stderr
    report = json.loads(replay.stdout)
    assert report["kill_descriptions"] == kills
    assert (report["seed"], report["store"], report["reproduce"]) == (11, store, line[1])


def test_a_sqlite_store_that_chose_synchronous_normal_is_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It survives a process crash (only a power loss may drop its last saves): the URL chose it.
    url = f"sqlite:///{tmp_path / 'c.db'}?synchronous=normal"
    assert main(["run", "--task-id", "t", "--goal", "g", "--store", url]) == 0
    assert "warning" not in capsys.readouterr().err


# -- point 14: bad input names the right place, the right status, the right fix, the right usage --


_BLANK_TEXT = {"type": "text", "text": "  "}  # no repair mends it
_BLANK = {"role": "user", "content": [_BLANK_TEXT]}
_CALL = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search",
                                           "input": {}}]}


@pytest.mark.parametrize(("stored", "says"), [
    # The repair drops the empty reply before the bad message: the repaired history has one less.
    ([{"role": "user", "content": "go"}, {"role": "assistant", "content": ""}, _BLANK],
     "(messages.2.content.0: text content blocks must contain non-whitespace text)"),
    # The repair adds the answer to toolu_1 before the bad message: one more.
    ([{"role": "user", "content": "go"}, _CALL, {"role": "assistant", "content": "hi"}, _BLANK],
     "(messages.3.content.0: text content blocks must contain non-whitespace text)"),
    # The repair moved the result of toolu_1 before the bad block: its index is the repaired one's.
    ([{"role": "user", "content": "go"}, {"role": "assistant", "content": ""}, _CALL,
      {"role": "user", "content": [_BLANK_TEXT,
                                   {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}],
     "(messages.3: at content.1 of this message as the repair changed it: text content blocks"),
], ids=["dropped before", "added before", "changed by the repair"])
def test_an_unresumable_history_names_the_bad_message_by_its_stored_position(
    stored: list[dict[str, Any]], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stored(tmp_path / "c.db", "t", stored)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["run", "--task-id", "t", "--goal", "g", "--store", url]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert says in error, error
    named = re.search(r"\(messages\.(\d+)", error)
    assert named is not None and stored[int(named[1])]["content"][0] == _BLANK_TEXT  # as inspect numbers it
    store = open_store(url)
    assert store.load("t").messages == stored  # type: ignore[union-attr]  # left as it is
    store.close()


def test_list_shows_the_saved_status_and_status_reports_damaged_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # list reads the heads only: a task whose message rows are damaged shows the status it
    # was saved with, under a header that says so; status reads the task and says it is corrupt.
    _corrupt_sqlite_task(tmp_path / "c.db", "t")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["list", "--store", url]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["TASK", "SAVED", "STATUS"] and row.split()[:2] == ["t", "running"]
    assert main(["status", "t", "--store", url]) == 1
    error = capsys.readouterr().err
    assert "checkpoint 't' is corrupt" in error and f"{_PROG} delete t --store {url}" in error
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    assert "not its message history" in " ".join(capsys.readouterr().out.split())


def _truncated(path: Path) -> None:
    store = open_store(f"sqlite:///{path}")
    for n in range(3):
        store.save(Checkpoint(task_id=f"t{n}", messages=[{"role": "user", "content": "go " * 500}]))
    store.close()  # closing the last connection moves the WAL into the file
    os.truncate(path, path.stat().st_size // 2)


@pytest.mark.parametrize(("damage", "says", "not_said"), [
    ("truncated", ["database disk image is malformed: the file is damaged",
                   "Do not delete or overwrite it", "restore it from a backup", '".recover"',
                   "check that the new file lists your tasks"],
     "network share"),
    # What a .recover that found nothing leaves (sqlite3's own layout pragma kept).
    ("no tables", ["no such table: checkpoints", "not a checkpoint store",
                   "the recovery found nothing", "The file was not changed"], "network share"),
    ("newer layout", ["table layout 9, newer than this code's", "upgrade pytest-agentckpt"],
     "network share"),
    # Another program's database: the store must not add its tables to it, nor switch it
    # to WAL mode.
    ("foreign", ["tables of another program (orders)"], "network share"),
    ("not a database", ["the file is not a SQLite database", "Do not delete or overwrite it",
                        "restore it from a backup"], "network share"),
    ("locked", ["database is locked: another process held a lock on it longer than busy_timeout "
                "(100 ms)"], ".recover"),
], ids=["truncated", "no tables", "newer layout", "foreign", "not a database", "locked"])
@pytest.mark.parametrize("argv", [["list"], ["status", "t0"], ["run", "--task-id", "t9", "--goal", "g"]],
                         ids=["list", "status", "run"])
def test_a_sqlite_file_sqlite_cannot_use_gets_the_advice_that_fits(
    damage: str, says: list[str], not_said: str, argv: list[str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from contextlib import closing

    path = tmp_path / "c.db"
    if damage == "truncated":
        _truncated(path)
    elif damage == "not a database":
        _write(path, "not a database")
    elif damage in ("no tables", "newer layout"):
        with closing(sqlite3.connect(path)) as made:
            made.execute(f"PRAGMA user_version = {1 if damage == 'no tables' else 9}")
    elif damage == "foreign":
        with closing(sqlite3.connect(path)) as made:
            made.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
            made.commit()
    else:
        open_store(f"sqlite:///{path}").close()
    before = path.read_bytes()
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        if damage == "locked":
            other.execute("BEGIN IMMEDIATE")  # another process's write transaction
        assert main([*argv, "--store", f"sqlite:///{path}?busy_timeout=100"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert all(part in err for part in says) and not_said not in err, err
    assert path.read_bytes() == before  # nothing lost: the file is as it was


@pytest.mark.parametrize(("argv", "says"), [
    (["run", "--task-id", "t", "--goal", "g", "--bogus"], "unrecognized arguments: --bogus"),
    (["list", "extra"], "unrecognized arguments: extra"),
    (["status", "t", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "--task-id", "t", "--goal", "g", "--checkpoint-every", "0"],
     "argument --checkpoint-every: must be >= 1, not 0"),
    (["run", "--task-id", "t", "--goal", "g", "--max-iterations", "x"],
     "argument --max-iterations: invalid int value: 'x'"),
], ids=["run --bogus", "list extra", "status --bogus", "run --checkpoint-every 0", "run --max-iterations x"])
def test_a_bad_argument_of_a_command_shows_that_commands_usage(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--store", "memory://"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    command = argv[0]
    assert err.startswith(f"usage: {_PROG} {command} [-h]"), err
    assert f"{_PROG} {command}: error: {says}" in err, err
