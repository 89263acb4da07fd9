"""Concurrent writers: threads sharing one store, processes each with their own instance.

Every writer loops load -> append its marker -> save, retrying on conflict, and records
each save the store acknowledged: the version it expected and the version it got. Every
fourth round it saves a note in the metadata instead, with no new message (a status, a
ledger entry): a compare-and-set that guards the messages alone lets two such saves
through. A correct compare-and-set store yields a history in which every success moved
the version by exactly one, no two successes started from the same version, the final
history holds every acknowledged marker in version order and the final metadata counts
every acknowledged note. Anything else is a lost update.
"""

from __future__ import annotations

import queue as queue_module
import threading
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from stores import Checkpoint, CheckpointStore, ConflictError, CorruptCheckpointError, StoreError

from .._children import process_context, with_environment
from .factory import StoreFactory

__all__ = [
    "Success",
    "WriterLog",
    "judge_history",
    "run_create_race",
    "run_delete_race",
    "run_process_create_race",
    "run_process_writers",
    "run_thread_writers",
]

@dataclass(frozen=True)
class Success:
    """One acknowledged save: who, from which version, to which, with which marker."""

    worker: int
    expected: int
    version: int
    marker: str
    #: A save of a note in the metadata, with no new message.
    note: bool = False


@dataclass
class WriterLog:
    """What one writer saw."""

    successes: list[Success] = field(default_factory=list)
    conflicts: int = 0
    # Saves that failed with a store error: they may or may not have been applied.
    ambiguous: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Loads whose version and content come from two different saves.
    mixed: list[str] = field(default_factory=list)


def write_loop(
    store: CheckpointStore, task_id: str, worker: int, attempts: int, barrier: Any = None
) -> WriterLog:
    """``attempts`` rounds of load -> append a marker -> save, counting conflicts; every
    fourth round (the third, the seventh, ...) a note in the metadata instead, no message.

    With a ``barrier`` (shared by all writers), every other round all writers load, wait
    for each other, then save: the worst case for compare-and-set, made certain rather
    than left to the scheduler. The other rounds run free.
    """
    log = WriterLog()
    for attempt in range(attempts):
        current = store.load(task_id)
        if current is None:
            log.errors.append(f"load({task_id!r}) returned None while the task existed")
            continue
        # The task starts new (version 1, iteration 0, no messages) and every save adds one
        # message and one iteration, or one note: a load whose counts disagree with its
        # version read the version and the content from two different saves.
        notes = _notes(current)
        if not (current.iteration == len(current.messages) and len(current.messages) + notes == current.version - 1):
            log.mixed.append(
                f"load returned version {current.version} with the content of another save "
                f"({current.iteration} iterations, {len(current.messages)} messages and {notes} "
                f"notes, where version {current.version} has {current.version - 1} messages and "
                "notes in all, and one iteration a message)"
            )
        if barrier is not None and attempt % 2 == 0:
            try:
                barrier.wait(30)
            except threading.BrokenBarrierError:
                barrier = None  # a writer died: carry on without the lockstep
        marker = f"w{worker}-a{attempt}"
        note = attempt % 4 == 2
        if note:
            # Only the metadata changes: a status or a ledger entry, saved between turns.
            following = current.model_copy(
                update={"metadata": {**current.metadata, "notes": notes + 1, "last_note": marker}}
            )
        else:
            following = current.model_copy(
                update={
                    "messages": [*current.messages, {"role": "user", "content": marker}],
                    "iteration": current.iteration + 1,
                }
            )
        try:
            saved = store.save(following)
        except ConflictError:
            log.conflicts += 1
            continue
        except StoreError as exc:
            log.ambiguous.append(marker)
            log.errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.01)
            continue
        log.successes.append(Success(worker, current.version, saved.version, marker, note))
    return log


def _notes(checkpoint: Checkpoint | None) -> int:
    """The notes :func:`write_loop` counted in ``checkpoint``'s metadata."""
    notes = None if checkpoint is None else checkpoint.metadata.get("notes", 0)
    return notes if isinstance(notes, int) else -1


