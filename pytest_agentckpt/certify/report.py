"""Render a :class:`~.runner.CertificationReport`: terminal table, JSON, Markdown."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from .runner import CertificationReport, ContractResult, Outcome

__all__ = ["to_json", "to_markdown", "to_text", "verdict"]

_MARKS = {
    Outcome.PASSED: "PASS",
    Outcome.FAILED: "FAIL",
    Outcome.ERROR: "ERROR",
    Outcome.NOT_CHECKABLE: "NOT CHECKABLE",
    Outcome.NOT_APPLICABLE: "n/a",
}


def _judged(report: CertificationReport, strict: bool) -> list[ContractResult]:
    """The results the verdict rests on: required ones, and declared optional ones if strict."""
    return [r for r in report.results
            if r.required or (strict and r.outcome is not Outcome.NOT_APPLICABLE)]


def _unchecked(report: CertificationReport, strict: bool) -> list[ContractResult]:
    return [r for r in _judged(report, strict)
            if r.outcome in (Outcome.NOT_CHECKABLE, Outcome.NOT_APPLICABLE)]


def verdict(report: CertificationReport, *, strict: bool = False) -> str:
    """One line: certified, or which contracts failed and which could not be checked (and why).

    >>> from pytest_agentckpt.certify import CertificationReport
    >>> verdict(CertificationReport("m:f", "memory", "memory://", seed=1, quick=True))
    'CERTIFIED: every required contract passed'
    """
    failed = [r.contract for r in _judged(report, strict)
              if r.outcome in (Outcome.FAILED, Outcome.ERROR)]
    unchecked = [f"{r.contract} (needs {r.needs})" if r.needs else r.contract
                 for r in _unchecked(report, strict)]
    code = report.exit_code(strict=strict)
    kind = "required or declared contracts" if strict else "required contracts"
    if failed:
        line = f"NOT CERTIFIED: {kind} failed: {', '.join(failed)}"
        if unchecked:
            line += f"; not checkable: {', '.join(unchecked)}"
        return line
    if unchecked:
        return (f"NOT CERTIFIED (exit {code}): {kind} not checkable, so not shown to hold: "
                + ", ".join(unchecked) + "; each NOT CHECKABLE note above says how to make it checkable")
    if report.not_run:
        passed = [r.contract for r in report.results if r.outcome is Outcome.PASSED]
        return (f"PASSED the {len(passed)} selected contract{'s' if len(passed) != 1 else ''} "
                f"({', '.join(passed)}); NOT a certification: {len(report.not_run)} required "
                "contract"
                f"{'s were' if len(report.not_run) != 1 else ' was'} not run "
                f"({', '.join(report.not_run)}); run without --only to certify")
    return "CERTIFIED: every required contract passed" + (
        " and every optional one it declares" if strict else "") + _not_durable(report)


def _not_durable(report: CertificationReport) -> str:
    """What a certified store that does not declare durability must be told in its verdict:
    a team picking a store reads the verdict line, not the n/a rows above it."""
    restart = next((r for r in report.results if r.contract == "durable_restart"), None)
    if restart is None or restart.outcome is not Outcome.NOT_APPLICABLE or "durability" not in restart.summary:
        return ""
    return ("; NOT DURABLE: it declares no durability (info().durable), so acknowledged saves "
            "may be lost when its server restarts (see durable_restart)")


def _latency_rows(report: CertificationReport) -> list[dict[str, Any]]:
    rows = report.figures.get("latency", [])
    return rows if isinstance(rows, list) else []


def _bytes(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def to_text(report: CertificationReport, *, width: int = 100, strict: bool = False) -> str:
    """The table printed at the end of ``agentckpt certify``."""
    lines = [
        f"agentckpt certify {report.factory}  ({report.backend}: {report.store_url})",
        f"seed {report.seed}{'  --quick' if report.quick else ''}  {report.seconds:.1f}s",
        "",
    ]
    name_width = max(len(r.contract) for r in report.results) if report.results else 10
    header = f"{'contract':<{name_width}}  {'req':<3}  {'result':<13}  summary"
    lines += [header, "-" * min(width, max(len(header), 60))]
    summary_width = max(30, width - name_width - 24)
    for r in report.results:
        summary = textwrap.shorten(r.summary, summary_width, placeholder="…")
        lines.append(
            f"{r.contract:<{name_width}}  {'yes' if r.required else 'opt':<3}  "
            f"{_MARKS[r.outcome]:<13}  {summary}"
        )
    failures = [r for r in report.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)]
    for r in failures:
        lines += ["", f"{_MARKS[r.outcome]} {r.contract}: {r.summary}"]
        if r.details:
            details = r.details if len(r.details) < 4000 else r.details[:4000] + "\n…"
            lines += ["    " + line for line in details.splitlines()]
        if r.reproduce:
            lines.append(f"    reproduce: {r.reproduce}")
    # Contracts that are not checkable for one reason share one note.
    notes: dict[str, list[str]] = {}
    for r in _unchecked(report, strict):
        notes.setdefault(f"{_MARKS[r.outcome]}: {r.summary}", []).append(r.contract)
    for note, contracts in notes.items():
        mark, summary = note.split(": ", 1)
        lines += ["", f"{mark} {', '.join(contracts)}: {summary}"]
    rows = _latency_rows(report)
    if rows:
        lines += ["", f"figures (ms, {report.figures.get('repeats')} saves/loads per size; "
                      "a save appends one message)",
                  f"{'messages':>8}  {'save p50':>9}  {'save p99':>9}  {'load p50':>9}  "
                  f"{'load p99':>9}  {'bytes/save':>10}  {'history B':>10}"]
        for row in rows:
            lines.append(
                f"{row['messages']:>8}  {row['save_p50_ms']:>9.2f}  {row['save_p99_ms']:>9.2f}  "
                f"{row['load_p50_ms']:>9.2f}  {row['load_p99_ms']:>9.2f}  "
                f"{_bytes(row['bytes_per_save']):>10}  {_bytes(row['history_bytes']):>10}"
            )
    if "error" in report.figures:
        lines += ["", f"figures could not be measured: {report.figures['error']}"]
    if report.left_behind:
        lines += ["", f"left behind: {report.left_behind}"]
    lines += ["", verdict(report, strict=strict)]
    return "\n".join(lines)


def to_json(report: CertificationReport, *, strict: bool = False) -> str:
    """The whole report as JSON, with the verdict and the exit status."""
    data = report.as_dict()
    data["exit_code"] = report.exit_code(strict=strict)
    data["verdict"] = verdict(report, strict=strict)
    return json.dumps(data, indent=2, ensure_ascii=False)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown_result(r: ContractResult) -> str:
    return (f"| `{r.contract}` | {'required' if r.required else 'optional'} | "
            f"{_MARKS[r.outcome]} | {_cell(r.summary)} |")


def to_markdown(report: CertificationReport, *, strict: bool = False) -> str:
    """The report as a Markdown page (for CI artifacts and pull-request comments)."""
    lines = [
        f"# Store certification: `{report.factory}`",
        "",
        f"**{verdict(report, strict=strict)}**",
        "",
        f"Backend `{report.backend}` ({report.store_url}), seed `{report.seed}`"
        f"{', quick run' if report.quick else ''}, {report.seconds:.1f}s.",
        "",
        "| contract | kind | result | summary |",
        "|---|---|---|---|",
        *[_markdown_result(r) for r in report.results],
    ]
    failures = [r for r in report.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)]
    if failures:
        lines += ["", "## Failures"]
        for r in failures:
            lines += ["", f"### `{r.contract}`: {r.summary}", ""]
            if r.details:
                lines += ["```text", r.details[:4000], "```", ""]
            if r.reproduce:
                lines += [f"Reproduce: `{r.reproduce}`"]
    unchecked = _unchecked(report, strict)
    if unchecked:
        lines += ["", "## Not checkable", ""]
        lines += [f"- `{r.contract}`: {_cell(r.summary)}" for r in unchecked]
    rows = _latency_rows(report)
    if rows:
        lines += ["", "## Figures", "",
                  "Latency in milliseconds; each save appends one message to a history of the "
                  "given size.", "",
                  "| messages | save p50 | save p99 | load p50 | load p99 | bytes/save | history bytes |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for row in rows:
            lines.append(
                f"| {row['messages']} | {row['save_p50_ms']:.2f} | {row['save_p99_ms']:.2f} | "
                f"{row['load_p50_ms']:.2f} | {row['load_p99_ms']:.2f} | "
                f"{_bytes(row['bytes_per_save'])} | {_bytes(row['history_bytes'])} |"
            )
    return "\n".join(lines) + "\n"
