"""``pytest --agentckpt-certify`` and the importable test: contracts as ordinary tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfs",
         "--rootdir", str(tmp_path), "-c", os.devnull, *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )


def test_option_adds_one_passing_test_per_contract_for_a_correct_store(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--agentckpt-certify", "pytest_agentckpt.certify.builtin:sqlite",
                     "--agentckpt-certify-quick", "--agentckpt-certify-seed", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agentckpt certify: pytest_agentckpt.certify.builtin:sqlite (seed 3" in result.stdout
    assert "17 passed, 1 skipped" in result.stdout  # ttl: not declared, not applicable
    assert "not applicable" in result.stdout


def test_required_contracts_that_are_not_checkable_fail_instead_of_skipping(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--agentckpt-certify", "pytest_agentckpt.certify.builtin:memory",
                     "--agentckpt-certify-quick", "--agentckpt-certify-seed", "3")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "5 failed, 11 passed, 2 skipped" in result.stdout  # 2 optional ones: not applicable
    assert ("atomic_under_kill is required but not checkable (needs instances in separate "
            "processes that share data)") in result.stdout


def test_broken_contract_is_an_ordinary_test_failure_with_reproduction(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--agentckpt-certify", "tests.certify.buggy_stores:make_none_on_corrupt",
                     "--agentckpt-certify-quick", "--agentckpt-certify-seed", "4")
    assert result.returncode == 1
    assert "1 failed" in result.stdout
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1
    assert failed[0].endswith(
        "agentckpt-certify[tests.certify.buggy_stores:make_none_on_corrupt]::corruption_reported"
    )
    assert "--only corruption_reported --seed 4" in result.stdout


def test_bad_factory_is_a_usage_error(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--agentckpt-certify", "no_such_module_abc:make")
    assert result.returncode == 4  # pytest's usage-error exit code
    assert "cannot import module 'no_such_module_abc'" in result.stderr


def test_importable_test_certifies_the_factory_a_fixture_names(tmp_path: Path) -> None:
    (tmp_path / "test_my_store.py").write_text(
        "import pytest\n"
        "from pytest_agentckpt.fixtures.certify import test_checkpoint_store_contract  # noqa\n"
        "@pytest.fixture(scope='session')\n"
        "def certify_store_factory():\n"
        "    return 'tests.certify.buggy_stores:make_aliasing'\n"
    )
    result = _pytest(tmp_path, "--agentckpt-certify-quick", "test_my_store.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout
    assert "test_checkpoint_store_contract[no_aliasing]" in result.stdout


def test_a_factory_that_hangs_is_a_usage_error_at_the_time_limit(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--agentckpt-certify", "tests.certify.awkward_stores:make_hanging",
                     "--agentckpt-certify-quick", "--agentckpt-certify-timeout", "1")
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage-error status
    assert "did not finish within 1s" in result.stderr
    assert "raise the limit with --agentckpt-certify-timeout SECONDS" in result.stderr


def test_a_time_limit_that_is_not_positive_is_a_usage_error(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--agentckpt-certify", "pytest_agentckpt.certify.builtin:memory",
                     "--agentckpt-certify-timeout", "0")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "--agentckpt-certify-timeout must be a positive number of seconds, at most 86400 (a day), not 0" in result.stderr


def test_the_reproduce_line_repeats_the_budget_and_the_time_limit(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "--agentckpt-certify", "tests.certify.buggy_stores:make_none_on_corrupt",
                     "--agentckpt-certify-quick", "--agentckpt-certify-seed", "4",
                     "--agentckpt-certify-timeout", "90", "-k", "corruption_reported")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "--only corruption_reported --seed 4 --quick --timeout 90" in result.stdout


def test_the_pytest_script_imports_a_factory_module_from_the_current_directory(tmp_path: Path) -> None:
    # `agentckpt certify mystore:make` found it; the `pytest` script (unlike `python -m
    # pytest`) does not put the current directory on sys.path, and said it could not.
    (tmp_path / "mystore.py").write_text(
        "from pytest_agentckpt.certify.builtin import sqlite\n\n\n"
        "def make(namespace):\n    return sqlite(namespace)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CI", None)
    script = Path(sys.executable).parent / "pytest"
    result = subprocess.run(
        [str(script), "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", os.devnull,
         "--agentckpt-certify", "mystore:make", "--agentckpt-certify-quick", "-k", "round_trip or listing"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