def judge_history(initial: Checkpoint, logs: list[WriterLog], final: Checkpoint | None) -> list[str]:
    """Every way the acknowledged saves and the final checkpoint show a lost update."""
    problems: list[str] = []
    successes = sorted((s for log in logs for s in log.successes), key=lambda s: s.version)
    ambiguous = {marker for log in logs for marker in log.ambiguous}
    if not successes:
        return ["no save succeeded at all: every attempt conflicted or failed"]
    for start, count in Counter(s.expected for s in successes).items():
        if count > 1:
            racing = [s for s in successes if s.expected == start]
            who = [s.worker for s in racing]
            what = ""
            if all(s.note for s in racing):
                # The threads' metadata race names this cause first; processes meet it here.
                what = (
                    ", each with only a note in its metadata (no new message). A compare-and-set "
                    "that guards the messages alone (a watched key, a locked row or a condition on "
                    "the history), or holds a lock of one process only, lets such saves through: "
                    "guard the record that holds the version, across processes"
                )
            problems.append(
                f"{count} saves all succeeded from version {start} (workers {who}): "
                f"only one may, the others' updates were erased{what}"
            )
    for s in successes:
        if s.version != s.expected + 1:
            problems.append(
                f"worker {s.worker} saved from version {s.expected} and got version "
                f"{s.version}, not {s.expected + 1}"
            )
    versions = [s.version for s in successes]
    if len(set(versions)) != len(versions):
        problems.append(f"versions handed out more than once: {versions}")
    mixed = [m for log in logs for m in log.mixed]
    if mixed:
        # First: a load that mixes two saves is the cause a lost update would follow from.
        # Unless a save acknowledged a version other than the next one: then the store
        # holds content under a version that is not that content's (a save that met a
        # newer version and wrote again), and loads read it faithfully.
        rewrites = [s for s in successes if s.version != s.expected + 1]
        held = final is not None and not (
            final.iteration == len(final.messages) and len(final.messages) + _notes(final) == final.version - 1
        )
        if rewrites or held:
            where = (
                f"worker {rewrites[0].worker} saved from version {rewrites[0].expected} and was told "
                f"version {rewrites[0].version}" if rewrites
                else f"the final checkpoint, version {final.version if final else '?'}, holds another save's content"
            )
            problems.insert(
                0,
                f"{mixed[0]} ({len(mixed)} such load(s)), and {where}: a save that meets a newer "
                "version wrote again under it (a retry that reloads and writes again, a caught "
                "StaleDataError or failed compare), or wrote in parts of which one is not guarded "
                "(the messages committed before the versioned update of the head, a second UPDATE "
                "without the version condition), so the store holds content under a version that "
                "is not its own. A save that finds another version must raise ConflictError and "
                "write nothing: every part of a save in one transaction, each guarded by the version",
            )
        else:
            problems.insert(
                0,
                f"{mixed[0]} ({len(mixed)} such load(s) while other writers saved): a load must read "
                "the version and the content in one snapshot (one query, one read transaction, one "
                "object), never in two reads a save can come between",
            )
    if final is None:
        problems.append("the task is gone after the writers finished")
        return problems
    written = [m.get("content") for m in final.messages[len(initial.messages) :]]
    acknowledged = [s.marker for s in successes if not s.note]
    kept = [m for m in written if m not in ambiguous]
    missing = [m for m in acknowledged if m not in written]
    if missing:
        problems.append(
            f"acknowledged saves missing from the final history (lost updates): {missing[:8]}"
        )
    elif kept != acknowledged:
        problems.append(
            f"the final history holds the markers {kept[:12]}, not the acknowledged saves "
            f"in version order {acknowledged[:12]}"
        )
    notes = sum(s.note for s in successes) + max(0, _notes(initial))
    if not ambiguous and _notes(final) != notes:
        problems.append(
            f"the final metadata counts {_notes(final)} notes, but {notes} saves of a note (the "
            "metadata alone, no new message) were acknowledged: such a save was lost, or a later "
            "save wrote older metadata over it"
        )
    if not ambiguous and final.version != successes[-1].version:
        problems.append(
            f"the final version is {final.version}, but the last acknowledged save got "
            f"{successes[-1].version}"
        )
    return problems


