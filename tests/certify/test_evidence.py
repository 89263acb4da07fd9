"""No evidence is never a pass: contracts that saw nothing are *not checkable*, exit 3.

The verdict is 0 only when every required contract was checked and passed; a store
that offers no damage hooks, or whose data never leaves its process, is not certified
and is told what to add.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_agentckpt.certify import (
    CONTRACTS,
    EXIT_CERTIFIED,
    EXIT_FAILED,
    EXIT_NOT_CHECKABLE,
    CertificationReport,
    CertifyContext,
    ContractFailed,
    ContractResult,
    NotCheckable,
    Outcome,
    StoreFactory,
    certify,
)
from pytest_agentckpt.certify.concurrency import Success, WriterLog, judge_history
from pytest_agentckpt.certify.context import QUICK
from pytest_agentckpt.certify.contracts import (
    _lost_update_verdict,
    check_acknowledged_survive_kill,
    check_atomic_under_kill,
)
from pytest_agentckpt.certify.crash import KillExperiment, KillRound
from pytest_agentckpt.certify.report import to_markdown, to_text, verdict
from pytest_agentckpt.certify.sharing import CROSS_PROCESS_NEEDS, Sharing, probe_cross_process
from pytest_agentckpt.cli import main
from stores import Checkpoint
from stores.memory import MemoryStore

PROCESS_CONTRACTS = ["lost_update_processes", "atomic_under_kill", "acknowledged_survive_kill"]


# -- point 10: exit 0 only when every required contract was checked ---------------------------


def test_a_store_returning_none_on_damage_without_hooks_is_not_certified_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path, md_path = tmp_path / "r.json", tmp_path / "r.md"
    code = main(["certify", "tests.certify.hookless_store:make_none_on_corrupt", "--quick",
                 "--seed", "9", "--no-figures", "--json", str(json_path), "--markdown", str(md_path)])
    out = capsys.readouterr().out
    assert code == EXIT_NOT_CHECKABLE == 3
    last = out.strip().splitlines()[-1]
    assert last.startswith("NOT CERTIFIED (exit 3)")
    # The verdict names the missing hooks, and the notes say how to add them.
    assert "corruption_reported (needs a certify_corrupt(task_id) hook)" in last
    assert "newer_schema_refused (needs a certify_bump_schema(task_id) hook)" in last
    assert "add a method certify_corrupt(self, task_id)" in out
    assert "add a method certify_bump_schema(self, task_id)" in out
    report = json.loads(json_path.read_text())
    assert report["exit_code"] == 3 and report["passed"] is False
    assert report["verdict"] == last
    unchecked = {r["contract"] for r in report["results"] if r["outcome"] == "not checkable"}
    assert unchecked == {"corruption_reported", "newer_schema_refused"}
    # Every other required contract was checked and passed (the directory crosses processes).
    passed = {r["contract"] for r in report["results"] if r["outcome"] == "passed"}
    assert set(PROCESS_CONTRACTS) | {"fresh_reads", "round_trip", "listing"} <= passed
    assert "## Not checkable" in md_path.read_text()


def test_the_same_store_with_hooks_fails_with_exit_1() -> None:
    report = certify("tests.certify.buggy_stores:make_none_on_corrupt", quick=True, seed=9,
                     only=["corruption_reported", "compare_and_set"], figures=False)
    assert report.exit_code() == EXIT_FAILED
    assert verdict(report).startswith("NOT CERTIFIED: required contracts failed: corruption_reported")


def test_failed_beats_not_checkable_and_both_are_named() -> None:
    report = certify("tests.certify.hookless_store:make_store", quick=True, seed=2, figures=False,
                     only=["corruption_reported", "compare_and_set"])
    assert report.exit_code() == EXIT_NOT_CHECKABLE
    assert not report.passed
    report.results.append(
        ContractResult("listing", "Listing filters", True, Outcome.FAILED, "wrong order")
    )
    assert report.exit_code() == EXIT_FAILED
    line = verdict(report)
    assert "failed: listing" in line and "not checkable: corruption_reported" in line


def test_strict_holds_the_declared_optional_contracts_to_the_same_rule() -> None:
    rewriting = certify("tests.certify.buggy_stores:make_rewriting", quick=True, seed=3,
                        only=["incremental", "compare_and_set"], figures=False)
    assert rewriting.exit_code() == EXIT_CERTIFIED  # an optional failure does not block
    assert rewriting.exit_code(strict=True) == EXIT_FAILED
    vague = certify("tests.certify.test_ttl:_memory_declaring_ttl_without_saying_how_long",
                    quick=True, seed=3, only=["ttl", "compare_and_set"], figures=False)
    assert vague.exit_code() == EXIT_CERTIFIED
    assert vague.exit_code(strict=True) == EXIT_NOT_CHECKABLE
    assert "NOT CHECKABLE ttl" in to_text(vague, strict=True)
    assert "NOT CHECKABLE ttl" not in to_text(vague)


# -- point 11: process contracts need a child's save to reach the parent ------------------------


def test_a_process_local_store_gets_no_pass_from_the_process_contracts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Instances share data inside a process, so the old in-process probe let the kill
    # contracts run; every load after a kill found nothing, and atomic_under_kill passed.
    report = certify("tests.certify.user_stores:make_process_local", quick=True, seed=4,
                     figures=False, only=[*PROCESS_CONTRACTS, "fresh_reads", "compare_and_set"])
    for contract in PROCESS_CONTRACTS:
        result = report.result(contract)
        assert result.outcome is Outcome.NOT_CHECKABLE, (contract, result.summary)
        assert result.needs == CROSS_PROCESS_NEEDS
        assert "saved by a child process" in result.summary
    assert report.result("fresh_reads").outcome is Outcome.PASSED  # in-process evidence is real
    assert report.exit_code() == EXIT_NOT_CHECKABLE
    text = to_text(report)
    # One note for the three contracts that lack the same thing.
    assert "NOT CHECKABLE lost_update_processes, atomic_under_kill, acknowledged_survive_kill:" in text


def test_the_memory_store_is_not_certified_for_what_it_cannot_show() -> None:
    report = certify("pytest_agentckpt.certify.builtin:memory", quick=True, seed=5, figures=False,
                     only=[*PROCESS_CONTRACTS, "fresh_reads", "round_trip"])
    assert {r.contract for r in report.results if r.outcome is Outcome.NOT_CHECKABLE} == \
        {*PROCESS_CONTRACTS, "fresh_reads"}
    assert report.result("round_trip").outcome is Outcome.PASSED
    assert report.exit_code() == EXIT_NOT_CHECKABLE


def test_the_cross_process_probe_sees_a_file_store_and_not_a_process_local_one() -> None:
    for spec, shared in (("pytest_agentckpt.certify.builtin:sqlite", True),
                         ("tests.certify.user_stores:make_process_local", False),
                         # acknowledged at once, written 20 ms later: still seen as shared,
                         # so acknowledged_survive_kill gets to fail it
                         ("tests.certify.buggy_stores:make_write_behind", True)):
        ctx = CertifyContext(StoreFactory.from_spec(spec), seed=1, budget=QUICK)
        try:
            ctx.prepare()
            assert probe_cross_process(ctx).cross_process is shared, spec
        finally:
            ctx.close()


class _DurableInProcess(MemoryStore):
    certify_capabilities = frozenset({"durable-restart"})


_DURABLE: dict[str, _DurableInProcess] = {}


def _durable_in_process(namespace: str) -> _DurableInProcess:
    return _DURABLE.setdefault(namespace, _DurableInProcess(namespace))


def test_durability_by_close_and_reopen_needs_data_that_outlives_the_process() -> None:
    report = certify("tests.certify.test_evidence:_durable_in_process", quick=True, seed=6,
                     only=["durable_restart"], figures=False)
    result = report.result("durable_restart")
    assert result.outcome is Outcome.NOT_CHECKABLE, result.summary
    assert result.needs == CROSS_PROCESS_NEEDS


# -- point 11 and the audit: every contract judges only what it saw ----------------------------


def _ctx_with_kills(*rounds: KillRound) -> CertifyContext:
    ctx = CertifyContext(StoreFactory.from_spec("pytest_agentckpt.certify.builtin:memory"),
                         seed=1, budget=QUICK)
    ctx._memo["cross_process"] = Sharing(True, "as if shared")
    ctx._memo["kills"] = KillExperiment(tuple(rounds))
    return ctx


def _round(loaded: int | None, *, finished: bool = False, error: str | None = None) -> KillRound:
    return KillRound("t", 0.01, 3, loaded, error, None, finished)


def test_kills_that_left_nothing_to_load_are_not_evidence_of_atomicity() -> None:
    ctx = _ctx_with_kills(_round(None), _round(None))
    with pytest.raises(NotCheckable, match="no evidence that a save is atomic"):
        check_atomic_under_kill(ctx)
    # With the store shared across processes, an acknowledged save that is gone is a loss.
    with pytest.raises(ContractFailed, match="acknowledged"):
        check_acknowledged_survive_kill(ctx)


def test_kills_after_the_writer_finished_are_not_evidence_either() -> None:
    with pytest.raises(NotCheckable):
        check_atomic_under_kill(_ctx_with_kills(_round(2000, finished=True)))
    assert "1 SIGKILLs mid-save" in check_atomic_under_kill(
        _ctx_with_kills(_round(2000, finished=True), _round(4)))


def test_acknowledged_saves_are_not_judged_from_rounds_that_did_not_load() -> None:
    ctx = _ctx_with_kills(_round(None, error="CorruptCheckpointError: torn"))
    with pytest.raises(NotCheckable):
        check_acknowledged_survive_kill(ctx)
    with pytest.raises(ContractFailed, match="no longer loads"):
        check_atomic_under_kill(ctx)


def test_writers_that_never_conflicted_did_not_race() -> None:
    ctx = CertifyContext(StoreFactory.from_spec("pytest_agentckpt.certify.builtin:memory"),
                         seed=1, budget=QUICK)
    store = MemoryStore()
    initial = store.save(Checkpoint(task_id="race", goal="race"))
    final = store.save(initial.model_copy(update={"messages": [{"role": "user", "content": "w0-a0"}]}))
    raced = WriterLog(successes=[Success(0, 1, 2, "w0-a0")], conflicts=0)
    assert final.version == 2
    with pytest.raises(NotCheckable, match="never raced"):
        _lost_update_verdict(ctx, "lost_update_threads", initial, [raced], store, "1 thread")
    raced.conflicts = 1
    assert "no update lost" in _lost_update_verdict(ctx, "lost_update_threads", initial, [raced],
                                                    store, "1 thread")


def test_a_note_saved_in_the_metadata_alone_must_be_in_the_final_metadata() -> None:
    # The writers' race saves a note in the metadata every fourth round. A store that
    # acknowledges such a save and keeps an older metadata (it writes the metadata only
    # with new messages) loses it, though every version moved by one.
    initial = Checkpoint(task_id="race", goal="race", version=1)
    logs = [WriterLog(successes=[Success(0, 1, 2, "w0-a0"), Success(0, 2, 3, "w0-a2", note=True)], conflicts=1)]
    kept = Checkpoint(task_id="race", goal="race", version=3, iteration=1,
                      messages=[{"role": "user", "content": "w0-a0"}], metadata={"notes": 1, "last_note": "w0-a2"})
    assert judge_history(initial, logs, kept) == []
    lost = kept.model_copy(update={"metadata": {}})
    problems = judge_history(initial, logs, lost)
    assert len(problems) == 1 and "counts 0 notes, but 1 saves of a note" in problems[0], problems
    # Two notes from one version, both acknowledged: the cause named is the guard.
    both = [WriterLog(successes=[Success(0, 1, 2, "w0-a2", note=True)], conflicts=1),
            WriterLog(successes=[Success(1, 1, 2, "w1-a2", note=True)])]
    assert "guards the messages alone" in judge_history(initial, both, None)[0]


def test_a_certified_store_that_declares_no_durability_is_told_so_in_its_verdict() -> None:
    # An outside round's team, choosing a store, read CERTIFIED and missed the n/a row of
    # durable_restart above it: their Redis ran without AOF.
    def report(restart: ContractResult) -> CertificationReport:
        passed = [ContractResult(c.id, c.title, True, Outcome.PASSED, "ok") for c in CONTRACTS if c.required]
        return CertificationReport("m:f", "redis", "redis://", seed=1, quick=True, results=[*passed, restart])

    lax = report(ContractResult("durable_restart", "Durable", False, Outcome.NOT_APPLICABLE,
                                "the store does not declare durability (info().durable is False)"))
    assert verdict(lax).startswith("CERTIFIED: every required contract passed; NOT DURABLE")
    assert "NOT DURABLE" in to_text(lax)
    durable = report(ContractResult("durable_restart", "Durable", False, Outcome.PASSED, "survived"))
    assert verdict(durable) == "CERTIFIED: every required contract passed"


class _FrozenCounter(MemoryStore):
    """Declares incremental saves, but its counter never moves."""

    bytes_written = property(lambda self: 0, lambda self, value: None)  # type: ignore[assignment]


def test_a_bytes_counter_that_never_moves_is_not_evidence_of_incremental_saves() -> None:
    report = certify("tests.certify.test_evidence:_FrozenCounter", quick=True, seed=7,
                     only=["incremental"], figures=False)
    result = report.result("incremental")
    assert result.outcome is Outcome.NOT_CHECKABLE, result.summary
    assert "did not grow" in result.summary


def test_markdown_and_text_share_the_verdict() -> None:
    report = certify("tests.certify.hookless_store:make_store", quick=True, seed=8, figures=False,
                     only=["newer_schema_refused"])
    assert verdict(report) in to_text(report)
    assert f"**{verdict(report)}**" in to_markdown(report)


def test_a_load_that_misses_a_listed_version_is_not_called_a_lost_save() -> None:
    # The save was durable (the listing shows it); load picks an older one: the advice is
    # about load, not about acknowledging before the write was durable.
    listed = dataclasses.replace(_round(2), listed_versions=(2, 3))
    with pytest.raises(ContractFailed, match="load does not return the latest version") as failed:
        check_acknowledged_survive_kill(_ctx_with_kills(listed))
    assert "before it was durable" not in str(failed.value)
    # Listed at the old version only: the save is gone, as before.
    with pytest.raises(ContractFailed, match="acknowledged before it was durable"):
        check_acknowledged_survive_kill(_ctx_with_kills(dataclasses.replace(_round(2), listed_versions=(2,))))
