"""SIGKILL a writer process at random moments and look at what it left behind.

A child process saves generation after generation of :func:`generation_checkpoint`
and acknowledges each save on a pipe as soon as ``save`` returns. The parent kills it
after a random delay drawn from the run's seed, then loads the task from an instance of
its own. Two contracts judge the same rounds:

* atomicity: the load does not fail, and what it returns is exactly the checkpoint of
  the generation its head claims (a mix of two saves differs from every generation);
* acknowledged saves survive: the loaded version is at least the last acknowledged one,
  and a new instance that resumes the task (loads it and saves two more messages) gets a
  save that then loads whole: a killed save may leave debris (a torn tail of a log, a
  half-written file) that the next save must not build on.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

from stores import Checkpoint, CheckpointStore, ConflictError

from .._children import process_context, with_environment
from .comparison import first_difference
from .context import CertifyContext, ContractFailed
from .factory import StoreFactory, new_namespace
from .generators import REWRITE_EVERY, generation_checkpoint, generation_of

__all__ = ["DELETE_FAILED", "KillExperiment", "KillRound", "run_kill_experiment"]

#: How a delete of the killed writers' tasks that raised is reported.
DELETE_FAILED = "deleting the killed writers' tasks failed"

#: The writer stops by itself after this many generations (bounded loop).
MAX_GENERATIONS = 2000

#: Tries of the resuming save after a kill (each after a reload) before it is a failure.
RESUME_ATTEMPTS = 4


@dataclass(frozen=True)
class KillRound:
    """One kill: what was acknowledged, and what a fresh instance loaded afterwards."""

    task_id: str
    delay: float
    last_ack: int
    loaded_version: int | None
    load_error: str | None
    mix: str | None
    finished_before_kill: bool
    #: What went wrong when a new instance resumed after the kill, or ``None``.
    recovery: str | None = None
    #: How the listing disagreed with the load right after the kill, or ``None``.
    listing: str | None = None
    #: The version a new instance, made after every round, loads (None: nothing).
    fresh_version: int | None = None
    #: The versions the listing showed for the task right after the kill (None: not read).
    listed_versions: tuple[int, ...] | None = None


@dataclass(frozen=True)
class KillExperiment:
    """All rounds of one run."""

    rounds: tuple[KillRound, ...]
    #: The namespace the rounds wrote in (a contract may look again with a new instance).
    namespace: str = ""
    #: What a new instance still listed or loaded after deleting every round's task.
    after_delete: str | None = None


def _crash_writer(spec: str, namespace: str, task_id: str, conn: Any) -> None:
    """Child-process entry point: save generations, acknowledge each, until killed."""
    warnings.simplefilter("ignore")  # the parent reports the store's warnings, once
    try:
        store = StoreFactory.from_spec(spec).make(namespace)
        for generation in range(1, MAX_GENERATIONS + 1):
            store.save(generation_checkpoint(task_id, generation, version=generation - 1))
            conn.send(("ack", generation))
        conn.send(("done", MAX_GENERATIONS))
    except ConflictError as exc:
        # The only writer of its task, saving from the version its last save returned:
        # the store disagrees with itself (said plainly by the parent, not as a traceback).
        conn.send(("conflict", f"{exc} (the save of generation {generation}, from version {generation - 1})"))
    except BaseException:
        conn.send(("error", traceback.format_exc()))


def _writer_failed(kind: str, value: Any) -> None:
    """Raise what a writer process reported, if it failed (``kind`` "error" or "conflict")."""
    if kind == "conflict":
        raise ContractFailed(
            f"the writer process, the only writer of its task, got ConflictError: {value}. It "
            "saves each generation from the version its previous save returned, so the store "
            "disagrees with itself about the version: save returns another version than it "
            "stored, or a load or compare reads another version than the newest (a newest "
            "picked by the text of a name, v9 after v10, say)"
        )
    if kind == "error":
        raise RuntimeError(f"the writer process failed:\n{value}")


def _judge_mix(loaded: Checkpoint) -> str | None:
    generation = generation_of(loaded)
    if generation < 1 or generation > MAX_GENERATIONS:
        return f"the loaded head claims generation {generation}, which was never saved"
    expected = generation_checkpoint(loaded.task_id, generation, version=generation)
    for name in ("goal", "metadata", "artifacts", "messages"):
        difference = first_difference(getattr(expected, name), getattr(loaded, name), name)
        if difference:
            return f"the head says generation {generation}, but {difference}"
    if loaded.version != generation:
        return f"generation {generation} was saved as version {generation}, loaded as {loaded.version}"
    return None


def _after_kill_message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"resumed after the kill, message {i}"}]}


def _resume(ctx: CertifyContext, namespace: str, task_id: str) -> str | None:
    """A new instance resumes the task as a restarted worker does; what went wrong, if anything.

    It loads the task, appends two messages and saves; yet another new instance must
    then load exactly that save.
    """
    resumer = ctx.new_store(namespace)
    conflicts = 0
    while True:
        try:
            resumed = resumer.load(task_id)
            if resumed is None:
                return "a new instance loaded nothing after the kill"
            messages = [*resumed.messages, _after_kill_message(len(resumed.messages)),
                        _after_kill_message(len(resumed.messages) + 1)]
            attempt = resumed.model_copy(update={"goal": "resumed after the kill",
                                                 "messages": messages})
            saved = resumer.save(attempt)
            break
        except ConflictError as exc:
            # A save the killed writer had already sent may still land (a server finishes
            # a request whose client died): a resuming worker reloads and tries again.
            conflicts += 1
            if conflicts >= RESUME_ATTEMPTS:
                return (f"a new instance resuming after the kill (load, append two messages, "
                        f"save) conflicted {conflicts} times, reloading before each try: "
                        f"{exc}; nothing else was writing, so its load does not return what "
                        "the store holds")
            time.sleep(0.2 * conflicts)
        except Exception as exc:
            return (f"a new instance resuming after the kill (load, append two messages, save) "
                    f"failed: {type(exc).__name__}: {exc}")
    what = (f"a new instance resumed after the kill and saved version {saved.version} "
            f"(appending two messages to version {resumed.version}); that save was acknowledged")
    try:
        loaded = ctx.new_store(namespace).load(task_id)
    except Exception as exc:
        return (f"{what}, but the checkpoint then fails to load: {type(exc).__name__}: {exc} "
                "(did the save build on debris the killed save left, such as a torn tail?)")
    if loaded is None:
        return f"{what}, but then nothing loads"
    keep = {"version", "updated_at"}
    difference = first_difference(attempt.model_dump(mode="json", exclude=keep),
                                  loaded.model_dump(mode="json", exclude=keep))
    if difference:
        return (f"{what}, but what loads differs from it (did the save build on debris the "
                f"killed save left?): {difference}")
    if loaded.version != saved.version:
        return f"{what}, but version {loaded.version} loads"
    return None


def _kill_plan(rounds: int, rng: random.Random) -> list[tuple[bool, float]]:
    """For each round: whether to aim at an append (else a rewrite), and where in the save.

    Every fourth round aims at a rewrite, the others at appends. Within each kind the
    offsets are stratified over the save's duration (one early, one in the middle, one
    late, ...), so that every phase of a save is hit on every seed, not only on lucky
    ones: a kill between writing the messages and committing the head, for one.
    """
    kinds = [round_ % 4 != 3 for round_ in range(rounds)]
    plan: list[tuple[bool, float]] = []
    for kind in (True, False):
        count = kinds.count(kind)
        strata = [(i + rng.uniform(0.15, 0.85)) / count for i in range(count)]
        plan += [(kind, offset) for offset in strata]
    return sorted(plan, key=lambda aimed: rng.random())


def _is_append(generation: int) -> bool:
    return generation % REWRITE_EVERY != 0


def _aim(receiver: Any, last_ack: int, warm_until: float, aim_append: bool,
         offset: float) -> tuple[int, bool]:
    """Read acks until a save of the aimed kind starts, then sleep ``offset`` of a save.

    Returns the last ack read and whether the writer finished. A save's duration is the
    median interval between the last acks (at least three are waited for).
    """
    times: list[float] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not receiver.poll(max(0.0, deadline - time.monotonic())):
            break
        kind, value = receiver.recv()
        now = time.monotonic()
        _writer_failed(kind, value)
        if kind == "done":
            return last_ack, True
        last_ack = value
        times.append(now)
        if now < warm_until or len(times) < 4 or _is_append(value + 1) != aim_append:
            continue
        intervals = sorted(b - a for a, b in zip(times[-4:-1], times[-3:], strict=True))
        time.sleep(offset * intervals[len(intervals) // 2])
        return last_ack, False
    raise TimeoutError("the writer process stopped acknowledging saves")


def run_kill_experiment(ctx: CertifyContext) -> KillExperiment:
    """``ctx.budget.kill_rounds`` kills of a writer process, each on a task of its own."""
    mp = process_context()
    rng = random.Random(ctx.seed)
    namespace = new_namespace()
    reader = ctx.new_store(namespace)
    rounds: list[KillRound] = []
    plan = _kill_plan(ctx.budget.kill_rounds, rng)
    for aim_append, offset in plan:
        task_id = ctx.task_id("kill")
        receiver, sender = mp.Pipe(duplex=False)
        child = mp.Process(
            target=with_environment(_crash_writer, ignore_interrupt=True), args=(ctx.factory.spec, namespace, task_id, sender), daemon=True
        )
        child.start()
        sender.close()
        last_ack, finished, delay = 0, False, 0.0
        try:
            if not receiver.poll(60):
                raise TimeoutError("the writer process acknowledged no save within 60s")
            kind, value = receiver.recv()
            if kind == "error":
                raise RuntimeError(f"the writer process failed before its first save:\n{value}")
            _writer_failed(kind, value)
            last_ack = value
            first_ack = time.monotonic()
            # Let it run a little (from the seed, so a round can be replayed), then aim:
            # read acks until a save of the planned kind comes next, and kill at the
            # planned fraction of a save's duration into it.
            warm_up = rng.uniform(0.02, 0.15)
            last_ack, finished = _aim(receiver, last_ack, first_ack + warm_up, aim_append, offset)
            delay = time.monotonic() - first_ack
            if child.pid is not None:
                os.kill(child.pid, signal.SIGKILL)
            child.join(10)
            while receiver.poll(0):
                try:
                    kind, value = receiver.recv()
                except (EOFError, OSError, ValueError):
                    break  # the message being written when the kill landed
                if kind == "ack":
                    last_ack = value
                elif kind == "done":
                    finished = True
                else:
                    _writer_failed(kind, value)
        finally:
            if child.is_alive():
                child.kill()
                child.join(5)
            receiver.close()
        loaded_version: int | None = None
        load_error: str | None = None
        mix: str | None = None
        try:
            loaded = reader.load(task_id)
        except Exception as exc:
            load_error = f"{type(exc).__name__}: {exc}"
        else:
            if loaded is not None:
                loaded_version = loaded.version
                mix = _judge_mix(loaded)
        if not load_error:
            loaded_version, mix, listing, listed = _settled_listing(reader, task_id, loaded_version, mix)
        else:
            listing, listed = None, None
        recovery = _resume(ctx, namespace, task_id) if loaded_version is not None else None
        rounds.append(
            KillRound(task_id, round(delay, 4), last_ack, loaded_version, load_error, mix, finished,
                      recovery, listing, listed_versions=listed)
        )
    rounds, after_delete = _fresh_look(ctx, namespace, rounds)
    return KillExperiment(tuple(rounds), namespace, after_delete)


#: Looks again (after this many seconds, at most so many times) when the listing disagrees
#: with the load right after a kill: a save the killed writer had sent may still be
#: committing on the server.
_SETTLE_WAIT, _SETTLE_TRIES = 0.1, 5


def _settled_listing(
    store: CheckpointStore, task_id: str, loaded_version: int | None, mix: str | None
) -> tuple[int | None, str | None, str | None, tuple[int, ...] | None]:
    """The load's version, its mix, and how the listing disagrees with it, once the store
    has settled after a kill.

    A killed client's last request may still be in the server's hands: PostgreSQL applies
    a COMMIT that reached it before the kill, a few milliseconds later. An outside round's
    sound store was loaded at version 10 and listed at 11 just after, and was told its
    killed save had left debris the listing picks up. So where they disagree, both are
    read again (a few times, a tenth of a second apart): a late commit makes them agree
    on the newer version; debris, or a stale listing, stays.
    """
    listing, listed = _listing_problem(store, task_id, loaded_version)
    for _ in range(_SETTLE_TRIES):
        if listing is None or listed is None:
            break
        time.sleep(_SETTLE_WAIT)
        try:
            again = store.load(task_id)
        except Exception:
            break  # the first reading stands: a load that fails now is not the listing's to judge
        if (None if again is None else again.version) != loaded_version:
            loaded_version = None if again is None else again.version
            # A torn first load stays a failure, whatever loads later.
            mix = mix or (None if again is None else _judge_mix(again))
        listing, listed = _listing_problem(store, task_id, loaded_version)
    return loaded_version, mix, listing, listed


def _listing_problem(
    store: CheckpointStore, task_id: str, loaded_version: int | None
) -> tuple[str | None, tuple[int, ...] | None]:
    """How ``store``'s listing disagrees with its load of ``task_id`` (``None``: it agrees),
    and the versions it lists the task at (``None``: the listing failed).

    A save cut short may leave a file, a row or a key behind that a listing picks up: the
    task listed twice, or at a version no load returns.
    """
    try:
        versions = [s.version for s in store.list_checkpoints() if s.task_id == task_id]
    except Exception as exc:
        return f"list_checkpoints() failed: {type(exc).__name__}: {exc}", None
    if loaded_version is None:
        return (None if not versions else f"listed at version(s) {versions}, though load finds nothing"), tuple(versions)
    if versions != [loaded_version]:
        listed = "not listed" if not versions else f"listed {len(versions)} time(s), at version(s) {versions}"
        return f"{listed}, though load returns version {loaded_version}", tuple(versions)
    return None, tuple(versions)


def _fresh_look(
    ctx: CertifyContext, namespace: str, rounds: list[KillRound]
) -> tuple[list[KillRound], str | None]:
    """Each round's task as a new instance loads it; then every task deleted, and what
    that instance still lists or loads of them (what a killed save left behind)."""
    try:
        fresh = ctx.new_store(namespace)
        looked = [
            dataclasses.replace(kill, fresh_version=None if (c := fresh.load(kill.task_id)) is None else c.version)
            for kill in rounds
        ]
    except Exception:  # a store that fails here fails the rounds' own checks already
        return rounds, None
    try:
        for kill in rounds:
            fresh.delete(kill.task_id)
        ours = {kill.task_id for kill in rounds}
        listed = sorted({s.task_id for s in fresh.list_checkpoints() if s.task_id in ours})
        loaded = sorted(task_id for task_id in ours if fresh.load(task_id) is not None)
    except Exception as exc:
        return looked, f"{DELETE_FAILED}: {type(exc).__name__}: {exc}"
    if listed or loaded:
        left = f"still listed: {listed}" if listed else f"still loaded: {loaded}"
        return looked, f"after delete() of every killed writer's task, a new instance has them {left}"
    return looked, None