def run_thread_writers(
    store: CheckpointStore, task_id: str, *, threads: int, rounds: int, timeout: float
) -> list[WriterLog]:
    """``threads`` writers sharing ``store``, ``rounds`` attempts each."""
    logs: list[WriterLog] = [WriterLog() for _ in range(threads)]
    lockstep = threading.Barrier(threads)

    failed: list[str] = []

    def writer(worker: int) -> None:
        try:
            logs[worker] = write_loop(store, task_id, worker, rounds, lockstep)
        except BaseException as exc:
            # Not an outage (write_loop counts those): the store raised what no save or
            # load may. The others must not wait for this writer at the barrier, and the
            # report names the exception, not a slow store.
            lockstep.abort()
            failed.append(f"writer thread {worker}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")

    workers = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(threads)]
    for thread in workers:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in workers:
        thread.join(max(0.0, deadline - time.monotonic()))
    if failed:
        raise RuntimeError("a writer thread failed:\n" + "\n".join(failed))
    if any(thread.is_alive() for thread in workers):
        raise TimeoutError(f"writer threads did not finish within {timeout:.0f}s (half "
                           "the limit per contract; a slow store needs a higher --timeout)")
    return logs


def _process_writer(
    spec: str,
    namespace: str,
    task_id: str,
    worker: int,
    rounds: int,
    ready: Any,
    go: Any,
    lockstep: Any,
    results: Any,
) -> None:
    """Child-process entry point (importable, as ``spawn`` requires)."""
    warnings.simplefilter("ignore")  # the parent reports the store's warnings, once
    try:
        store = StoreFactory.from_spec(spec).make(namespace)
        ready.put(worker)
        if not go.wait(60):
            results.put((worker, None, "the parent never gave the start signal"))
            return
        log = write_loop(store, task_id, worker, rounds, lockstep)
        store.close()
        results.put((worker, log, None))
    except CorruptCheckpointError as exc:
        # The parent raises it again: the store called its own writing corrupt, a failure
        # of the store the report explains, not an error of the run.
        lockstep.abort()  # the others need not wait for this writer at the barrier
        results.put((worker, None, ("corrupt", exc.task_id, exc.reason)))
    except BaseException:
        lockstep.abort()
        results.put((worker, None, traceback.format_exc()))


def run_process_writers(
    factory: StoreFactory,
    namespace: str,
    task_id: str,
    *,
    processes: int,
    rounds: int,
    timeout: float,
) -> list[WriterLog]:
    """``processes`` child processes, each with its own store instance in ``namespace``."""
    mp = process_context()
    ready, results = mp.Queue(), mp.Queue()
    go = mp.Event()
    lockstep = mp.Barrier(processes)
    children = [
        mp.Process(
            target=with_environment(_process_writer, ignore_interrupt=True),
            args=(factory.spec, namespace, task_id, i, rounds, ready, go, lockstep, results),
            daemon=True,
        )
        for i in range(processes)
    ]
    for child in children:
        child.start()
    deadline = time.monotonic() + timeout
    logs: dict[int, WriterLog] = {}
    failures: list[str] = []
    corrupt: tuple[str, str] | None = None
    try:
        started = 0
        while started < processes:
            try:
                ready.get(timeout=max(0.1, deadline - time.monotonic()))
                started += 1
            except queue_module.Empty:
                # A child that failed before it was ready reports on ``results``.
                if time.monotonic() > deadline or not results.empty():
                    break
        go.set()
        while len(logs) + len(failures) < processes:
            try:
                worker, log, error = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue_module.Empty:
                if time.monotonic() > deadline:
                    break
                continue
            if isinstance(error, tuple):
                corrupt = corrupt or (error[1], error[2])
                failures.append(f"writer process {worker}: {error[2]}")
            elif error is not None:
                failures.append(f"writer process {worker}:\n{error}")
            else:
                logs[worker] = log
    finally:
        _reap(children, deadline)
    if corrupt is not None:
        raise CorruptCheckpointError(*corrupt)
    if failures:
        raise RuntimeError("a writer process failed:\n" + "\n".join(failures))
    if len(logs) < processes:
        raise TimeoutError(f"writer processes did not finish within {timeout:.0f}s (half "
                           "the limit per contract; a slow store needs a higher --timeout)")
    return [logs[i] for i in sorted(logs)]


