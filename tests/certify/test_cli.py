"""``agentckpt certify``: exit codes, progress, the table and the JSON/Markdown reports."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_agentckpt.cli import main


def test_certified_store_exits_0_and_writes_json_and_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path, md_path = tmp_path / "r.json", tmp_path / "r.md"
    # SQLite: a store shared across processes, so every required contract can be checked.
    code = main(["certify", "pytest_agentckpt.certify.builtin:sqlite", "--quick", "--seed", "11",
                 "--json", str(json_path), "--markdown", str(md_path)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "round_trip" in err  # progress while it runs
    assert "CERTIFIED: every required contract passed" in out
    assert "save p50" in out
    report = json.loads(json_path.read_text())
    assert report["passed"] is True
    assert report["exit_code"] == 0
    assert report["seed"] == 11
    assert {r["contract"] for r in report["results"]} >= {"round_trip", "compare_and_set"}
    assert [row["messages"] for row in report["figures"]["latency"]] == [10, 100, 1000]
    markdown = md_path.read_text()
    assert "| `round_trip` | required | PASS |" in markdown
    assert "## Figures" in markdown


def test_store_breaking_a_required_contract_exits_1_with_reproduction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["certify", "tests.certify.buggy_stores:make_none_on_corrupt", "--quick",
                 "--seed", "5", "--only", "corruption_reported,delete_idempotent", "--no-figures"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL corruption_reported" in out
    assert "reproduce: agentckpt certify tests.certify.buggy_stores:make_none_on_corrupt " \
           "--only corruption_reported --seed 5" in out
    assert "NOT CERTIFIED" in out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon_here", "is not MODULE:FACTORY"),
        ("no_such_module_xyz:make", "cannot import module 'no_such_module_xyz'"),
        ("pytest_agentckpt.certify.builtin:nothing", "has no attribute 'nothing'"),
        ("pytest_agentckpt.certify.builtin:URL_VARIABLE", "is not callable"),
        ("pytest_agentckpt.certify.builtin:from_env", "failed to make a store"),
    ],
)
def test_bad_factory_is_a_usage_error_with_exit_2(
    spec: str, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTCKPT_CERTIFY_URL", raising=False)
    assert main(["certify", spec, "--quick"]) == 2
    assert message in capsys.readouterr().err


def test_factory_returning_something_else_than_a_store_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["certify", "builtins:dict", "--quick"]) == 2
    assert "is not a CheckpointStore" in capsys.readouterr().err


def test_unknown_contract_and_missing_argument_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "pytest_agentckpt.certify.builtin:memory", "--only", "nope"]) == 2
    assert "unknown contracts ['nope']" in capsys.readouterr().err
    assert main(["certify"]) == 2
    assert main([]) == 2


@pytest.mark.parametrize("selection", [",", "", " , ,"])
def test_an_empty_only_is_refused_listing_the_contracts(
    capsys: pytest.CaptureFixture[str], selection: str
) -> None:
    # It ran every contract.
    assert main(["certify", "pytest_agentckpt.certify.builtin:memory", "--quick", "--no-figures",
                 "--only", selection]) == 2
    captured = capsys.readouterr()
    assert "names no contract" in captured.err
    assert "round_trip" in captured.err and "compare_and_set" in captured.err
    assert "certifying" not in captured.err  # refused before the run began


def test_certify_refuses_an_empty_only() -> None:
    from pytest_agentckpt.certify import certify

    with pytest.raises(ValueError, match="only is empty"):
        certify("pytest_agentckpt.certify.builtin:memory", quick=True, only=[], figures=False)


def test_a_contract_named_twice_runs_once() -> None:
    from pytest_agentckpt.certify import certify

    report = certify("pytest_agentckpt.certify.builtin:memory", quick=True, figures=False,
                     only=["round_trip", "compare_and_set", "round_trip"])
    assert [r.contract for r in report.results] == ["round_trip", "compare_and_set"]


@pytest.mark.parametrize(("where", "says"), [
    ("missing/r.json", "does not exist"),
    (".", "that is a directory"),
])
@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(
    option: str, where: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # It was a traceback after the whole run, and the report was lost.
    path = tmp_path / where
    assert main(["certify", "pytest_agentckpt.certify.builtin:memory", "--quick", option, str(path)]) == 2
    captured = capsys.readouterr()
    assert f"{option} {path}: " in captured.err and says in captured.err
    assert "certifying" not in captured.err  # refused before anything ran
    assert not (tmp_path / "missing").exists()


def test_a_report_that_fails_to_be_written_after_the_run_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    def full(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    code = main(["certify", "pytest_agentckpt.certify.builtin:memory", "--quick", "--only", "round_trip",
                 "--json", str(tmp_path / "r.json")])
    captured = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in captured.err
    assert "cannot write the report (No space left on device); the report above is complete" in captured.err
    assert "round_trip" in captured.out


def test_ctrl_c_during_a_run_is_one_line_and_status_130_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pytest_agentckpt.certify as certify_module

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(certify_module, "certify", interrupted)
    assert main(["certify", "pytest_agentckpt.certify.builtin:memory", "--quick"]) == 130
    err = capsys.readouterr().err
    assert "interrupted (Ctrl-C): stopped without a verdict; it deleted what it wrote" in err


def test_ctrl_c_with_a_clean_up_that_did_not_finish_says_which_tasks_may_remain(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pytest_agentckpt.certify as certify_module

    def interrupted(*args: object, **kwargs: object) -> object:
        exc = KeyboardInterrupt()
        exc.cleaned, exc.run_id = False, "certify-0123456789"  # type: ignore[attr-defined]
        raise exc

    monkeypatch.setattr(certify_module, "certify", interrupted)
    assert main(["certify", "pytest_agentckpt.certify.builtin:memory", "--quick"]) == 130
    err = capsys.readouterr().err
    assert "its clean-up did not finish, so tasks whose id starts with certify-0123456789- may remain" in err
    assert "it deleted what it wrote" not in err


def test_help_lists_the_certify_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("MODULE:FACTORY", "--json", "--markdown", "--quick", "--seed", "--strict",
                   "--scratch"):
        assert option in out
    assert "3 not" in " ".join(out.split())  # the exit statuses, 3 included


def test_a_store_whose_required_contracts_are_not_checkable_exits_3_strict_or_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["certify", "tests.certify.hookless_store:make_store", "--quick", "--no-figures",
            "--only", "corruption_reported,newer_schema_refused,compare_and_set"]
    assert main(args) == 3
    out = capsys.readouterr().out
    assert "NOT CHECKABLE" in out
    assert "NOT CERTIFIED (exit 3)" in out
    assert "needs a certify_corrupt(task_id) hook" in out
    assert main([*args, "--strict"]) == 3


def test_a_store_warning_is_printed_once_after_the_progress_not_in_its_middle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["certify", "tests.certify.user_stores:make_warning", "--quick", "--no-figures",
                 "--only", "compare_and_set,delete_idempotent,no_aliasing"])
    assert code == 0
    err = capsys.readouterr().err.splitlines()
    warned = [i for i, line in enumerate(err) if line.startswith("warning: store ")]
    assert len(warned) == 1, err
    assert warned[0] > max(i for i, line in enumerate(err) if "no_aliasing" in line)
    assert err[warned[0]].endswith("is not durable")


# -- a run that is not a certification says so ---------------------------------------------


def test_only_a_few_contracts_passing_is_not_called_a_certification(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path = tmp_path / "r.json"
    code = main(["certify", "pytest_agentckpt.certify.builtin:memory", "--quick", "--seed", "3",
                 "--only", "round_trip", "--no-figures", "--json", str(json_path)])
    out = capsys.readouterr().out
    assert code == 0  # what ran passed (see the exit-status table)
    assert "CERTIFIED" not in out
    assert "PASSED the 1 selected contract (round_trip); NOT a certification" in out
    assert "compare_and_set" in out.splitlines()[-1]  # names what was not run
    report = json.loads(json_path.read_text())
    assert report["passed"] is True
    assert report["certified"] is False
    assert "compare_and_set" in report["not_run"] and "round_trip" not in report["not_run"]
    assert "NOT a certification" in report["verdict"]


# -- time limits -------------------------------------------------------------------------


def test_a_contract_over_the_time_limit_says_how_to_raise_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOW_STORE_DELAY", "0.05")
    code = main(["certify", "tests.certify.awkward_stores:make_slow", "--quick", "--seed", "4",
                 "--only", "model_based", "--no-figures", "--timeout", "0.5"])
    out = capsys.readouterr().out
    assert code == 1
    assert "did not finish within 0.5s" in out
    assert "--timeout SECONDS" in out
    # The command that repeats it keeps the limit it ran with.
    assert "--only model_based --seed 4 --quick --timeout 0.5" in out


def test_a_slow_correct_store_passes_with_a_higher_limit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOW_STORE_DELAY", "0.05")
    code = main(["certify", "tests.certify.awkward_stores:make_slow", "--quick", "--seed", "4",
                 "--only", "model_based", "--no-figures", "--timeout", "600"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "model_based  yes  PASS" in out


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "1e10"])
def test_a_timeout_that_is_not_positive_or_past_a_day_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # inf and 1e10 reached the waits the limit bounds: an OverflowError with a traceback.
    code = main(["certify", "pytest_agentckpt.certify.builtin:memory", "--timeout", value])
    assert code == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and "at most 86400 (a day)" in err and "Traceback" not in err


def test_a_factory_that_hangs_is_stopped_by_the_time_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["certify", "tests.certify.awkward_stores:make_hanging", "--quick",
                 "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "did not finish within 1s" in err
    assert "is its backend reachable?" in err


# -- messages that name the real cause ----------------------------------------------------


def test_a_failing_first_listing_says_what_to_fix_before_mentioning_scratch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["certify", "tests.certify.awkward_stores:make_down", "--quick"])
    err = capsys.readouterr().err
    assert code == 2
    assert "ConnectionRefusedError" in err
    assert "Fix what makes the listing fail first" in err
    assert "skip that" not in err
    # --scratch only with what it means for the data.
    assert "Only if everything that store holds is disposable, --scratch" in err


def test_a_child_process_whose_save_fails_reports_that_cause() -> None:
    from pytest_agentckpt.certify import Outcome, certify

    report = certify("tests.certify.awkward_stores:make_down", quick=True, seed=1, scratch=True,
                     only=["lost_update_processes"], figures=False)
    result = report.result("lost_update_processes")
    assert result.outcome is Outcome.ERROR
    assert "its first save failed: ConnectionRefusedError" in result.summary
    assert "importable by name" not in result.summary


def test_a_hypothesis_failure_gives_the_cli_way_to_reproduce_not_a_decorator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["certify", "tests.certify.buggy_stores:make_lossy", "--quick", "--seed", "20240601",
                 "--only", "round_trip", "--no-figures"])
    out = capsys.readouterr().out
    assert code == 1
    assert "Draw 1 (checkpoint)" in out  # Hypothesis's failing example is kept
    assert "reproduce_failure" not in out
    assert "reproduce: agentckpt certify tests.certify.buggy_stores:make_lossy --only round_trip " \
           "--seed 20240601 --quick" in out


# -- Ctrl-C --------------------------------------------------------------------------------


def test_ctrl_c_during_model_based_leaves_none_of_its_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUGGY_STORE_DIR", str(tmp_path))
    monkeypatch.setenv("SLOW_STORE_DELAY", "0.005")
    command = [sys.executable, "-m", "pytest_agentckpt.cli", "certify",
               "tests.certify.awkward_stores:make_slow", "--only", "model_based",
               "--no-figures", "--seed", "5"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2],
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not any("-sm-" in p.name for p in tmp_path.rglob("*.json")):
            assert time.monotonic() < deadline, "model_based never started"
            time.sleep(0.05)
        time.sleep(2.0)  # mid-run: many tasks to clean up while the state machine writes on
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=90)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert "it deleted what it wrote" in err
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == []


def test_ctrl_c_to_the_process_group_twice_mid_kill_experiment_leaves_none_of_its_tasks(tmp_path: Path) -> None:
    # An outside round: a terminal's Ctrl-C reaches the writer processes too (they died
    # with tracebacks), and timeout(1) sends SIGINT to the process and to its group: the
    # second one cut the clean-up short (Python 3.11's Thread.join, once interrupted,
    # says the thread has ended), and the run said it had deleted what it wrote while
    # 30 to 45 of its tasks stayed.
    import sqlite3

    database = tmp_path / ".agentckpt" / "checkpoints.db"
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentckpt.cli", "certify", "stores:open_store", "--quick", "--no-figures",
         "--only", "round_trip,atomic_under_kill"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )

    def tasks(pattern: str) -> int:
        if not database.exists():
            return 0
        try:
            with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1)) as db:
                return int(db.execute("SELECT count(*) FROM checkpoints WHERE task_id LIKE ?", (pattern,)).fetchone()[0])
        except sqlite3.Error:
            return 0

    try:
        deadline = time.monotonic() + 60
        while tasks("%-kill-%") < 2:
            assert child.poll() is None and time.monotonic() < deadline, "the kill experiment never started"
            time.sleep(0.02)
        os.killpg(child.pid, signal.SIGINT)
        time.sleep(0.01)
        os.killpg(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=90)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert "Traceback" not in err
    assert "it deleted what it wrote" in err
    assert tasks("certify-%") == 0


class _NoDelete:
    """A store that forgot one method of the protocol."""

    def load(self, task_id: str) -> None:
        return None

    def save(self, checkpoint: object) -> object:
        return checkpoint

    def list_checkpoints(self) -> list[object]:
        return []

    def info(self) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass


def make_no_delete() -> _NoDelete:
    return _NoDelete()


def test_a_store_missing_a_method_is_told_which(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "tests.certify.test_cli:make_no_delete", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "which is not a CheckpointStore: it has no delete method" in err
    assert main(["certify", "builtins:dict", "--quick"]) == 2
    assert "it has no" not in capsys.readouterr().err  # nothing of the protocol: no list


def test_a_writer_thread_whose_save_raises_a_drivers_error_is_reported_with_it_not_as_slow() -> None:
    # The other threads waited for the dead one at the lockstep barrier: the report said
    # the writers did not finish within 30 s, "a slow store needs a higher --timeout".
    from pytest_agentckpt.certify import Outcome, certify

    report = certify("tests.certify.awkward_stores:make_driver_error", quick=True, seed=1, scratch=True,
                     only=["lost_update_threads"], figures=False)
    result = report.result("lost_update_threads")
    assert result.outcome is Outcome.ERROR, result.summary
    assert "a writer thread failed" in result.summary and "LookupError: wrong last sequence" in result.summary
    assert "did not finish" not in result.summary and "higher --timeout" not in result.summary
