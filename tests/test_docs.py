"""The documentation's code and commands run, and its reference pages match the code.

Conventions of the pages under ``docs/`` (see ``docs/index.md`` and the others):

- a ```` ```python ```` block runs: the blocks of a page run in order, in one namespace,
  in a fresh working directory;
- a block with a ``title="…"`` says why it does not run here ("illustration",
  "needs a Redis server", "needs ANTHROPIC_API_KEY"); a Python one must still compile;
- a block made of ``--8<-- "docs/examples/FILE:section"`` lines shows a part of a file
  under ``docs/examples/``, which the test suite runs as a whole;
- ```` ```console ```` lines starting with ``$ `` and ```` ```bash ```` lines are
  commands: the cheap offline ones run here, and every output line shown after a
  ``$`` command (except lines with ``…``) must be in what the command prints.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"

# Pages whose commands this module runs (fuzzing.md belongs to the harness docs).
COMMAND_PAGES = (
    "index.md",
    "reference-agent.md",
    "certify.md",
    "stores.md",
    "testing-your-agent.md",
)

# Commands shown in the pages that are not run here, by prefix, with the reason.
NOT_RUN = {
    "pip install": "installs packages",
    "pytest": "the whole test suite, or a placeholder package",
    "export ": "sets the API key for Claude",
    "python -m tests.benchmarks.bench_stores": "takes minutes and starts private servers",
    "agentckpt certify mypackage.": "a placeholder package",
    "AGENTCKPT_CERTIFY_URL=": "needs a Redis server (tests/stores/test_redis.py runs the ttl contract on one)",
}

OPEN_FENCE = re.compile(r"^(?P<fence>`{3,})(?P<lang>[\w-]*)(?P<attrs>.*)$")
TITLE = re.compile(r'title="(?P<title>[^"]*)"')
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"$')


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    code: str

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"

    @property
    def snippets(self) -> list[re.Match[str]]:
        return [m for m in map(SNIPPET.match, self.code.splitlines()) if m]


def blocks(page: str) -> list[Block]:
    found: list[Block] = []
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = OPEN_FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != m["fence"]:
            body.append(lines[i])
            i += 1
        title = TITLE.search(m["attrs"])
        found.append(
            Block(
                page,
                start + 1,
                m["lang"],
                title["title"] if title else None,
                "\n".join(body) + "\n",
            )
        )
        i += 1
    return found


def pages() -> list[str]:
    """The pages whose Python blocks this module runs or checks."""
    return sorted(p.name for p in DOCS.glob("*.md"))


def python_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page) if b.lang == "python"]


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """A working directory of its own, no API key, no store URL from the environment."""
    monkeypatch.chdir(tmp_path)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTCKPT_STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ)


# -- Python blocks ---------------------------------------------------------------------


def test_the_pages_have_python_blocks_that_run() -> None:
    runnable = [b for b in python_blocks() if b.title is None and not b.snippets]
    assert {b.page for b in runnable} >= {"stores.md", "reference-agent.md", "certify.md"}


@pytest.mark.parametrize(
    "page",
    [
        p
        for p in pages()
        if any(b.lang == "python" and b.title is None and not b.snippets for b in blocks(p))
    ],
)
def test_python_blocks_of_the_page_run(page: str, offline_env: dict[str, str]) -> None:
    namespace: dict[str, object] = {"__name__": f"docs_{page[:-3].replace('-', '_')}"}
    for block in blocks(page):
        if block.lang != "python" or block.title is not None or block.snippets:
            continue
        code = compile(block.code, block.where, "exec")
        exec(code, namespace)


@pytest.mark.parametrize(
    "block", [b for b in python_blocks() if b.title is not None], ids=lambda b: b.where
)
def test_illustrations_are_valid_python(block: Block) -> None:
    compile(block.code, block.where, "exec")


@pytest.mark.parametrize("block", [b for b in python_blocks() if b.snippets], ids=lambda b: b.where)
def test_included_sections_exist_in_example_files_the_suite_runs(block: Block) -> None:
    tests_text = "\n".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py")
    )
    for m in block.snippets:
        path = ROOT / m["path"]
        assert EXAMPLES in path.parents, f"{block.where}: include files from docs/examples/"
        text = path.read_text(encoding="utf-8")
        if m["section"]:
            for marker in ("start", "end"):
                assert f"--8<-- [{marker}:{m['section']}]" in text, (
                    f"{block.where}: no section {m['section']!r}"
                )
        # Some test runs the file the page shows parts of.
        assert path.name in tests_text or path.stem in tests_text, f"no test runs {m['path']}"


# -- commands --------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str
    shown_output: tuple[str, ...]
    needs_api_key: bool


def commands(page: str) -> list[Command]:
    found: list[Command] = []
    for block in blocks(page):
        if block.lang not in ("bash", "console"):
            continue
        needs_key = block.title == "needs ANTHROPIC_API_KEY"
        lines = block.code.splitlines()
        for offset, raw in enumerate(lines):
            if block.lang == "console":
                if not raw.startswith("$ "):
                    continue
                text, output = raw[2:], []
                for after in lines[offset + 1 :]:
                    if after.startswith("$ "):
                        break
                    output.append(after)
            else:
                text, output = raw.split(" #", 1)[0] if " # " in raw else raw, []
            # "pip install … && CMD": the install is not run, CMD is; "cd DIR && CMD" stays one.
            parts = [p.strip() for p in text.split("&&") if p.strip()]
            kept = [p for p in parts if _reason(p) is None]
            for part in [p for p in parts if _reason(p) is not None] + (
                [" && ".join(kept)] if kept else []
            ):
                found.append(Command(page, block.line + 1 + offset, part, tuple(output), needs_key))
    return found


def _reason(text: str) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if text.startswith(prefix)), None)


def _skipped(command: Command) -> str | None:
    return _reason(command.text)


def _normal(line: str) -> str:
    return " ".join(line.split())


def test_every_shown_command_is_run_or_skipped_for_a_reason() -> None:
    shown = [c for page in COMMAND_PAGES for c in commands(page)]
    run = [c for c in shown if _skipped(c) is None]
    assert any(c.text.startswith("python -m reference_agent demo") for c in run)
    assert any("agentckpt certify" in c.text for c in run)
    assert {c.text.split()[3] for c in run if c.text.startswith("python -m reference_agent ")} >= {
        "demo",
        "run",
        "status",
        "list",
        "inspect",
    }
    # The only command that needs Claude is marked as such.
    assert [c.text.split()[3] for c in shown if c.needs_api_key and _skipped(c) is None] == ["run"]


@pytest.mark.parametrize(
    "page", [p for p in COMMAND_PAGES if any(_skipped(c) is None for c in commands(p))]
)
def test_the_commands_of_the_page_run_offline(
    page: str, offline_env: dict[str, str], tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "docs" / "examples")
    bindir = str(Path(sys.executable).parent)
    env = {**offline_env, "PATH": bindir + os.pathsep + offline_env.get("PATH", "")}
    for command in commands(page):
        if _skipped(command):
            continue
        result = subprocess.run(
            ["bash", "-c", command.text],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        where = f"docs/{page}:{command.line}: {command.text}"
        if command.needs_api_key:
            # Offline, the command must parse and say what it needs (status 2 = bad options).
            assert result.returncode == 1, f"{where}\n{result.stderr}"
            assert "needs ANTHROPIC_API_KEY" in result.stderr, where
            continue
        assert result.returncode == 0, (
            f"{where}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
        printed = _normal(result.stdout)
        for line in command.shown_output:
            if line.strip() and "…" not in line:
                assert _normal(line) in printed, (
                    f"{where}: shown output {line!r} not printed:\n{result.stdout}"
                )
        if " demo" in command.text and "--store" not in command.text:
            # The pages say the demo keeps its store in a temporary directory.
            assert not (tmp_path / ".agentckpt").exists(), where
        if " demo " in f" {command.text} " and "--json" in command.text:
            report = json.loads(result.stdout)
            assert report["ok"] is True, where
            kills = re.search(r"--kills (\d+)", command.text)
            assert len(report["kill_points"]) == (int(kills[1]) if kills else 1), where


def test_the_claude_example_names_the_default_model() -> None:
    from reference_agent import DEFAULT_MODEL

    claude = [c for c in commands("index.md") if "--model" in c.text]
    assert claude, "Getting started shows how to run against Claude"
    for command in claude:
        assert (
            shlex.split(command.text)[shlex.split(command.text).index("--model") + 1]
            == DEFAULT_MODEL
        )


# -- the reference agent's CLI page matches its parser ------------------------------------


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    from reference_agent.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        s
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        for s in a.option_strings
        if s.startswith("--") and s != "--help"
    }


def test_the_cli_page_documents_every_command_and_option() -> None:
    page = (DOCS / "reference-agent.md").read_text(encoding="utf-8")
    usage = [
        b.code
        for b in blocks("reference-agent.md")
        if b.lang == "" and "python -m reference_agent" in b.code
    ]
    for name, parser in _subcommands().items():
        lines = [
            ln
            for u in usage
            for ln in re.split(r"\n(?=python -m)", u)
            if ln.startswith(f"python -m reference_agent {name}")
        ]
        assert lines, f"no usage line for {name!r}"
        documented = set(re.findall(r"--[a-z][a-z-]*", " ".join(lines)))
        assert documented == _options(parser), f"{name}: usage shows {sorted(documented)}"
        if name in ("demo", "run"):
            for option in _options(parser):
                assert f"| `{option}" in page, f"{name} {option} has no row in its options table"
        for action in parser._actions:
            if (
                action.option_strings
                and action.choices
                and all(isinstance(c, str) for c in action.choices)
            ):
                assert "|".join(action.choices) in " ".join(lines), (
                    f"{name}: choices of {action.option_strings}"
                )
    assert "`-v`" in page


def test_the_cli_page_lists_the_environment_it_reads() -> None:
    page = (DOCS / "reference-agent.md").read_text(encoding="utf-8")
    environment = page.split("## Environment", 1)[1].split("\n## ", 1)[0]
    sources = [ROOT / "reference_agent" / "cli.py", ROOT / "stores" / "url.py"]
    read = {
        m
        for s in sources
        for m in re.findall(r"environ(?:\.get)?[\[(]\"([A-Z_]+)\"", s.read_text())
    }
    assert read >= {"ANTHROPIC_API_KEY", "AGENTCKPT_STORE_URL"}
    for name in read:
        assert f"`{name}`" in environment, f"{name} is read but not documented"


def test_the_getting_started_store_urls_open() -> None:
    from stores import open_store

    assert open_store("memory://").info().backend == "memory"
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    stores = (DOCS / "stores.md").read_text(encoding="utf-8")
    for scheme in ("memory://", "sqlite:///", "postgresql://", "redis://", "s3://"):
        assert f"`{scheme}" in index and f"`{scheme}" in stores, scheme
    for backend in (
        "## Memory",
        "## SQLite",
        "## PostgreSQL",
        "## Redis",
        "## S3",
        "## Measured figures",
    ):
        assert backend + "\n" in stores, backend


# -- API reference and the site -------------------------------------------------------


def test_the_api_reference_names_objects_that_exist() -> None:
    names = re.findall(r"^::: ([\w.]+)$", (DOCS / "api.md").read_text(encoding="utf-8"), re.M)
    assert len(names) > 40
    for name in names:
        module, _, attr = name.rpartition(".")
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError:
            obj = getattr(importlib.import_module(module), attr)
        assert obj.__doc__, f"{name} has no docstring"


def test_the_api_reference_lists_every_root_export() -> None:
    # DEFAULT_FAULT_KINDS, which the docs tell users to import, was missing from the list.
    import pytest_agentckpt

    text = (DOCS / "api.md").read_text(encoding="utf-8")
    listed = text[text.index("## `pytest_agentckpt`") : text.index("::: pytest_agentckpt\n")]
    missing = [name for name in pytest_agentckpt.__all__ if f"`{name}`" not in listed]
    helpers = re.findall(r"^::: pytest_agentckpt\.fake_api\.(\w+)$", text, re.M)
    assert not [name for name in missing if name not in helpers], missing


def test_the_docstring_extension_fences_doctests_and_roles() -> None:
    sys.path.insert(0, str(DOCS))
    try:
        from griffe_rest import rest_to_markdown
    finally:
        sys.path.remove(str(DOCS))
    text = "See :class:`~stores.Checkpoint`.\n\n>>> f([1])\n[1]\n\nThe marker::\n\n    @mark(x)\n\nEnd."
    assert rest_to_markdown(text).splitlines() == [
        "See `Checkpoint`.",
        "",
        "```pycon",
        ">>> f([1])",
        "[1]",
        "```",
        "",
        "The marker:",
        "",
        "```",
        "@mark(x)",
        "```",
        "",
        "End.",
    ]


def test_readme_links_into_the_docs_resolve() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "api" / "index.html").is_file()