def run_create_race(
    store: CheckpointStore, task_id_of: Any, *, threads: int, rounds: int, timeout: float
) -> list[str]:
    """Threads sharing ``store`` race to create one task (a save from version 0), half the
    rounds just after another thread deleted it; the problems seen.

    Exactly one create may succeed in a round: the others must raise ``ConflictError``
    (an agent reads any other exception as an outage, or as a bug of its own), and the
    task must then hold the winner's content. Two creates that both succeed erase one
    another: a worker acts on a checkpoint that is gone.
    """
    problems: list[str] = []
    deadline = time.monotonic() + timeout
    for round_ in range(rounds):
        if problems or time.monotonic() > deadline:
            break
        task_id = task_id_of(round_)
        deleting = round_ % 2 == 1
        if deleting:
            store.save(Checkpoint(task_id=task_id, goal="race", messages=[{"role": "user", "content": "before"}]))
        won, other, delete_error = _create_round(store, task_id, threads, deleting, deadline)
        if delete_error is not None:
            # The delete's own error is no create's (an outside round's report counted it
            # as one: "1 of 3 threads creating one task raised OSError from delete").
            problems.append(
                f"deleting the task while {threads} threads created it raised {delete_error}: "
                "a delete must not fail because saves run beside it (wait for the save's lock, "
                "or delete what is there); only an outage may raise, as a StoreError"
            )
            continue
        problems += _judge_create_round(store, task_id, won, other, threads, "threads", deleting)
    return problems


def run_metadata_race(
    store: CheckpointStore, task_id: str, *, threads: int, rounds: int, timeout: float
) -> list[str]:
    """Threads sharing ``store`` load one task at the same version and race to save it with
    only its metadata changed (no new message: a status or a ledger note); the problems
    seen. Exactly one save may succeed in a round, the others must raise
    ``ConflictError``, and the task must hold the winner's metadata.

    Saves that add messages are not enough: an outside round's Redis store watched the
    message list, not the record holding the version, and every race of saves that append
    tripped that watch; two saves that append nothing were both acknowledged.
    """
    current = store.save(Checkpoint(task_id=task_id, goal="race", messages=[{"role": "user", "content": "m"}]))
    deadline = time.monotonic() + timeout
    for round_ in range(rounds):
        if time.monotonic() > deadline:
            break
        loaded = current
        won, other = _metadata_round(store, loaded, threads, f"r{round_}", deadline)
        if other:
            return [
                f"{len(other)} of {threads} threads saving one task from version {loaded.version} "
                f"at once, with only its metadata changed, raised {other[0]}, not ConflictError: "
                "a save that loses a race must raise ConflictError"
            ]
        if len(won) > 1:
            versions = sorted(saved.version for saved in won)
            told = (
                f"{len(won)} of {threads} threads saving one task from version {loaded.version} at "
                "once, with only its metadata changed (no new message), were each told their save "
                f"succeeded (at versions {versions}): only one may, the others must conflict. "
            )
            if len(set(versions)) == len(versions):
                # Each at a version of its own: the losers wrote again over the winner.
                return [
                    told + "a save that meets a newer version wrote again under it (a retry that "
                    "reloads the version, or an upsert): raise ConflictError instead"
                ]
            return [
                told + "A compare-and-set that guards the messages alone (a watched key, a locked "
                "row or a condition on the history) lets such saves through: guard the record "
                "that holds the version"
            ]
        if not won:
            continue  # every save failed or conflicted: no evidence this round
        saved = won[0]
        stored = store.load(task_id)
        if stored is None or stored.metadata != saved.metadata or stored.version != saved.version:
            return [
                f"after threads raced to save one task's metadata from version {loaded.version}, "
                f"the one acknowledged (version {saved.version}, {saved.metadata}) is not what "
                f"loads ({'nothing' if stored is None else f'version {stored.version}, {stored.metadata}'})"
            ]
        current = saved
    return []


