"""The README's quick start is what CI runs, and its test command installs all the suite needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parent.parent


def _quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README's quick start has no bash block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_quick_start_is_two_commands_and_ci_runs_both_verbatim() -> None:
    commands = _quick_start_commands()
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in commands:
        assert any(line.strip().startswith(command) for line in ci.splitlines()), command
    # The test command is the last thing CI runs, so its exit status is CI's.
    last = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")][-1]
    assert last.strip() == commands[1]


def test_the_test_extra_installs_the_docs_toolchain_that_the_docs_tests_use() -> None:
    # tests/test_docs.py builds the site strictly and imports the griffe extension: a fresh
    # `pip install -e '.[test]'` must bring mkdocs, mkdocstrings and griffe with it.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]

    def closure(name: str) -> set[str]:
        found: set[str] = set()
        for requirement in extras[name]:
            match = re.match(r"pytest-agentckpt\[([^\]]+)\]", requirement)
            if match:
                for inner in match.group(1).split(","):
                    found |= closure(inner.strip())
            else:
                found.add(re.split(r"[<>=\[; ]", requirement, maxsplit=1)[0].lower())
        return found

    needed = closure("test")
    for package in ("mkdocs", "mkdocs-material", "mkdocstrings"):
        assert package in needed, f"the test extra does not install {package}"
