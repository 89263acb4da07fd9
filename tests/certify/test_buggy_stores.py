"""Each known-buggy store fails the contract it breaks, and only that one.

A no-CAS store is the exception that proves the rule: compare-and-set is what the
state-machine and both lost-update contracts exercise, so it fails all four.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_agentckpt.certify import CONTRACTS, CertificationReport, Outcome, certify
from stores import Checkpoint

SEED = 20240601

EXPECTED_FAILURES = {
    "no_cas": {"compare_and_set", "model_based", "lost_update_threads", "lost_update_processes"},
    "torn": {"atomic_under_kill"},
    "aliasing": {"no_aliasing"},
    "none_on_corrupt": {"corruption_reported"},
    "lossy": {"round_trip"},
    "write_behind": {"acknowledged_survive_kill"},
    # Never reads the disk again once it has a task: stale after another instance's save,
    # and after another instance deleted and made the task again.
    "stale_cache": {"fresh_reads", "aba_recreated"},
    # Stale now and then only (every 6th load of an instance): the few loads of the
    # contract's fixed steps never met it; its saves loaded back and forth do.
    "lagging_replica": {"fresh_reads"},
    # A log of messages appended at the end of the file, past the tail a killed save left:
    # it loads after the kill, and breaks at the next save (a new instance's, after it).
    "append_at_end": {"acknowledged_survive_kill"},
    "append_forgets_lineage": {"aba_recreated"},
    # Loses all but the last of several messages a save adds: the fixed appends in
    # round_trip, the state machine and the save after a kill (it adds two) all see it.
    "append_keeps_last": {"round_trip", "model_based", "acknowledged_survive_kill"},
    "splitlines": {"round_trip"},
    # Appends without comparing the messages it holds: an edit of an earlier one is lost
    # (an outside round's store was certified 5 runs in 5 with --quick).
    "append_assumes_prefix": {"round_trip"},
    "lists_own_tasks": {"fresh_reads"},
    # Two outside rounds' stores: a create checked outside the lock (two creates of one
    # task both succeed), and a create race that raises the database's unique-key error.
    "unlocked_create": {"lost_update_threads", "lost_update_processes"},
    "unique_key": {"lost_update_threads", "lost_update_processes"},
    # A third outside round's: its create's check and write held a lock of the process
    # only. Threads never get past it; processes do.
    "process_local_create": {"lost_update_processes"},
    # Checks a cached load by version alone: a task deleted and made again to the same
    # version by another instance is served as it was (an outside round's store).
    "cache_by_version": {"aba_recreated"},
    "listing_ignores_schema": {"newer_schema_refused"},
    "lists_every_namespace": {"listing"},
    # Filters metadata by containment (PostgreSQL's @> alone): {"tags": ["p"]} also
    # matches ["p", "q"] (an outside round's store filtered in SQL and passed).
    "contains_filter": {"listing"},
    # Compares versions with >=: a save from a version ahead of the stored one succeeds.
    "ahead_cas": {"compare_and_set", "model_based"},
    # A soft delete the listing does not filter: the task loads as deleted and is listed.
    "tombstone": {"atomic_under_kill", "fresh_reads", "delete_idempotent", "task_id_fidelity"},
    # Key mappings that merge task ids the other contracts' ids never tell apart.
    "case_insensitive": {"task_id_fidelity"},
    "sanitizing": {"task_id_fidelity"},
    "truncating": {"task_id_fidelity"},
    "trimming": {"task_id_fidelity"},
    "normalizing": {"task_id_fidelity"},
    "like_delete": {"task_id_fidelity"},
    # Cuts ids past 250 characters: the 200-character ids pass, the 1,100-character ones not.
    "truncating_long": {"task_id_fidelity"},
    # Lists in a locale's order ('report' before 'REPORT'), not by code point.
    "locale_order": {"task_id_fidelity"},
    # Takes a namespace and ignores it: one directory for all.
    "ignores_namespace": {"listing"},
    # Two outside-round stores certified before: a listing of one page of 100 tasks, and
    # a namespace glued to the task id with no separator (namespace n's task '0t' is
    # namespace n0's task t).
    "one_page_listing": {"listing"},
    "namespace_glued": {"listing"},
    # Compares versions as text (1 matches a stored 12): a save far behind goes through,
    # one version behind does not (an outside round's Redis store, certified 5 runs in 5).
    "text_version": {"compare_and_set"},
    # Lists every task at its first save (an index written on create only): every contract
    # that lists after a later save sees it, the schema check of the listing included.
    "first_save_listing": {"listing", "model_based", "fresh_reads", "atomic_under_kill", "newer_schema_refused"},
    # Locks a save only when it adds messages: two saves of the metadata alone from one
    # version both go through (an outside round's Redis store watched the message list).
    # Across processes too: the writers' race saves a note in the metadata every fourth round.
    "guards_messages": {"lost_update_threads", "lost_update_processes"},
    # Saves of the metadata alone checked and written under a lock of one process: threads
    # never race past it, processes do.
    "process_local_metadata": {"lost_update_processes"},
    # Delete takes no lock: a delete between a save's check and its write is undone.
    "unlocked_delete": {"lost_update_threads"},
    # Keeps the updated_at it was given: retention and prune --older-than go by it.
    "keeps_callers_stamp": {"compare_and_set"},
    # Lists its temporary files too: a writer killed before its rename leaves the task
    # listed twice (or a listing that fails on a half-written file), delete() never
    # removes it.
    "lists_leftovers": {"atomic_under_kill"},
    # A file per save; delete removes only the latest, and the one before comes back:
    # every contract that deletes and then loads or lists sees it, and none blames the
    # compare-and-set or a torn save.
    "deletes_latest_only": {"delete_idempotent", "compare_and_set", "aba_recreated", "fresh_reads", "atomic_under_kill"},
}

REQUIRED = {c.id for c in CONTRACTS if c.required}


def _certify(name: str) -> CertificationReport:
    return certify(f"tests.certify.buggy_stores:make_{name}", quick=True, seed=SEED, figures=False)


def _failed(report: CertificationReport) -> set[str]:
    return {r.contract for r in report.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)}


#: Contracts whose drawn programs may also reach a planted bug: a right verdict when
#: they do. The state machine's programs reached deletes_latest_only's delete-then-load
#: in the whole suite's runs, not in this file's alone (the cause is not found yet).
#: Contracts a store fails on some runs and not others: the delete race of
#: lost_update_threads shows a delete that leaves an older save when a save won before it.
MAY_ALSO_FAIL: dict[str, set[str]] = {"deletes_latest_only": {"model_based", "lost_update_threads"}}


@pytest.mark.parametrize("name", sorted(EXPECTED_FAILURES))
def test_buggy_store_fails_exactly_the_contracts_it_breaks(name: str) -> None:
    report = _certify(name)
    details = {r.contract: r.summary for r in report.results if r.outcome is not Outcome.PASSED}
    failed = _failed(report)
    assert EXPECTED_FAILURES[name] <= failed <= EXPECTED_FAILURES[name] | MAY_ALSO_FAIL.get(name, set()), details
    passed = {r.contract for r in report.results if r.outcome is Outcome.PASSED} & REQUIRED
    # Everything else required was actually checked and held: nothing skipped.
    assert passed == REQUIRED - failed, details
    assert report.exit_code() == 1


def test_failure_names_the_contract_and_how_to_reproduce_it() -> None:
    report = _certify("lossy")
    result = report.result("round_trip")
    assert result.outcome is Outcome.FAILED
    assert "9007199254740993" in result.details or "expected" in result.details
    assert f"--seed {SEED}" in result.reproduce
    assert "--only round_trip" in result.reproduce


def test_lossy_store_is_caught_on_a_big_integer_in_the_fixed_examples() -> None:
    # The hand-written block-type history holds 2**64 + 1: caught even with no examples.
    report = certify("tests.certify.buggy_stores:make_lossy", quick=True, seed=1,
                     only=["round_trip"], figures=False)
    assert report.result("round_trip").outcome is Outcome.FAILED


def test_store_declaring_incremental_saves_but_rewriting_fails_only_incremental() -> None:
    report = _certify("rewriting")
    assert _failed(report) == {"incremental"}
    assert "quadratically" in report.result("incremental").summary
    # An optional contract failing does not block certification of the required ones.
    assert report.exit_code() == 0


def test_the_sound_append_log_design_the_variants_break_is_certified() -> None:
    # The planted bugs above are each one change to this store: no false alarm on it.
    report = _certify("append_log")
    details = {r.contract: r.summary for r in report.results if r.outcome is not Outcome.PASSED}
    assert report.exit_code() == 0, details
    assert {r.contract for r in report.results if r.outcome is Outcome.PASSED} >= REQUIRED, details


@pytest.mark.parametrize(("name", "contract", "words"), [
    ("append_keeps_last", "round_trip", "appending 2 messages at once"),
    ("splitlines", "round_trip", "corrupt"),
    ("lists_own_tasks", "fresh_reads", "a new instance listing"),
    ("listing_ignores_schema", "newer_schema_refused", "listing"),
    ("append_forgets_lineage", "aba_recreated", "a mix of the two"),
    ("cache_by_version", "aba_recreated", "A cache checked by version alone does this"),
    ("contains_filter", "listing", "equal (not contains it)"),
    # A refused save that leaves its messages (written before the guarded head).
    ("messages_first", "compare_and_set", "conflicted but changed the stored checkpoint"),
])
@pytest.mark.parametrize("seed", [13, 23, 32])  # seeds on which drawn examples miss
def test_planted_bug_is_caught_by_a_fixed_check_on_every_seed(
        name: str, contract: str, words: str, seed: int) -> None:
    # Fixed sequences, not drawn examples: caught whatever the seed.
    report = certify(f"tests.certify.buggy_stores:make_{name}", quick=True, seed=seed,
                     only=[contract], figures=False)
    result = report.result(contract)
    assert result.outcome in (Outcome.FAILED, Outcome.ERROR), result.summary
    assert words in result.summary


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(
    "name",
    [
        "append_at_end",
        # No pause between its messages and its head: whether a kill lands in that window
        # depends on the machine's load, so it runs on demand (`pytest -m slow`), not in CI.
        pytest.param("append_at_end_quick", marks=pytest.mark.slow),
    ],
)
def test_a_save_after_a_kill_that_builds_on_the_torn_tail_is_caught(name: str, seed: int) -> None:
    # The quick one has no pause between its messages and its head: the kills must be
    # aimed into the save to land between the two.
    report = certify(f"tests.certify.buggy_stores:make_{name}", quick=True, seed=seed,
                     only=["acknowledged_survive_kill"], figures=False)
    result = report.result("acknowledged_survive_kill")
    assert result.outcome is Outcome.FAILED, result.summary
    assert "a new instance resumed after the kill" in result.summary


def test_a_reader_with_a_stale_snapshot_is_not_called_a_lost_save() -> None:
    # The instance that loads after each kill was made before it; one that reads from a
    # snapshot it never refreshes finds nothing of a later round's task, which a new
    # instance loads whole. The save was durable: the report says the view was stale.
    report = certify("tests.certify.buggy_stores:make_snapshot", quick=True, seed=SEED,
                     only=["acknowledged_survive_kill", "fresh_reads"], figures=False)
    survive, fresh = report.result("acknowledged_survive_kill"), report.result("fresh_reads")
    assert fresh.outcome is Outcome.FAILED, fresh.summary
    assert survive.outcome is Outcome.FAILED, survive.summary
    assert "while a new instance loads version" in survive.summary
    assert "the save was durable, but the older instance's view is stale" in survive.summary
    assert "acknowledged before it was durable" not in survive.summary


@pytest.mark.parametrize(("name", "first", "second", "words"), [
    # Found case-insensitively and handed back as the task that asked: a conflict on create.
    ("case_insensitive", "-case-report", "-case-Report", "as if it existed already"),
    ("sanitizing", "-space-pad ", "-space-pad\t", "naming the first"),
    ("trimming", "-space-pad", "-space-pad ", "naming the first"),
    ("normalizing", "-accent-caf\u00e9", "-accent-cafe\u0301", "naming the first"),
    ("like_delete", "-sep-a_b", "-sep-a/b", "deleting the first removed the second too"),
])
@pytest.mark.parametrize("seed", [13, 32])  # fixed ids, not drawn: caught whatever the seed
def test_merged_task_ids_are_named_with_what_to_do(
        name: str, first: str, second: str, words: str, seed: int) -> None:
    report = certify(f"tests.certify.buggy_stores:make_{name}", quick=True, seed=seed,
                     only=["task_id_fidelity"], figures=False)
    result = report.result("task_id_fidelity")
    assert result.outcome is Outcome.FAILED, result.summary
    assert report.exit_code() == 1
    # Both ids, shown escaped (NFC and NFD look alike otherwise), and how they differ.
    named = re.findall(r"task ids ('[^']*') and ('[^']*')", result.summary)
    assert named, result.summary
    shown_first, shown_second = named[0]
    assert shown_first.startswith("'certify-") and shown_second.startswith("'certify-")
    assert shown_first.endswith(ascii(first)[1:]), result.summary
    assert shown_second.endswith(ascii(second)[1:]), result.summary
    assert words in result.summary
    assert "differ only in" in result.summary
    # What to do about it.
    assert "utf8mb4_bin" in result.summary and "injectively" in result.summary
    assert "--only task_id_fidelity" in result.reproduce


def test_truncated_ids_are_named_by_both_ends_and_their_length() -> None:
    report = certify("tests.certify.buggy_stores:make_truncating", quick=True, seed=1,
                     only=["task_id_fidelity"], figures=False)
    summary = report.result("task_id_fidelity").summary
    assert re.search(r"task ids '[^']*…x+a' \(200 characters\) and '[^']*…x+b' \(200 characters\)",
                     summary), summary
    assert "differ only in the last one" in summary
    details = report.result("task_id_fidelity").details
    assert details.count("in UTF-8: b'certify-") == 2  # the whole ids, in the details


def test_task_id_fidelity_ids_stay_inside_the_runs_prefix() -> None:
    # Every id starts with one of the run's task ids, and no path segment climbs out of it.
    import posixpath

    from pytest_agentckpt.certify.factory import is_certify_task
    from pytest_agentckpt.certify.task_ids import LONGER_TASK_ID, fidelity_task_ids

    base = "certify-0123456789-ids-7"
    ids = [task_id for task_id, _ in fidelity_task_ids(base)]
    assert len(set(ids)) == len(ids)
    for task_id in ids:
        assert task_id.startswith(base + "-") and is_certify_task(task_id)
        assert posixpath.normpath(task_id).startswith(base + "-")
        assert "\x00" not in task_id and len(task_id) <= LONGER_TASK_ID


def test_a_store_that_refuses_ids_past_its_limit_is_certified() -> None:
    # A VARCHAR(255) in strict mode: ids of 1,100 characters refused with an error, never
    # cut. A limit above 200 characters is allowed; merging is not.
    report = certify("tests.certify.buggy_stores:make_refusing_long", quick=True, seed=SEED,
                     only=["task_id_fidelity"], figures=False)
    result = report.result("task_id_fidelity")
    assert result.outcome is Outcome.PASSED, result.summary
    assert "2 of 1100 characters refused with an error" in result.summary


def test_a_delete_that_leaves_part_of_a_task_fails_with_what_it_left_not_as_an_error() -> None:
    # Its load afterwards finds messages without a head: a CorruptCheckpointError of the
    # store's own making. Every contract that meets it fails; none errors, and the task-id
    # contract does not blame the id.
    # The contracts that delete and then load (the kill experiments take the time).
    report = certify("tests.certify.buggy_stores:make_delete_leaves_messages", quick=True, seed=SEED, figures=False,
                     only=["compare_and_set", "model_based", "fresh_reads", "aba_recreated", "delete_idempotent",
                           "task_id_fidelity"])
    assert report.exit_code() == 1
    assert not [r.contract for r in report.results if r.outcome is Outcome.ERROR]
    delete = report.result("delete_idempotent")
    assert delete.outcome is Outcome.FAILED
    assert "delete must remove everything the task stored" in delete.summary
    fidelity = report.result("task_id_fidelity")
    assert fidelity.outcome is Outcome.FAILED
    assert "No other id is involved" in fidelity.summary
    assert "utf8mb4_bin" not in fidelity.summary and "letter case" not in fidelity.summary


def test_a_factory_that_ignores_its_namespace_is_told_the_namespace_scopes_nothing() -> None:
    report = certify("tests.certify.buggy_stores:make_ignores_namespace", quick=True, seed=SEED,
                     only=["listing"], figures=False)
    summary = report.result("listing").summary
    assert "the namespace scopes nothing" in summary and "factory does not put its namespace" in summary


def test_a_delete_that_leaves_earlier_versions_is_named_as_the_deletes_fault_everywhere() -> None:
    report = certify("tests.certify.buggy_stores:make_deletes_latest_only", quick=True, seed=SEED, figures=False,
                     only=["delete_idempotent", "compare_and_set", "aba_recreated", "atomic_under_kill"])
    said = {r.contract: r.summary for r in report.results if r.outcome is Outcome.FAILED}
    assert "delete must remove every version, row or key" in said["delete_idempotent"]
    assert "delete() did not remove it" in said["compare_and_set"]
    assert "delete did not remove it" in said["aba_recreated"]
    assert "a mix of the two" not in said["aba_recreated"]
    assert "If delete_idempotent fails too, delete misses what any save leaves" in said["atomic_under_kill"]


def test_a_store_that_calls_its_own_writing_corrupt_in_a_writer_process_fails_with_the_why() -> None:
    # Raised in a child process, it was an ERROR with two tracebacks of certify's own; in
    # a thread or in the parent, the same cause was an explained FAIL.
    report = certify("tests.certify.buggy_stores:make_stale_view", quick=True, seed=SEED,
                     only=["lost_update_processes"], figures=False)
    result = report.result("lost_update_processes")
    assert result.outcome is Outcome.FAILED, result.summary
    assert "a view of its own that another instance's save made out of date" in result.summary
    assert "Traceback" not in result.summary


@pytest.mark.parametrize(("name", "only", "words"), [
    # An outside round's stores: each report blamed something else (a stale writer, the
    # id's spelling, a traceback of certify's own).
    ("ahead_cas", "compare_and_set", "never from a later one: compare with =, not >="),
    ("tombstone", "task_id_fidelity", "No other id is involved: the task's own delete left it in the listing"),
    ("returns_given", "task_id_fidelity", "returned version 0: save must return the checkpoint as stored"),
    ("returns_given", "listing", "the store disagrees with itself about the version"),
    # Version read before the content: such loads conflict, so no update was lost, and it
    # was certified; every load of the racing writers is now checked for a mix.
    ("two_read", "lost_update_threads", "a load must read the version and the content in one snapshot"),
    # A save that writes again under the newer version: its loads mix two saves too, but
    # they read faithfully what the store holds; the report blamed them.
    ("blind_retry", "lost_update_threads", "a save that meets a newer version wrote again under it"),
    # The kill experiment's writer got ConflictError from the only writer of its task: an
    # ERROR with nested tracebacks of certify's own, where a plain failure was promised.
    ("text_newest", "atomic_under_kill", "so the store disagrees with itself about the version"),
])
def test_the_report_names_the_planted_bug_not_a_neighbour(name: str, only: str, words: str) -> None:
    report = certify(f"tests.certify.buggy_stores:make_{name}", quick=True, seed=SEED, only=[only], figures=False)
    result = report.result(only)
    assert result.outcome in (Outcome.FAILED, Outcome.ERROR), result.summary
    assert words in result.summary
    assert "collation" not in result.summary and "another writer saved first)" not in result.summary


def test_instances_that_share_data_late_are_told_their_reads_are_stale_not_that_they_do_not_share() -> None:
    # An outside round's store loaded from a watcher's copy, a few milliseconds behind: the
    # report said its instances did not share data, and to make them share it.
    report = certify("tests.certify.buggy_stores:make_late_replica", quick=True, seed=SEED, figures=False,
                     only=["fresh_reads", "aba_recreated"])
    for contract in ("fresh_reads", "aba_recreated"):
        result = report.result(contract)
        assert result.outcome is Outcome.FAILED, (contract, result.summary)
        assert "was loaded by another instance of the same namespace only after" in result.summary
        assert "stale reads" in result.summary and "do not share data" not in result.summary


def test_a_create_beside_a_delete_that_fails_with_no_winner_is_not_told_to_map_the_error() -> None:
    # An outside round's store, whose delete removed the task's directory and lock under a
    # racing save, was told its FileNotFoundError was a lost race to map to ConflictError:
    # the advice would have hidden the bug. With no create won, the report says what it is.
    from pytest_agentckpt.certify.concurrency import _judge_create_round
    from stores import open_store

    store = open_store("memory://")
    error = "FileNotFoundError: [Errno 2] No such file or directory: '.tmp-x'"
    [raced] = _judge_create_round(store, "t", [], [error] * 3, 3, "threads", True)
    assert "none created it" in raced and "do not exclude each other" in raced and "map" not in raced
    # A create that lost to one that won, with the backend's own error, is still told to map it.
    [lost] = _judge_create_round(store, "t", ["create-1"], ["IntegrityError: duplicate key"], 3, "threads", True)
    assert "map the backend's unique-key or exists error" in lost


def test_an_outage_while_ids_are_saved_is_an_error_not_a_refused_id() -> None:
    # An outside round's store, unavailable for 3% of its saves, had task_id_fidelity
    # failed with "a store that cannot hold one as given must encode it".
    report = certify("tests.certify.buggy_stores:make_outage_on_long_ids", quick=True, seed=SEED,
                     only=["task_id_fidelity"], figures=False)
    result = report.result("task_id_fidelity")
    assert result.outcome is Outcome.ERROR, (result.outcome, result.summary)
    assert "StoreUnavailableError" in result.summary and "encode" not in result.summary


def test_ids_missing_past_the_last_listed_are_named_a_listing_that_stops_after_a_page() -> None:
    # An outside round's store listed 10 tasks (LIMIT 10): task_id_fidelity said "the
    # listing maps ids differently" and gave collation advice.
    report = certify("tests.certify.buggy_stores:make_ten_page_listing", quick=True, seed=SEED,
                     only=["task_id_fidelity"], figures=False)
    result = report.result("task_id_fidelity")
    assert result.outcome is Outcome.FAILED
    assert "the listing stops after a page of 10 tasks" in result.summary, result.summary
    assert "maps ids differently" not in result.summary


def test_a_delete_that_fails_beside_racing_creates_is_named_not_counted_as_a_create() -> None:
    # An outside round's store whose delete raised OSError while creates ran was told that
    # "1 of 3 threads creating one task ... raised OSError from delete" (and a store whose
    # every call failed, "4 of 3 threads"): the delete's error was counted as a create's.
    from pytest_agentckpt.certify.concurrency import run_create_race
    from stores import open_store

    store = open_store("memory://")
    delete = store.delete

    def failing_delete(task_id: str) -> None:
        raise OSError("the lock file is busy")

    store.delete = failing_delete  # type: ignore[method-assign]
    problems = run_create_race(store, lambda n: f"race-{n}", threads=3, rounds=2, timeout=30)
    store.delete = delete  # type: ignore[method-assign]
    [problem] = problems
    assert problem.startswith("deleting the task while 3 threads created it raised OSError: the lock file is busy")
    assert "threads creating one task" not in problem


def test_a_stale_listing_after_a_kill_is_not_blamed_on_the_kill() -> None:
    # An outside round's event-table store listed each task at its oldest version:
    # atomic_under_kill said the killed save had left something the listing picks up.
    report = certify("tests.certify.buggy_stores:make_first_save_listing", quick=True, seed=SEED,
                     figures=False, only=["atomic_under_kill"])
    result = report.result("atomic_under_kill")
    assert result.outcome is Outcome.FAILED, result.summary
    assert "the listing returns a summary older than what load returns" in result.summary
    assert "cut short" not in result.summary


def test_a_run_closes_each_contracts_instances_when_the_contract_ends() -> None:
    # An outside round's PostgreSQL store (a pool per instance) had 52 connections open on
    # a shared server at once in a quick run: every instance stayed open to the run's end.
    from tests.certify.buggy_stores import CountedStore

    CountedStore.open_now = CountedStore.most_open = 0
    report = certify("tests.certify.buggy_stores:make_counted", quick=True, seed=SEED, figures=False)
    assert report.exit_code() == 0, [(r.contract, r.summary) for r in report.results if r.outcome is Outcome.FAILED]
    made = len([r for r in report.results if r.outcome is Outcome.PASSED])
    assert CountedStore.open_now == 0  # the clean-up's instances are closed too
    assert 0 < CountedStore.most_open <= 12, (CountedStore.most_open, made)


def test_a_commit_that_lands_after_the_kill_is_not_taken_for_debris(monkeypatch: pytest.MonkeyPatch) -> None:
    # An outside round's sound PostgreSQL store: the killed writer's COMMIT had reached the
    # server, which applied it just after the harness's load (version 10) and before its
    # listing (version 11). atomic_under_kill said the killed save had left debris.
    from pytest_agentckpt.certify import crash
    from stores import CheckpointSummary, open_store

    monkeypatch.setattr(crash, "_SETTLE_WAIT", 0.0)
    store = open_store("memory://")
    saved = store.save(Checkpoint(task_id="t", goal="g"))
    for _ in range(10):
        saved = store.save(saved)
    assert saved.version == 11

    def listed_at(version: int) -> Any:
        def listing(**_: Any) -> list[CheckpointSummary]:
            return [s.model_copy(update={"version": version}) for s in type(store).list_checkpoints(store)]
        return listing

    # The late commit: the listing is at 11, a load again too.
    store.list_checkpoints = listed_at(11)  # type: ignore[method-assign]
    version, _, listing, listed = crash._settled_listing(store, "t", 10, None)
    assert (version, listing, listed) == (11, None, (11,))
    # A stale listing (one version behind, whatever is read again) stays a problem.
    store.list_checkpoints = listed_at(1)  # type: ignore[method-assign]
    version, _, listing, listed = crash._settled_listing(store, "t", 11, None)
    assert version == 11 and listed == (1,) and listing is not None and "though load returns version 11" in listing


def test_a_driver_error_from_a_save_that_loses_a_metadata_race_is_named() -> None:
    from pytest_agentckpt.certify.concurrency import run_metadata_race
    from stores import ConflictError, open_store

    store = open_store("memory://")
    save = store.save

    def drivers_error(checkpoint: Checkpoint) -> Checkpoint:
        try:
            return save(checkpoint)
        except ConflictError:
            raise LookupError("wrong last sequence") from None

    store.save = drivers_error  # type: ignore[method-assign]
    [problem] = run_metadata_race(store, "t", threads=3, rounds=3, timeout=30)
    assert "raised LookupError: wrong last sequence, not ConflictError" in problem
    assert problem.startswith("2 of 3 threads saving one task from version 1 at once")


def test_a_delete_that_a_save_undoes_is_named_as_such() -> None:
    # An outside round's Redis store took its lease lock for saves, not for delete.
    report = certify("tests.certify.buggy_stores:make_unlocked_delete", quick=True, seed=SEED,
                     only=["lost_update_threads"], figures=False)
    result = report.result("lost_update_threads")
    assert result.outcome is Outcome.FAILED, result.summary
    assert "a save wrote over the delete that came between its version check and its write" in result.summary