def run_delete_race(
    store: CheckpointStore, task_id_of: Any, *, threads: int, rounds: int, timeout: float
) -> list[str]:
    """Threads sharing ``store``: one deletes a task while the others save it from the
    version they loaded, all at once; the problems seen.

    Whichever comes first, the task must be gone afterwards: a save before the delete is
    deleted with it, and a save after it meets no task and must conflict. A task that is
    back is a save that wrote over the delete that came between its check and its write
    (an outside round's Redis store took its lock for saves and not for deletes): the
    deleted task's work comes back, and a worker acts on a task its owner removed.
    """
    deadline = time.monotonic() + timeout
    savers = max(1, threads - 1)
    for round_ in range(rounds):
        if time.monotonic() > deadline:
            break
        task_id = task_id_of(round_)
        loaded = store.save(Checkpoint(task_id=task_id, goal="race", messages=[{"role": "user", "content": "m"}]))
        # The delete comes 0 to 9 ms after the saves start, by round: a delete that always
        # came first would find the task before any save read it, and never land between a
        # save's check and its write.
        won, other = _delete_round(store, loaded, savers, deadline, delay=(round_ % 10) / 1000)
        if other:
            return [
                f"deleting a task while {savers} threads saved it from version {loaded.version} raised "
                f"{other[0]}: a save that loses to a delete must raise ConflictError, and a delete "
                "must not fail because saves run beside it (only an outage may raise, as a StoreError)"
            ]
        left = store.load(task_id)
        if left is not None and not won:
            # No save was acknowledged, so none wrote it: what loads is what the delete left.
            return [
                f"a task was deleted while {savers} threads saved it from version {loaded.version} "
                f"(no save acknowledged), and afterwards it loads again (version {left.version}): "
                "the delete left the task behind, a save between nothing. delete() must remove "
                "every version a task's saves left (delete_idempotent and compare_and_set check "
                "a delete on its own)"
            ]
        if left is not None and won and left.version <= max(won) - 1:
            return [
                f"a task was deleted while {savers} threads saved it from version {loaded.version} "
                f"(a save acknowledged as version {max(won)}), and afterwards it loads again as "
                f"version {left.version}, older than that save: the delete removed the latest "
                "save and left an earlier one. delete() must remove every version a task's saves "
                "left (delete_idempotent and compare_and_set check a delete on its own)"
            ]
        if left is not None:
            return [
                f"a task was deleted while {savers} threads saved it from version {loaded.version} "
                f"({len(won)} save(s) acknowledged), and afterwards it loads again (version "
                f"{left.version}): a save wrote over the delete that came between its version check "
                "and its write. A delete must exclude saves as saves exclude each other (the same "
                "lock, transaction or condition: a Redis WATCH or lock, a row lock, a conditional "
                "write); a save after it finds no task and raises ConflictError"
            ]
    return []


def _delete_round(
    store: CheckpointStore, loaded: Checkpoint, savers: int, deadline: float, *, delay: float = 0.0
) -> tuple[list[int], list[str]]:
    """One round of :func:`run_delete_race`: the versions of the saves acknowledged, and the
    errors other than a conflict or a store error."""
    lockstep = threading.Barrier(savers + 1)
    won: list[int] = []
    other: list[str] = []

    def save(worker: int) -> None:
        attempt = loaded.model_copy(update={"messages": [*loaded.messages, {"role": "user", "content": f"w{worker}"}]})
        try:
            lockstep.wait(30)
        except threading.BrokenBarrierError:
            return
        try:
            won.append(store.save(attempt).version)
        except (ConflictError, StoreError):
            pass
        except Exception as exc:
            other.append(f"{type(exc).__name__}: {exc}")

    def delete() -> None:
        try:
            lockstep.wait(30)
        except threading.BrokenBarrierError:
            return
        time.sleep(delay)
        try:
            store.delete(loaded.task_id)
        except Exception as exc:
            other.append(f"{type(exc).__name__} from delete: {exc}")

    workers = [threading.Thread(target=save, args=(i,), daemon=True) for i in range(savers)]
    _race([*workers, threading.Thread(target=delete, daemon=True)], deadline, "to save a task while it was deleted")
    return won, other


def _metadata_round(
    store: CheckpointStore, loaded: Checkpoint, threads: int, tag: str, deadline: float
) -> tuple[list[Checkpoint], list[str]]:
    """One round of :func:`run_metadata_race`: the saves acknowledged, and the errors other
    than a conflict or a store error (an outage says nothing of the race)."""
    lockstep = threading.Barrier(threads)
    won: list[Checkpoint] = []
    other: list[str] = []

    def save(worker: int) -> None:
        attempt = loaded.model_copy(update={"metadata": {"writer": f"w{worker}-{tag}"}})
        try:
            lockstep.wait(30)
        except threading.BrokenBarrierError:
            return
        try:
            won.append(store.save(attempt))
        except (ConflictError, StoreError):
            pass
        except Exception as exc:
            other.append(f"{type(exc).__name__}: {exc}")

    _race([threading.Thread(target=save, args=(i,), daemon=True) for i in range(threads)],
          deadline, "to save a task's metadata")
    return won, other


def _race(workers: list[threading.Thread], deadline: float, what: str) -> None:
    """Start ``workers`` and wait for them until ``deadline``; raise ``TimeoutError`` if any
    is still running then."""
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in workers):
        raise TimeoutError(f"threads racing {what} did not finish within a quarter of the limit "
                           "per contract (a slow store needs a higher --timeout)")


def _judge_create_round(
    store: CheckpointStore, task_id: str, won: list[str], other: list[str], racers: int, who: str, deleting: bool
) -> list[str]:
    """What a round of racing creates shows: exactly one may succeed, the others must raise
    ``ConflictError``, and the task must hold the winner's content."""
    where = "just after another deleted it" if deleting else "new"
    if other and not won and deleting:
        # No create won: the error is no lost race (an outside round's store was told to
        # map a FileNotFoundError, which a delete removing its lock mid-save caused).
        return [
            f"{len(other)} of {racers} {who} creating one task just after another deleted it "
            f"raised {other[0]}, and none created it. A create that runs beside a delete must "
            "either create the task or raise ConflictError. If the error comes from something "
            "the delete removed under the save (its lock file, its directory, its row), the "
            "delete and the save do not exclude each other: keep what the save locks out of "
            "what delete removes, or take the same lock in both. Otherwise the store fails "
            "under concurrent use (a pool or a server's connection limit run out, say)"
        ]
    if other:
        return [
            f"{len(other)} of {racers} {who} creating one task ({where}) at once raised "
            f"{other[0]}, not ConflictError: a save that loses a race to create a task must "
            "raise ConflictError (map the backend's unique-key or exists error to it)"
        ]
    if len(won) > 1:
        return [
            f"{len(won)} of {racers} {who} creating one task ({where}) at once were each told "
            "their save from version 0 succeeded: only one may, the others must conflict (an "
            "agent would go on from a checkpoint another create replaced; a lock or a compare "
            "that a delete removes or skips, or that holds only within one process, lets two "
            "creates through)"
        ]
    if won:
        loaded = store.load(task_id)
        content = [m.get("content") for m in loaded.messages] if loaded is not None else None
        if content != [won[0]]:
            return [
                f"a task created by one of {racers} racing {who} ({where}) holds {content}, "
                f"not the content of the one create acknowledged ({won[0]!r})"
            ]
    return []


#: What :func:`_create` says of a create that succeeded.
_WON = "won"


def _create(store: CheckpointStore, task_id: str, marker: str) -> str:
    """One racing create of ``task_id``: ``_WON``, ``""`` for a conflict or a store error
    (an outage says nothing of the race), or the other exception, as text."""
    try:
        store.save(Checkpoint(task_id=task_id, goal="race", messages=[{"role": "user", "content": marker}]))
    except (ConflictError, StoreError):
        return ""
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return _WON


def _reap(children: list[Any], deadline: float) -> None:
    """Join the child processes until ``deadline``; kill those still running."""
    for child in children:
        child.join(max(0.1, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(5)


def _create_round(
    store: CheckpointStore, task_id: str, threads: int, deleting: bool, deadline: float
) -> tuple[list[str], list[str], str | None]:
    """One round of :func:`run_create_race`: the markers whose create succeeded, the
    creates' errors other than a conflict or a store error (an outage says nothing of the
    race), and the delete's error, if it raised one (not a store error)."""
    lockstep = threading.Barrier(threads + (1 if deleting else 0))
    won: list[str] = []
    other: list[str] = []
    deleted: list[str] = []

    def create(worker: int) -> None:
        marker = f"create-w{worker}"
        try:
            lockstep.wait(30)
        except threading.BrokenBarrierError:
            return
        outcome = _create(store, task_id, marker)
        if outcome == _WON:
            won.append(marker)
        elif outcome:
            other.append(outcome)

    def delete() -> None:
        try:
            lockstep.wait(30)
            store.delete(task_id)
        except (StoreError, threading.BrokenBarrierError):
            pass
        except Exception as exc:
            deleted.append(f"{type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=create, args=(i,), daemon=True) for i in range(threads)]
    if deleting:
        workers.append(threading.Thread(target=delete, daemon=True))
    _race(workers, deadline, "to create a task")
    return won, other, deleted[0] if deleted else None


def _process_creator(
    spec: str, namespace: str, task_ids: list[str], worker: int, lockstep: Any, results: Any
) -> None:
    """Child-process entry point of :func:`run_process_create_race`: one create of each
    task, all processes at once (the parent prepares each round, and deletes the task in
    half of them, between the two barriers)."""
    warnings.simplefilter("ignore")  # the parent reports the store's warnings, once
    outcomes: list[str] = []
    try:
        store = StoreFactory.from_spec(spec).make(namespace)
        for task_id in task_ids:
            lockstep.wait(30)
            outcomes.append(_create(store, task_id, f"create-p{worker}"))
            lockstep.wait(30)
        store.close()
        results.put((worker, outcomes, None))
    except BaseException:
        lockstep.abort()
        results.put((worker, None, traceback.format_exc()))


def run_process_create_race(
    factory: StoreFactory,
    namespace: str,
    store: CheckpointStore,
    task_id_of: Any,
    *,
    processes: int,
    rounds: int,
    timeout: float,
) -> list[str]:
    """Processes, each with its own instance in ``namespace``, race to create one task per
    round, half the rounds just after this process (with ``store``) deleted it; the
    problems seen. A lock that holds only within one process (a ``threading.Lock`` around
    a check and a write) passes the threads' race and fails this one."""
    mp = process_context()
    results = mp.Queue()
    lockstep = mp.Barrier(processes + 1)
    task_ids = [task_id_of(round_) for round_ in range(rounds)]
    children = [
        mp.Process(
            target=with_environment(_process_creator, ignore_interrupt=True),
            args=(factory.spec, namespace, task_ids, i, lockstep, results),
            daemon=True,
        )
        for i in range(processes)
    ]
    for child in children:
        child.start()
    deadline = time.monotonic() + timeout
    outcomes: dict[int, list[str]] = {}
    failures: list[str] = []
    try:
        for round_, task_id in enumerate(task_ids):
            deleting = round_ % 2 == 1
            if deleting:
                store.save(Checkpoint(task_id=task_id, goal="race", messages=[{"role": "user", "content": "before"}]))
            lockstep.wait(max(0.1, min(30.0, deadline - time.monotonic())))
            if deleting:
                store.delete(task_id)
            lockstep.wait(max(0.1, min(30.0, deadline - time.monotonic())))
    except threading.BrokenBarrierError:
        pass  # a child failed: it says why on ``results``
    finally:
        while len(outcomes) + len(failures) < processes and time.monotonic() < deadline + 5:
            try:
                worker, seen, error = results.get(timeout=max(0.1, deadline + 5 - time.monotonic()))
            except queue_module.Empty:
                break
            if error is not None:
                failures.append(f"creating process {worker}:\n{error}")
            else:
                outcomes[worker] = seen
        _reap(children, deadline)
    if failures:
        raise RuntimeError("a process racing to create a task failed:\n" + "\n".join(failures))
    if len(outcomes) < processes:
        raise TimeoutError(f"processes racing to create a task did not finish within {timeout:.0f}s "
                           "(a quarter of the limit per contract; a slow store needs a higher --timeout)")
    for round_, task_id in enumerate(task_ids):
        seen = [(worker, outcomes[worker][round_]) for worker in sorted(outcomes)]
        won = [f"create-p{worker}" for worker, outcome in seen if outcome == _WON]
        other = [outcome for _, outcome in seen if outcome not in (_WON, "")]
        problems = _judge_create_round(store, task_id, won, other, processes, "processes", round_ % 2 == 1)
        if problems:
            return problems
    return []
