"""The contracts a checkpoint store must keep, each a named and documented check.

Required contracts are what the reference agent and the harness rely on; a store that
breaks one can lose or corrupt an agent's state. Optional contracts are checked when
the store declares them (``info()`` or ``certify_capabilities``).

Each check takes a :class:`~.context.CertifyContext`, returns a short note when the
contract holds and raises :class:`~.context.ContractFailed`,
:class:`~.context.NotCheckable` or :class:`~.context.NotApplicable` otherwise.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, rule

from stores import (
    SCHEMA_VERSION,
    Checkpoint,
    CheckpointStatus,
    CheckpointStore,
    ConflictError,
    CorruptCheckpointError,
    UnsupportedSchemaVersionError,
)
from stores.checkpoint import utcnow
from stores.codec import dumps

from .comparison import first_difference
from .concurrency import (
    judge_history,
    run_create_race,
    run_delete_race,
    run_metadata_race,
    run_process_create_race,
    run_process_writers,
    run_thread_writers,
)
from .context import CertifyContext, ContractFailed, NotApplicable, NotCheckable
from .crash import DELETE_FAILED, KillExperiment, run_kill_experiment
from .factory import new_namespace
from .generators import LINE_SEPARATORS, checkpoints, deep_value, every_block_type_messages
from .restart import check_durable_restart
from .sharing import needs_cross_process
from .task_ids import check_task_id_fidelity

__all__ = ["CONTRACTS", "Contract", "contract_by_id"]


@dataclass(frozen=True)
class Contract:
    """One named check. ``why`` is what breaks in an agent when a store breaks it."""

    id: str
    title: str
    required: bool
    why: str
    check: Callable[[CertifyContext], str]


# -- shared pieces -------------------------------------------------------------------------


def _content(checkpoint: Checkpoint) -> dict[str, Any]:
    """Everything a save must keep, as JSON data (``version``/``updated_at`` are the store's)."""
    return checkpoint.model_dump(mode="json", exclude={"version", "updated_at"})


def _expect_same(expected: Checkpoint, loaded: Checkpoint | None, what: str) -> None:
    if loaded is None:
        raise ContractFailed(f"{what}: load returned None for a saved checkpoint")
    difference = first_difference(_content(expected), _content(loaded))
    if difference:
        raise ContractFailed(f"{what}: the loaded checkpoint differs from the saved one", difference)
    if loaded.version != expected.version:
        raise ContractFailed(
            f"{what}: saved as version {expected.version}, loaded as version {loaded.version}"
        )


def _hypothesis_settings(ctx: CertifyContext, **extra: Any) -> settings:
    # Shrinking can take far longer than finding on a slow store: only full runs shrink.
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if ctx.budget.shrink:
        phases.append(Phase.shrink)
    return settings(
        max_examples=ctx.budget.examples,
        phases=phases,
        deadline=None,
        database=None,
        # No "@reproduce_failure(...)" blob: there is no test function to decorate here.
        # The seed repeats the run (no example database), and the report says how.
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        **extra,
    )


@contextlib.contextmanager
def _hypothesis_failures(ctx: CertifyContext, contract_id: str) -> Iterator[None]:
    """Turn a Hypothesis failure into a ContractFailed with its falsifying example."""
    lines: list[str] = []

    def report(value: object) -> None:
        lines.append(str(value))

    try:
        with with_reporter(report):
            yield
    except ContractFailed as exc:
        notes = [*lines, *getattr(exc, "__notes__", [])]
        raise ContractFailed(
            exc.summary,
            "\n".join([exc.details, *notes]).strip(),
            ctx.reproduce(contract_id),
        ) from None
    except Exception as exc:
        # Several distinct failures come as an exception group: report the first.
        first: BaseException = exc
        while getattr(first, "exceptions", None):
            first = first.exceptions[0]  # type: ignore[attr-defined]
        if isinstance(first, ContractFailed):
            summary, details = first.summary, first.details
        else:
            summary, details = f"{type(first).__name__}: {first}", ""
        notes = [details, *lines, *getattr(first, "__notes__", [])]
        raise ContractFailed(
            summary, "\n".join(notes).strip(), ctx.reproduce(contract_id)
        ) from None


def _needs_shared(ctx: CertifyContext) -> None:
    shared = _shared_instances(ctx)
    if isinstance(shared, float):
        # They share data, late: not a store to call unshared (an outside round's store
        # served loads from a replica a watcher kept; it was told to share its data).
        raise ContractFailed(
            f"a save by one instance was loaded by another instance of the same namespace only "
            f"after {shared * 1000:.0f} ms (the load right after the save found nothing): a load "
            "must see every save acknowledged before it began. Loads from a replica, a watcher's "
            "copy or a cache that lags behind the writes are stale reads: read from where saves "
            "are committed"
        )
    if not shared:
        raise NotCheckable(
            "two instances from the factory with the same namespace do not share data (a "
            "save by one is not loaded by the other), so there is no other instance to read "
            "from: make the factory return instances that share data for the same namespace",
            needs="instances that share data for the same namespace",
        )


#: How long the probe of shared instances looks again for a save the first load missed.
SHARED_LOOK_SECONDS = 1.0


def _shared_instances(ctx: CertifyContext) -> bool | float:
    """Whether two instances of one namespace share data: True, False, or the seconds
    after which a save the first load missed was found (they share it, late)."""

    def probe() -> bool | float:
        namespace = new_namespace()
        first, second = ctx.new_store(namespace), ctx.new_store(namespace)
        task_id = ctx.task_id("probe")
        first.save(Checkpoint(task_id=task_id, goal="probe"))
        saved = time.monotonic()
        try:
            if second.load(task_id) is not None:
                return True
            while time.monotonic() - saved < SHARED_LOOK_SECONDS:
                time.sleep(0.02)
                if second.load(task_id) is not None:
                    return max(0.001, time.monotonic() - saved)
            return False
        finally:
            first.delete(task_id)

    result: bool | float = ctx.memo("shared", probe)
    return result


# -- required ------------------------------------------------------------------------------


def check_round_trip(ctx: CertifyContext) -> str:
    store = ctx.new_store()

    @seed(ctx.seed)
    @_hypothesis_settings(ctx)
    @given(st.data())
    def round_trip(data: st.DataObject) -> None:
        ctx.check_stop()
        task_id = ctx.task_id("rt")
        checkpoint = data.draw(checkpoints(task_id), label="checkpoint")
        saved = store.save(checkpoint)
        if saved.version != 1:
            raise ContractFailed(f"a first save returned version {saved.version}, not 1")
        difference = first_difference(_content(checkpoint), _content(saved))
        if difference:
            raise ContractFailed("save returned something other than what it was given", difference)
        _expect_same(saved, store.load(task_id), "round trip")

    with _hypothesis_failures(ctx, "round_trip"):
        round_trip()

    fixed = {
        "every content block type": every_block_type_messages(),
        "nesting 200 levels deep": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_deep", "content": "x"}
        ], "extra": deep_value(200)}],
        f"{ctx.budget.big_history} messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} ✓ " * 8}
            for i in range(ctx.budget.big_history)
        ],
        "every line separator": _line_separator_messages(),
    }
    for what, messages in fixed.items():
        task_id = ctx.task_id("rt-fixed")
        saved = store.save(Checkpoint(task_id=task_id, goal=what, messages=messages,
                                      metadata={"separators": "".join(LINE_SEPARATORS)}))
        _expect_same(saved, store.load(task_id), what)

    _check_appends(ctx, store)
    _check_edits(ctx, store)
    _check_lone_surrogates(ctx, store)
    return (
        f"{ctx.budget.examples} generated checkpoints, every block type, deep nesting, "
        f"{ctx.budget.big_history} messages, every line separator; saves appending 1 to 5 "
        "messages at once; saves that edit, replace or drop earlier messages; lone "
        "surrogates refused with ValueError"
    )


def _line_separator_messages() -> list[dict[str, Any]]:
    """A message per line separator ``str.splitlines`` knows, as text and in a text block.

    Always tried, not left to chance: a store that keeps one message per line and splits
    its file with ``splitlines`` cuts every message holding one of these in two.
    """
    messages: list[dict[str, Any]] = []
    for i, separator in enumerate(LINE_SEPARATORS):
        messages.append({"role": "user" if i % 2 == 0 else "assistant",
                         "content": f"line {i} before{separator}after"})
    messages.append({"role": "user", "content": [
        {"type": "text", "text": "all: " + "|".join(LINE_SEPARATORS)}]})
    return messages


def _check_appends(ctx: CertifyContext, store: CheckpointStore) -> None:
    """Saves that add several messages at once keep every one of them, in order.

    An agent step often adds more than one message (a reply and a tool result); a store
    that appends only the new suffix must append all of it. Each save builds on the
    previous one from the same instance, so an incremental store takes its append path.
    """
    task_id = ctx.task_id("rt-append")
    separators = LINE_SEPARATORS

    def message(i: int) -> dict[str, Any]:
        return {"role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i}{separators[i % len(separators)]}end"}

    current = store.save(Checkpoint(task_id=task_id, goal="appends", messages=[message(0)]))
    count = 1
    for added in (2, 1, 3, 5):
        attempt = current.model_copy(
            update={"messages": [*current.messages, *(message(count + i) for i in range(added))]}
        )
        count += added
        what = f"a save appending {added} messages at once (history {count} messages)"
        current = store.save(attempt)
        difference = first_difference(_content(attempt), _content(current))
        if difference:
            raise ContractFailed(f"{what}: save returned something other than it was given",
                                 difference)
        _expect_same(attempt.model_copy(update={"version": current.version}),
                     store.load(task_id), what)


def _check_edits(ctx: CertifyContext, store: CheckpointStore) -> None:
    """Saves that change messages the store already holds keep the change.

    An agent redacts a secret from an earlier message, repairs its last reply, compacts
    its history into a summary: the count and the version may be what an append expects,
    and the prefix is not. An outside round's incremental store appended the new suffix
    whenever the version, lineage and count matched, and kept the secret it was asked to
    drop. Each save builds on the previous one from the same instance.
    """
    task_id = ctx.task_id("rt-edit")
    first: list[dict[str, Any]] = [
        {"role": "user", "content": "my password is hunter2"},
        {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
        {"role": "user", "content": "go on"},
    ]
    current = store.save(Checkpoint(task_id=task_id, goal="edits", messages=first))

    def edited(messages: list[dict[str, Any]], at: int, content: Any) -> list[dict[str, Any]]:
        return [*messages[:at], {**messages[at], "content": content}, *messages[at + 1 :]]

    steps: list[tuple[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]]] = [
        ("the first message edited and one appended (a secret redacted)",
         lambda m: [*edited(m, 0, "my password is [redacted]"), {"role": "assistant", "content": "ok"}]),
        ("a middle message edited, the count unchanged",
         lambda m: edited(m, 1, [{"type": "text", "text": "noted, and redacted"}])),
        ("the last message replaced, the count unchanged (a repaired reply)",
         lambda m: edited(m, len(m) - 1, "ok, going on")),
        ("the history compacted into a summary and the last message",
         lambda m: [{"role": "user", "content": "summary of the task so far"}, m[-1]]),
        ("one message appended after the compaction",
         lambda m: [*m, {"role": "user", "content": "next"}]),
    ]
    for what, change in steps:
        attempt = current.model_copy(update={"messages": change(current.messages)})
        current = store.save(attempt)
        difference = first_difference(_content(attempt), _content(current))
        if difference:
            raise ContractFailed(f"a save with {what}: save returned something other than it was given",
                                 difference)
        _expect_same(attempt.model_copy(update={"version": current.version}), store.load(task_id),
                     f"a save with {what} (a store that appends only the new messages must compare "
                     "the stored ones, and write the whole history when they differ)")


def _check_lone_surrogates(ctx: CertifyContext, store: CheckpointStore) -> None:
    bad_messages = [{"role": "user", "content": "half an emoji: \ud83d end"}]
    task_id = ctx.task_id("surrogate")
    for version, label in ((0, "a new checkpoint"), (1, "an update")):
        if version:
            good = store.save(Checkpoint(task_id=task_id, goal="good"))
        attempt = Checkpoint(task_id=task_id, goal="bad", messages=bad_messages, version=version)
        try:
            store.save(attempt)
        except ValueError:
            pass
        except Exception as exc:
            raise ContractFailed(
                f"saving {label} with a lone surrogate raised {type(exc).__name__}, not the "
                f"codec's ValueError: {exc}"
            ) from None
        else:
            raise ContractFailed(
                f"saving {label} holding a lone surrogate (invalid UTF-8) succeeded: it must "
                "raise ValueError and store nothing, since what it stored cannot be the string "
                "it was given"
            )
        loaded = store.load(task_id)
        if version == 0 and loaded is not None:
            raise ContractFailed("a refused save (lone surrogate) still created the checkpoint")
        if version:
            _expect_same(good, loaded, "after a refused save (lone surrogate)")


#: The version compare_and_set brings a task to before saves far behind it: two digits,
#: whose text begins with that of version 1.
_FAR_AHEAD = 12


def check_compare_and_set(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    task_id = ctx.task_id("cas")
    first = store.save(Checkpoint(task_id=task_id, goal="first"))
    if first.version != 1:
        raise ContractFailed(f"creating a checkpoint returned version {first.version}, not 1")

    def refused(attempt: Checkpoint, what: str, keeps: Checkpoint | None, *, deleted: bool = False) -> None:
        # Each refused save brings a message and a note of its own: a store that writes a
        # save in parts (the new messages first, committed on their own, then the head
        # guarded by the version) leaves them behind where only the head is refused.
        attempt = attempt.model_copy(update={
            "messages": [*attempt.messages, {"role": "user", "content": f"refused: {what}"}],
            "metadata": {**attempt.metadata, "refused": what},
        })
        # What is stored before the save, first: a delete that left the task, or a load
        # that does not return the latest save, is not the compare-and-set's fault.
        before = store.load(attempt.task_id)
        if keeps is None and before is not None:
            why = (
                "delete() did not remove it (a row, a file or a key of it is left, and load finds it)"
                if deleted
                else "no one saved it"
            )
            raise ContractFailed(f"before {what}, the task already loads (version {before.version}): {why}")
        if keeps is not None:
            _expect_same(
                keeps, before,
                f"before {what}, load does not return the last save acknowledged (version "
                f"{keeps.version}): the compare-and-set is not to blame; load must return the latest save",
            )
        try:
            store.save(attempt)
        except ConflictError:
            pass
        else:
            stored = "no checkpoint" if keeps is None else f"version {keeps.version}"
            why = (
                "a save succeeds only from the version stored, never from a later one: compare "
                "with =, not >= or <= (a version ahead of the store's is a bug of the caller's)"
                if keeps is not None and attempt.version > keeps.version
                else "another writer saved first"
            )
            raise ContractFailed(
                f"{what} succeeded where the store held {stored}: it must raise ConflictError ({why})"
            )
        loaded = store.load(attempt.task_id)
        if keeps is None:
            if loaded is not None:
                raise ContractFailed(f"{what} conflicted but still created a checkpoint")
        else:
            _expect_same(
                keeps, loaded,
                f"{what} conflicted but changed the stored checkpoint (a save written in parts, "
                "the messages before the head that holds the version, must write them in the same "
                "transaction as the guarded head, or after the guard passed)",
            )

    refused(Checkpoint(task_id=task_id, goal="again"), "creating (version 0) an existing checkpoint", first)
    second = store.save(first.model_copy(update={"goal": "second"}))
    if second.version != 2:
        raise ContractFailed(f"a save from version 1 returned version {second.version}, not 2")
    refused(first.model_copy(update={"goal": "stale"}), "a save from stale version 1", second)
    refused(second.model_copy(update={"goal": "ahead", "version": 7}), "a save from version 7", second)
    # Far behind, too: a store that compares versions as text (an outside round's Lua
    # script looked for '"version":' .. expected in the stored JSON) refuses a save one
    # version behind, and lets one from version 1 through onto version 12.
    latest = second
    for _ in range(_FAR_AHEAD - latest.version):
        latest = store.save(latest.model_copy(update={"goal": f"save {latest.version + 1}"}))
    if latest.version != _FAR_AHEAD:
        raise ContractFailed(f"{_FAR_AHEAD - 2} saves from version 2, each from the last, ended at version {latest.version}, not {_FAR_AHEAD}")
    for stale in (1, 2, _FAR_AHEAD - 1):
        refused(
            latest.model_copy(update={"goal": "far behind", "version": stale}),
            f"a save from stale version {stale} onto version {_FAR_AHEAD} (compare versions as "
            "numbers: as text, 1 matches 12)",
            latest,
        )
    absent = ctx.task_id("cas-absent")
    refused(Checkpoint(task_id=absent, goal="x", version=3), "a save from version 3 of a missing task", None)
    store.delete(task_id)
    refused(second.model_copy(update={"goal": "after delete"}), "a save from version 2 after delete", None, deleted=True)
    again = store.save(Checkpoint(task_id=task_id, goal="recreated"))
    if again.version != 1:
        raise ContractFailed(f"re-creating a deleted checkpoint returned version {again.version}")
    _check_stamped(store, again)
    return (
        "stale (one and many versions behind), future and create-on-existing saves conflict "
        "and change nothing; a save stamps updated_at"
    )


def _check_stamped(store: CheckpointStore, checkpoint: Checkpoint) -> None:
    """A save stamps ``updated_at`` with its own time, whatever the checkpoint carried: an
    agent saves what it loaded, with the time of the save before, and retention and
    ``python -m reference_agent prune --older-than`` go by it (an outside round's store kept the caller's
    time and was certified)."""
    old = utcnow() - _dt.timedelta(days=1)
    saved = store.save(checkpoint.model_copy(update={"goal": "stamped", "updated_at": old}))
    loaded = store.load(checkpoint.task_id)
    listed = next((s for s in store.list_checkpoints() if s.task_id == checkpoint.task_id), None)
    recent = utcnow() - _dt.timedelta(hours=1)
    for what, stamp in (
        ("the checkpoint save returned", saved.updated_at),
        ("the checkpoint load returned", loaded.updated_at if loaded else None),
        ("the listing's summary", listed.updated_at if listed else None),
    ):
        if stamp is None:
            continue
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=_dt.timezone.utc)
        if stamp < recent:
            raise ContractFailed(
                f"a save of a checkpoint whose updated_at was a day old ({old:%Y-%m-%d %H:%M:%S} UTC) "
                f"kept it: {what} has updated_at {stamp:%Y-%m-%d %H:%M:%S} UTC. A save must set "
                "updated_at to the time of the save (an agent saves what it loaded, with the time "
                "of the save before): retention and 'python -m reference_agent prune --older-than' go "
                "by it, and would delete a task saved minutes ago"
            )


def check_model_based(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    small_text = st.text("abcdeé😀 ", max_size=6)
    names = st.sampled_from(["a", "b", "c"])
    statuses = st.sampled_from(["running", "completed", "failed"])
    metadata = st.fixed_dictionaries({"user": st.sampled_from(["u1", "u2"])}, optional={"n": st.integers(0, 3)})

    class StoreMachine(RuleBasedStateMachine):
        """The store against a dict of what it should hold."""

        def __init__(self) -> None:
            super().__init__()
            self.prefix = ctx.task_id("sm")
            self.model: dict[str, Checkpoint] = {}

        def _task(self, name: str) -> str:
            return f"{self.prefix}-{name}"

        @rule(name=names, goal=small_text, status=statuses, meta=metadata, grow=st.booleans(),
              added=st.integers(1, 3),
              stale=st.sampled_from(["current", "current", "zero", "behind", "ahead"]))
        def save(self, name: str, goal: str, status: Any, meta: dict[str, Any], grow: bool,
                 added: int, stale: str) -> None:
            ctx.check_stop()
            task_id = self._task(name)
            known = self.model.get(task_id)
            current = known.version if known else 0
            version = {"current": current, "zero": 0, "behind": max(current - 1, 0),
                       "ahead": current + 1}[stale]
            history = list(known.messages) if known and grow else [{"role": "user", "content": "start"}]
            # One save may add several messages (a reply and a tool result).
            for _ in range(added):
                history.append({"role": "assistant", "content": f"{goal} #{len(history)}"})
            attempt = Checkpoint(task_id=task_id, goal=goal, status=status, metadata=meta,
                                 messages=history, version=version)
            try:
                saved = store.save(attempt)
            except ConflictError:
                if version == current:
                    raise ContractFailed(
                        f"save of {task_id} from version {version} conflicted, but the stored "
                        f"version is {current}"
                    ) from None
                return
            if version != current:
                raise ContractFailed(
                    f"save of {task_id} from version {version} succeeded, but the stored "
                    f"version was {current}"
                )
            if saved.version != current + 1:
                raise ContractFailed(f"save returned version {saved.version}, not {current + 1}")
            difference = first_difference(_content(attempt), _content(saved))
            if difference:
                raise ContractFailed(f"save of {task_id} returned something other than it was "
                                     "given", difference)
            # The model holds what was given: a store returning what it stored (less) is caught.
            self.model[task_id] = attempt.model_copy(update={"version": saved.version,
                                                             "updated_at": saved.updated_at})

        @rule(name=names)
        def load(self, name: str) -> None:
            ctx.check_stop()
            task_id = self._task(name)
            loaded = store.load(task_id)
            expected = self.model.get(task_id)
            if expected is None:
                if loaded is not None:
                    raise ContractFailed(f"load of {task_id} returned a checkpoint; none should exist")
                return
            _expect_same(expected, loaded, f"load of {task_id}")

        @rule(name=names)
        def delete(self, name: str) -> None:
            ctx.check_stop()
            task_id = self._task(name)
            store.delete(task_id)
            self.model.pop(task_id, None)

        @rule(status=st.one_of(st.none(), statuses),
              meta=st.one_of(st.none(), st.just({}), metadata))
        def list_checkpoints(self, status: Any, meta: dict[str, Any] | None) -> None:
            ctx.check_stop()
            got = [
                (s.task_id, s.version, s.status)
                for s in store.list_checkpoints(status=status, metadata=meta)
                if s.task_id.startswith(self.prefix + "-")
            ]
            want = [
                (c.task_id, c.version, c.status)
                for task_id, c in sorted(self.model.items())
                if (status is None or c.status == status)
                and all(k in c.metadata and c.metadata[k] == v for k, v in (meta or {}).items())
            ]
            if got != want:
                raise ContractFailed(
                    f"list_checkpoints(status={status!r}, metadata={meta!r}) returned {got}, "
                    f"expected {want}"
                )

    test = get_state_machine_test(
        StoreMachine,
        settings=_hypothesis_settings(ctx, stateful_step_count=ctx.budget.state_machine_steps),
    )
    with _hypothesis_failures(ctx, "model_based"):
        seed(ctx.seed)(test)()
    return (
        f"{ctx.budget.examples} programs of up to {ctx.budget.state_machine_steps} "
        "load/save/delete/list steps agree with the reference model"
    )


def _lost_update_verdict(ctx: CertifyContext, contract_id: str, initial: Checkpoint,
                         logs: list[Any], store: CheckpointStore, how: str) -> str:
    final = store.load(initial.task_id)  # the caller passes an instance that did not race
    problems = judge_history(initial, logs, final)
    successes = sum(len(log.successes) for log in logs)
    conflicts = sum(log.conflicts for log in logs)
    if problems:
        errors = [e for log in logs for e in log.errors][:3]
        raise ContractFailed(
            problems[0],
            "\n".join([*problems[1:], f"store errors seen: {errors}" if errors else ""]).strip(),
            ctx.reproduce(contract_id),
        )
    if conflicts == 0:
        # Writers that never collided prove nothing about compare-and-set under a race.
        raise NotCheckable(
            f"{how}: {successes} saves and not one conflict, so the writers never raced "
            "(the lockstep rounds did not line up); run it again",
            needs="writers that race",
        )
    return f"{how}: {successes} acknowledged saves, {conflicts} conflicts, no update lost"


#: Rounds of threads racing to create one task (half of them just after a delete).
CREATE_RACE_ROUNDS = 40
#: Rounds of threads saving one task's metadata alone from one version at once.
METADATA_RACE_ROUNDS = 20
#: Rounds of a delete racing threads that save the task.
DELETE_RACE_ROUNDS = 20
#: The same for processes, each with its own instance.
PROCESS_CREATE_RACE_ROUNDS = 20


def check_concurrent_threads(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    budget = ctx.budget
    # Creates first: threads racing to save one new task from version 0, half the rounds
    # just after a delete of it (two outside rounds' stores let two creates through, or
    # raised their database's unique-key error).
    created = run_create_race(
        store, lambda round_: ctx.task_id(f"create{round_}"), threads=budget.threads,
        rounds=CREATE_RACE_ROUNDS, timeout=budget.contract_timeout / 4,
    )
    if created:
        raise ContractFailed(created[0], "\n".join(created[1:]), ctx.reproduce("lost_update_threads"))
    # Then saves that change the metadata alone, from one version at once.
    raced = run_metadata_race(
        store, ctx.task_id("metadata"), threads=budget.threads, rounds=METADATA_RACE_ROUNDS,
        timeout=budget.contract_timeout / 4,
    )
    if raced:
        raise ContractFailed(raced[0], "\n".join(raced[1:]), ctx.reproduce("lost_update_threads"))
    # Then a delete racing saves of the task: it must be gone afterwards, whoever came first.
    deleted = run_delete_race(
        store, lambda round_: ctx.task_id(f"delete{round_}"), threads=budget.threads,
        rounds=DELETE_RACE_ROUNDS, timeout=budget.contract_timeout / 4,
    )
    if deleted:
        raise ContractFailed(deleted[0], "\n".join(deleted[1:]), ctx.reproduce("lost_update_threads"))
    initial = store.save(Checkpoint(task_id=ctx.task_id("threads"), goal="race"))
    logs = run_thread_writers(
        store, initial.task_id, threads=budget.threads, rounds=budget.saves_per_thread,
        timeout=budget.contract_timeout / 2,
    )
    return _lost_update_verdict(ctx, "lost_update_threads", initial, logs, store,
                                f"{budget.threads} threads on one instance")


def check_concurrent_processes(ctx: CertifyContext) -> str:
    needs_cross_process(ctx)
    namespace = new_namespace()
    store = ctx.new_store(namespace)
    budget = ctx.budget
    # Creates first, as with threads: a lock that holds within one process only (an
    # outside round's store guarded its check-then-write with a threading.Lock) lets two
    # processes' creates through.
    created = run_process_create_race(
        ctx.factory, namespace, store, lambda round_: ctx.task_id(f"pcreate{round_}"),
        processes=budget.processes, rounds=PROCESS_CREATE_RACE_ROUNDS, timeout=budget.contract_timeout / 4,
    )
    if created:
        raise ContractFailed(created[0], "\n".join(created[1:]), ctx.reproduce("lost_update_processes"))
    initial = store.save(Checkpoint(task_id=ctx.task_id("procs"), goal="race"))
    logs = run_process_writers(
        ctx.factory, namespace, initial.task_id, processes=budget.processes,
        rounds=budget.saves_per_process, timeout=budget.contract_timeout / 2,
    )
    # Judge from a new instance: the verdict is about what is stored, and staleness of
    # this instance is the fresh_reads contract's business.
    judge = ctx.new_store(namespace)
    return _lost_update_verdict(ctx, "lost_update_processes", initial, logs, judge,
                                f"{budget.processes} processes, one instance each")


def _kills(ctx: CertifyContext) -> KillExperiment:
    needs_cross_process(ctx)
    return ctx.memo("kills", lambda: run_kill_experiment(ctx))


def check_atomic_under_kill(ctx: CertifyContext) -> str:
    experiment = _kills(ctx)
    judged = 0
    for kill in experiment.rounds:
        where = f"writer killed {kill.delay * 1000:.0f} ms after its first save ({kill.task_id})"
        if kill.load_error:
            raise ContractFailed(
                f"after a {where}, the checkpoint no longer loads: {kill.load_error}",
                reproduce=ctx.reproduce("atomic_under_kill"),
            )
        if kill.mix:
            raise ContractFailed(
                f"after a {where}, the loaded checkpoint mixes two saves", kill.mix,
                ctx.reproduce("atomic_under_kill"),
            )
        if kill.listing:
            listed = kill.listed_versions
            if listed is not None and len(listed) == 1 and kill.loaded_version is not None and listed[0] < kill.loaded_version:
                # Once, at an older version: a listing of stale summaries (an outside
                # round's DISTINCT ON ordered versions up), no debris of the kill.
                cause = (
                    "the listing returns a summary older than what load returns: list each "
                    "task's latest committed record (if listing and fresh_reads fail too, the "
                    "listing is stale whether or not a writer was killed)"
                )
            else:
                cause = (
                    "the save cut short left something the listing picks up (a temporary file "
                    "matched by the listing's pattern, a row or key written before the save "
                    "committed). List exactly what load reads: the committed record of each "
                    "task, once"
                )
            raise ContractFailed(
                f"after a {where}, the task is {kill.listing}: {cause}",
                reproduce=ctx.reproduce("atomic_under_kill"),
            )
        # Evidence is a checkpoint loaded after a kill that landed while the writer saved.
        if kill.loaded_version is not None and not kill.finished_before_kill:
            judged += 1
    if experiment.after_delete:
        if experiment.after_delete.startswith(DELETE_FAILED):
            # An outside round's Redis store took a lock with no expiry: a writer killed
            # while it held it left it held for ever, and every later call met it.
            advice = (
                "delete() must work after a writer was killed in the middle of a save. If it "
                "raised because the task is locked, the lock outlived its holder: a lock must "
                "end with the writer that took it (a database transaction, an flock on an open "
                "file) or expire (a lease: SET key token NX PX ms, with every write checking "
                "the lease is still held); one with no expiry, taken by a killed writer, is "
                "never released. Otherwise delete() trips on what a save cut short leaves (a "
                "temporary file, a row or key outside the task's record)"
            )
        else:
            advice = (
                "delete() must remove everything a task's saves leave, a save cut short included "
                "(a temporary file, a row or key outside the task's record). If delete_idempotent "
                "fails too, delete misses what any save leaves; if only this contract fails, it "
                "misses what a killed save leaves"
            )
        raise ContractFailed(f"{experiment.after_delete}: {advice}", reproduce=ctx.reproduce("atomic_under_kill"))
    if judged == 0:
        raise NotCheckable(
            f"none of {len(experiment.rounds)} kills left a checkpoint to judge (every load "
            "after a kill found nothing, or the writer had finished before it): no evidence "
            "that a save is atomic",
            needs="kills that leave a checkpoint",
        )
    return f"{judged} SIGKILLs mid-save: every load was one whole save"


def check_acknowledged_survive_kill(ctx: CertifyContext) -> str:
    experiment = _kills(ctx)
    judged = 0
    for kill in experiment.rounds:
        if kill.load_error:
            continue  # judged by atomic_under_kill
        judged += 1
        if kill.loaded_version is None or kill.loaded_version < kill.last_ack:
            found = "nothing" if kill.loaded_version is None else f"version {kill.loaded_version}"
            fresh = kill.fresh_version
            if fresh is not None and fresh >= kill.last_ack:
                raise ContractFailed(
                    f"version {kill.last_ack} was acknowledged to the writer; after SIGKILL the "
                    f"instance made before the kill loads {found}, while a new instance loads "
                    f"version {fresh}: the save was durable, but the older instance's view is "
                    "stale (a cache, or a read transaction it never ends: a REPEATABLE READ "
                    "snapshot), and a supervisor resuming the task with it resumes from old "
                    "state (fresh_reads checks stale reads too)",
                    f"task {kill.task_id}, killed {kill.delay * 1000:.0f} ms after its first save",
                    ctx.reproduce("acknowledged_survive_kill"),
                )
            listed = max(kill.listed_versions or (), default=None)
            if listed is not None and listed >= kill.last_ack:
                raise ContractFailed(
                    f"version {kill.last_ack} was acknowledged to the writer; after SIGKILL "
                    f"load returns {found}, while list_checkpoints() shows the task at version "
                    f"{listed}: the save was durable, but load does not return the latest "
                    "version (does it pick the newest row, file or key?)",
                    f"task {kill.task_id}, killed {kill.delay * 1000:.0f} ms after its first save",
                    ctx.reproduce("acknowledged_survive_kill"),
                )
            raise ContractFailed(
                f"version {kill.last_ack} was acknowledged to the writer, but after SIGKILL "
                f"the store holds {found}: the save was acknowledged before it was durable",
                f"task {kill.task_id}, killed {kill.delay * 1000:.0f} ms after its first save",
                ctx.reproduce("acknowledged_survive_kill"),
            )
        if kill.recovery:
            raise ContractFailed(
                f"after SIGKILL {kill.delay * 1000:.0f} ms into a writer's run: {kill.recovery}",
                f"task {kill.task_id}; the checkpoint loaded whole (version "
                f"{kill.loaded_version}) before the new instance saved",
                ctx.reproduce("acknowledged_survive_kill"),
            )
    if judged == 0:
        raise NotCheckable(
            f"no checkpoint loaded after any of {len(experiment.rounds)} kills: no evidence "
            "(see atomic_under_kill)",
            needs="kills that leave a checkpoint",
        )
    return (f"{judged} SIGKILLs: every acknowledged save was there afterwards, and a new "
            "instance's save after each loaded whole")


#: Saves by one instance loaded at once by another, back and forth, in ``fresh_reads``.
FRESH_READ_ROUNDS = 50


def check_fresh_reads(ctx: CertifyContext) -> str:
    _needs_shared(ctx)
    namespace = new_namespace()
    first, second = ctx.new_store(namespace), ctx.new_store(namespace)
    task_id = ctx.task_id("fresh")
    one = first.save(Checkpoint(task_id=task_id, goal="one"))
    # Listed first by an instance that has never touched the task: a worker started to
    # pick up orphans knows nothing but what the listing tells it.
    _expect_listed(ctx.new_store(namespace), task_id, 1, "a new instance listing a task another saved")
    _expect_same(one, second.load(task_id), "a second instance reading a save")
    two = first.save(one.model_copy(update={"goal": "two"}))
    _expect_same(two, second.load(task_id), "a second instance reading a later save (stale read)")
    three = second.save(two.model_copy(update={"goal": "three"}))
    _expect_same(three, first.load(task_id), "the first instance reading the second's save")
    _expect_listed(first, task_id, 3, "the first instance listing after the second's save")
    _expect_listed(ctx.new_store(namespace), task_id, 3, "a new instance listing a task two others saved")
    # Then saves and loads back and forth, each load at once: a replica or cache that lags
    # by a few milliseconds is missed by one try now and then, seldom by all of these.
    current = three
    for round_ in range(FRESH_READ_ROUNDS):
        writer, reader = (first, second) if round_ % 2 == 0 else (second, first)
        current = writer.save(current.model_copy(update={"goal": f"round {round_}"}))
        _expect_same(current, reader.load(task_id),
                     f"round {round_ + 1} of {FRESH_READ_ROUNDS} of saves by one instance loaded at once "
                     "by the other (stale read: a load must see every save acknowledged before it)")
    first.delete(task_id)
    if second.load(task_id) is not None:
        raise ContractFailed("after one instance deleted the task, another still loads it")
    _expect_listed(second, task_id, None, "after one instance deleted the task, another listing")
    return ("saves and deletes by one instance are seen by the next load and listing of another, "
            f"and by a new instance's listing; {FRESH_READ_ROUNDS} saves loaded at once by the other instance")


def _expect_listed(store: CheckpointStore, task_id: str, version: int | None, what: str) -> None:
    """``task_id`` is listed by ``store`` at ``version`` (``None``: not listed)."""
    found = [s.version for s in store.list_checkpoints() if s.task_id == task_id]
    want = [] if version is None else [version]
    if found != want:
        shown = "does not list it" if not found else f"lists it at version(s) {found}"
        expected = "not listed" if version is None else f"listed once at version {version}"
        raise ContractFailed(f"{what}: it {shown}; it should be {expected}")


def check_aba_recreated(ctx: CertifyContext) -> str:
    _needs_shared(ctx)
    namespace = new_namespace()
    stale, other = ctx.new_store(namespace), ctx.new_store(namespace)
    task_id = ctx.task_id("aba")

    def said(who: str, i: int) -> dict[str, Any]:
        # Same lengths and shapes for both writers: only the text tells them apart.
        return {"role": "user" if i % 2 == 0 else "assistant", "content": f"{who}{i}"}

    mine = stale.save(Checkpoint(task_id=task_id, goal="A", messages=[said("a", 0)]))
    mine = stale.save(mine.model_copy(update={"messages": [said("a", 0), said("a", 1)]}))
    # A third instance has read the task (a supervisor's, say): whatever it keeps of that
    # read must not outlive the task.
    reader = ctx.new_store(namespace)
    reader.load(task_id)
    other.delete(task_id)
    left = other.load(task_id)
    if left is not None:
        raise ContractFailed(
            f"after delete(), the same instance still loads the task (version {left.version}): "
            "delete did not remove it, so it cannot be re-created (delete_idempotent and "
            "compare_and_set check delete too)"
        )
    theirs = other.save(Checkpoint(task_id=task_id, goal="B", messages=[said("b", 0)]))
    theirs = other.save(theirs.model_copy(update={"messages": [said("b", 0), said("b", 1)]}))
    seen = reader.load(task_id)
    if seen is None or seen.messages != theirs.messages:
        shown = None if seen is None else [m.get("content") for m in seen.messages]
        raise ContractFailed(
            f"instance C loaded the task as [a0, a1] (version {mine.version}); instance B deleted "
            f"it and re-created it up to version {theirs.version} as [b0, b1]; C then loads "
            f"{'nothing' if seen is None else f'{shown} (version {seen.version})'}: a read of C's "
            "serves what C saw before, though the task was deleted and made again. A cache "
            "checked by version alone does this (the re-created task reached the same "
            "version): check the lineage token too, or drop the cache. So does a read "
            "snapshot that outlives the read (a REPEATABLE READ transaction left open, as "
            "a driver with autocommit off does after a SELECT): end the transaction after "
            "each load (fresh_reads checks stale reads of other writers' saves)"
        )
    # The stale instance saves from the version it knows, which is again the stored one.
    attempt = mine.model_copy(update={"goal": "A again",
                                      "messages": [said("a", 0), said("a", 1), said("a", 2)]})
    story = (f"instance A saved [a0, a1] as version {mine.version}; instance B deleted the task "
             f"and re-created it up to version {theirs.version} as [b0, b1]; A then saved "
             f"[a0, a1, a2] from version {mine.version}")
    judge = ctx.new_store(namespace)
    try:
        saved = stale.save(attempt)
    except ConflictError:
        _expect_same(theirs, judge.load(task_id), f"{story}, which conflicted, yet the store changed")
        return "a stale instance's save onto a re-created task conflicted and changed nothing"
    loaded = judge.load(task_id)
    if loaded is not None and loaded.messages != attempt.messages:
        shown = [m.get("content") for m in loaded.messages]
        contents = [str(c) for c in shown]
        mixed = any(c.startswith("a") for c in contents) and any(c.startswith("b") for c in contents)
        why = (
            "a mix of the two: an append must also check that the stored history is the one "
            "the instance saw (a lineage token), not only its version and length"
            if mixed
            else "not the history A saved, nor a mix of the two: the save went through, but a "
            "new instance loads another record (does load pick the latest save, by version?)"
        )
        raise ContractFailed(f"{story}, which succeeded; the stored history is {shown}, {why}")
    _expect_same(attempt.model_copy(update={"version": saved.version}), loaded, story)
    return "a stale instance's save onto a re-created task rewrote the history whole"


def check_corruption_reported(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    hooks = ctx.hooks(store)
    if hooks.corrupt is None:
        raise NotCheckable(
            "the store offers no certify_corrupt(task_id) hook, so the suite cannot damage its "
            "stored bytes: add a method certify_corrupt(self, task_id) that overwrites the stored "
            "checkpoint of task_id with undecodable bytes (see Hooks in the certify docs)",
            needs="a certify_corrupt(task_id) hook",
        )
    task_id = ctx.task_id("corrupt")
    store.save(Checkpoint(task_id=task_id, goal="to be damaged", messages=[{"role": "user", "content": "hi"}]))
    try:
        hooks.corrupt(task_id)
        try:
            loaded = store.load(task_id)
        except CorruptCheckpointError:
            pass
        except Exception as exc:
            raise ContractFailed(
                f"loading damaged data raised {type(exc).__name__}, not CorruptCheckpointError: {exc}"
            ) from None
        else:
            what = ("None (as if there were no checkpoint)" if loaded is None
                    else "a checkpoint (did certify_corrupt damage the stored bytes?)")
            raise ContractFailed(
                f"loading damaged data returned {what}: it must raise CorruptCheckpointError, or "
                "the agent silently restarts from zero"
            )
    finally:
        # Damaged data may not list: delete it here rather than leave it to the clean-up.
        with contextlib.suppress(Exception):
            store.delete(task_id)
    return "damaged data raises CorruptCheckpointError"


def check_newer_schema_refused(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    hooks = ctx.hooks(store)
    if hooks.bump_schema is None:
        raise NotCheckable(
            "the store offers no certify_bump_schema(task_id) hook, so the suite cannot write a "
            "newer schema version: add a method certify_bump_schema(self, task_id) that rewrites "
            "the stored head of task_id with schema_version + 1 (see Hooks in the certify docs)",
            needs="a certify_bump_schema(task_id) hook",
        )
    task_id = ctx.task_id("schema")
    store.save(Checkpoint(task_id=task_id, goal="from the future"))
    newer = SCHEMA_VERSION + 1
    try:
        hooks.bump_schema(task_id)
        try:
            loaded = store.load(task_id)
        except UnsupportedSchemaVersionError:
            pass
        except Exception as exc:
            raise ContractFailed(
                f"loading schema_version {newer} raised {type(exc).__name__}, not "
                f"UnsupportedSchemaVersionError: {exc}"
            ) from None
        else:
            what = "None" if loaded is None else f"a checkpoint (schema_version {loaded.schema_version})"
            raise ContractFailed(
                f"loading a checkpoint written with schema_version {newer} returned {what}: "
                "it must be refused, since this code cannot know what the newer fields mean"
            )
        _check_listing_refuses_newer(store, task_id, newer)
    finally:
        with contextlib.suppress(Exception):
            store.delete(task_id)
    return (f"schema_version {newer} raises UnsupportedSchemaVersionError from load and from "
            "list_checkpoints")


def _check_listing_refuses_newer(store: CheckpointStore, task_id: str, newer: int) -> None:
    """Listing a head of a newer schema raises too: its status and metadata are unknown."""
    try:
        listed = store.list_checkpoints()
    except UnsupportedSchemaVersionError:
        return
    except Exception as exc:
        raise ContractFailed(
            f"listing a store holding a checkpoint written with schema_version {newer} raised "
            f"{type(exc).__name__}, not UnsupportedSchemaVersionError: {exc}"
        ) from None
    what = ("listed it as if it could read it" if any(s.task_id == task_id for s in listed)
            else "left it out without a word")
    raise ContractFailed(
        f"listing a store holding a checkpoint written with schema_version {newer} {what}: "
        "list_checkpoints must raise UnsupportedSchemaVersionError, as load does (a worker "
        "picking up orphans would act on a status and metadata this code cannot know the "
        "meaning of)"
    )


def check_no_aliasing(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    task_id = ctx.task_id("alias")
    original = Checkpoint(task_id=task_id, goal="g", messages=[{"role": "user", "content": "hi"}],
                          metadata={"user": "u1"}, artifacts={"list": [1]})
    snapshot = original.model_copy(deep=True)
    saved = store.save(original)
    expected = snapshot.model_copy(update={"version": saved.version})

    def scribble(checkpoint: Checkpoint, tag: str) -> None:
        checkpoint.messages.append({"role": "assistant", "content": tag})
        checkpoint.messages[0]["content"] = tag
        checkpoint.metadata["user"] = tag
        checkpoint.artifacts["list"].append(tag)
        checkpoint.completed_tasks.append(tag)

    scribble(original, "mutated the object passed to save")
    _expect_same(expected, store.load(task_id), "after mutating the object passed to save")
    scribble(saved, "mutated the object save returned")
    _expect_same(expected, store.load(task_id), "after mutating the object save returned")
    loaded = store.load(task_id)
    assert loaded is not None
    scribble(loaded, "mutated a loaded object")
    _expect_same(expected, store.load(task_id), "after mutating a loaded object")
    return "objects passed to save, returned by save and returned by load share nothing"


def check_delete(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    task_id = ctx.task_id("delete")
    try:
        store.delete(task_id)
    except Exception as exc:
        raise ContractFailed(f"deleting a missing checkpoint raised {type(exc).__name__}: {exc}") from None
    # Saved three times, as a task is: a store that keeps a record per save (an append-only
    # table of versions) must delete every one of them.
    saved = store.save(Checkpoint(task_id=task_id, goal="doomed", messages=[{"role": "user", "content": "x"}]))
    for _ in range(2):
        saved = store.save(saved.model_copy(update={"iteration": saved.iteration + 1}))
    try:
        store.delete(task_id)
    except Exception as exc:
        raise ContractFailed(f"deleting a saved checkpoint raised {type(exc).__name__}: {exc}") from None
    try:
        left = store.load(task_id)
        if left is not None:
            raise ContractFailed(
                f"load returned a checkpoint (version {left.version} of the 3 saved) after it was "
                "deleted: delete must remove every version, row or key the task's saves left"
            )
    except ContractFailed:
        raise
    except Exception as exc:
        raise ContractFailed(
            f"after a delete, loading the task raised {type(exc).__name__}: delete must remove "
            "everything the task stored (its head and its messages, every key or row of it), "
            "so that load returns None; what it left reads as a damaged checkpoint",
            f"{type(exc).__name__}: {exc}",
        ) from None
    try:
        store.delete(task_id)
    except Exception as exc:
        raise ContractFailed(f"deleting twice raised {type(exc).__name__}: {exc}") from None
    if any(s.task_id == task_id for s in store.list_checkpoints()):
        raise ContractFailed("a deleted checkpoint is still listed")
    try:
        again = store.save(Checkpoint(task_id=task_id, goal="reborn"))
        loaded = store.load(task_id)
    except Exception as exc:
        raise ContractFailed(
            f"re-creating a deleted task (a save at version 0, then a load) raised "
            f"{type(exc).__name__}: what the delete left of the old checkpoint (its messages, "
            "say) met the new one; delete must remove every key or row of the task",
            f"{type(exc).__name__}: {exc}",
        ) from None
    _expect_same(again, loaded, "a checkpoint re-created after delete")
    if loaded is not None and loaded.messages:
        raise ContractFailed("a re-created checkpoint still holds the deleted one's messages")
    return "deleting missing, existing and deleted checkpoints works; re-creation starts clean"


def check_listing(ctx: CertifyContext) -> str:
    namespace = new_namespace()
    store = ctx.new_store(namespace)
    prefix = ctx.task_id("list")
    rows: list[tuple[str, CheckpointStatus, dict[str, Any]]] = [
        ("b", "running", {"user": "u1", "team": "x"}),
        ("a", "completed", {"user": "u1"}),
        ("c", "failed", {"user": "u2", "team": "x"}),
        ("d", "running", {"user": "u2", "n": 2**60}),
        # Equality, key by key, of any JSON value: a null is a value (a missing key is not
        # it), an object or array equals only an equal one (SQL containment is wider), a
        # key holding a dot is one key (not a path).
        ("e", "completed", {"owner": None, "cfg": {"a": 1, "b": 2}, "team.name": "x", "tags": ["p", "q"]}),
        ("f", "failed", {"cfg": {"a": 1, "b": 2, "c": 3}, "tags": ["p"], "team": {"name": "x"}}),
    ]
    saved = {}
    for name, status, metadata in rows:
        checkpoint = Checkpoint(task_id=f"{prefix}-{name}", status=status, metadata=metadata, iteration=3)
        saved[name] = store.save(checkpoint)
    saved["b"] = store.save(saved["b"].model_copy(update={"iteration": 4}))

    def names(**filters: Any) -> list[str]:
        return [
            s.task_id.rsplit("-", 1)[1]
            for s in store.list_checkpoints(**filters)
            if s.task_id.startswith(prefix + "-")
        ]

    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({}, ["a", "b", "c", "d", "e", "f"]),
        ({"status": "running"}, ["b", "d"]),
        ({"metadata": {"user": "u1"}}, ["a", "b"]),
        ({"metadata": {"team": "x"}}, ["b", "c"]),
        ({"metadata": {"owner": None}}, ["e"]),
        ({"metadata": {"cfg": {"b": 2, "a": 1}}}, ["e"]),
        ({"metadata": {"tags": ["p"]}}, ["f"]),
        ({"metadata": {"team.name": "x"}}, ["e"]),
        ({"metadata": {"team": {"name": "x"}}}, ["f"]),
        ({"status": "running", "metadata": {"team": "x"}}, ["b"]),
        ({"metadata": {"user": "u1", "team": "x"}}, ["b"]),
        ({"metadata": {"n": 2**60}}, ["d"]),
        ({"metadata": {"user": "nobody"}}, []),
        ({"status": "completed", "metadata": {"user": "u2"}}, []),
    ]
    for filters, want in cases:
        got = names(**filters)
        if got != want:
            raise ContractFailed(
                f"list_checkpoints({filters}) returned {got}, expected {want} (ordered by task_id). "
                "A metadata filter matches a task when every key it names is present with an "
                "equal value: null only where the key holds null, an object or array only where "
                "it is equal (not contains it), a key with a dot as one key"
            )
    summaries = {s.task_id: s for s in store.list_checkpoints() if s.task_id.startswith(prefix + "-")}
    b = summaries[f"{prefix}-b"]
    if (b.version, b.iteration, b.status, b.metadata) != (2, 4, "running", {"user": "u1", "team": "x"}):
        raise ContractFailed(f"the listing summary of task b is stale or wrong: {b}")
    if not isinstance(b.updated_at, _dt.datetime):
        raise ContractFailed("the listing summary has no updated_at")
    many = _many_listed(ctx, store, prefix)
    apart = _namespaces_apart(ctx, prefix, saved["b"].task_id) + _namespace_prefixes(ctx, store, namespace)
    return f"{len(cases)} status/metadata filters return the right tasks in task_id order{many}{apart}"


def _many_listed(ctx: CertifyContext, store: CheckpointStore, prefix: str) -> str:
    """Every task is listed, however many: a listing that reads one page (a query with a
    ``LIMIT``, one ``SCAN`` or S3 ``ListObjects`` call) drops the rest, and a metadata
    filter applied to that page misses the matches past it (an outside round's store
    listed 100 tasks of 101 and was certified)."""
    count = ctx.budget.listed_tasks
    ids = [f"{prefix}-m{i:05d}" for i in range(count)]
    late = set(ids[-3:])
    for task_id in ids:
        ctx.check_stop()
        store.save(Checkpoint(task_id=task_id, goal="many", metadata={"late": True} if task_id in late else {}))
    try:
        listed = [s.task_id for s in store.list_checkpoints() if s.task_id.startswith(prefix + "-m")]
        matched = [s.task_id for s in store.list_checkpoints(metadata={"late": True}) if s.task_id.startswith(prefix + "-m")]
        shown = set(listed)
        missing = [task_id for task_id in ids if task_id not in shown]
        still_loads = bool(missing) and store.load(missing[-1]) is not None
    finally:
        for task_id in ids:
            store.delete(task_id)
    if listed != ids:
        if missing:
            raise ContractFailed(
                f"of {count} tasks saved, list_checkpoints() returned {len(ids) - len(missing)}: "
                f"{len(missing)} are missing ({missing[0]!r}, ...). "
                + (
                    "The last missing one still loads: the listing stops after a page (a query "
                    "with a LIMIT, a single SCAN or S3 ListObjects call whose continuation is "
                    "not followed). List every task, page by page, or a worker never sees the "
                    "orphaned tasks past the first page"
                    if still_loads
                    else "The last missing one does not load either: saves acknowledged one by "
                    "one were lost"
                )
            )
        raise ContractFailed(
            f"list_checkpoints() returned the {count} tasks saved out of task_id order or more "
            "than once (a page read twice?): list each task once, ordered by task_id"
        )
    if matched != sorted(late):
        raise ContractFailed(
            f"list_checkpoints(metadata={{'late': True}}) returned {len(matched)} of the 3 tasks "
            f"that match, the last 3 of {count} saved: the filter is applied to one page of the "
            "listing, not to every task. Filter in the query, or read every page before filtering"
        )
    return f"; all {count} tasks saved are listed, and a filter finds the last ones"


def _namespace_prefixes(ctx: CertifyContext, shorter: CheckpointStore, namespace: str) -> str:
    """Namespaces one of which begins with the other are kept apart: a store that puts
    its namespace before the task id with no separator (a key ``namespace + task_id``)
    gives task ``'0' + t`` of namespace ``n`` the key of task ``t`` of namespace ``n0``,
    so a delete in one erases the other's checkpoint (an outside round's DynamoDB store;
    every namespace certification made had the same length, and it was certified)."""
    if not ctx.factory.takes_namespace:
        return ""
    longer = ctx.new_store(namespace + "0")
    task_id = ctx.task_id("prefixed")
    alias = "0" + task_id
    longer.save(Checkpoint(task_id=task_id, goal="another namespace's task"))
    problem = None
    try:
        try:
            listed = [s.task_id for s in shorter.list_checkpoints() if s.task_id in (alias, task_id)]
            loaded = shorter.load(alias)
        except Exception as exc:
            problem = f"its listing or load raised {type(exc).__name__}: {exc}"
        else:
            if listed or loaded is not None:
                problem = f"it {'lists ' + repr(listed[0]) if listed else 'loads ' + repr(alias)}"
        if problem is None:
            # The alias is no id of this run's: an error on it, left to the runner, would
            # be reported as a damaged checkpoint of someone else's.
            try:
                shorter.delete(alias)
            except Exception as exc:
                problem = f"its delete({alias!r}) raised {type(exc).__name__}: {exc}"
            else:
                if longer.load(task_id) is None:
                    problem = f"its delete({alias!r}) erased that checkpoint"
    finally:
        with contextlib.suppress(Exception):
            longer.delete(task_id)
        with contextlib.suppress(Exception):
            shorter.delete(alias)
    if problem is not None:
        raise ContractFailed(
            f"after a store of namespace {namespace + '0'!r} saved task {task_id!r}, a store of "
            f"namespace {namespace!r} sees it: {problem}. The store joins the namespace and "
            "the task id with no separator, so a namespace that begins with another one's "
            "name shares keys with it. Put a separator that no namespace contains between "
            f"them (a key '{namespace}:' + task_id, a directory per namespace), or a "
            "clean-up job of one tenant deletes another's checkpoints"
        )
    return "; nor does one whose name begins with it"


def _namespaces_apart(ctx: CertifyContext, prefix: str, task_id: str) -> str:
    """A store of another namespace neither lists nor loads this one's tasks (when the
    factory takes a namespace): a listing that ignores it shows another tenant's tasks,
    and a clean-up job that works from the listing deletes them."""
    if not ctx.factory.takes_namespace:
        return " (the factory takes no namespace: namespaces not checked)"
    other = ctx.new_store()
    listed = [s.task_id for s in other.list_checkpoints() if s.task_id.startswith(prefix + "-")]
    if listed and other.load(task_id) is not None:
        raise ContractFailed(
            f"a store made with another namespace lists {len(listed)} task(s) saved in this one "
            f"({listed[0]!r}, ...) and loads {task_id!r}: the namespace scopes nothing. The "
            "factory does not put its namespace into the store's location (a table prefix, a "
            "key prefix, a directory), or the store ignores it; every operation must keep to "
            "it, or a worker or clean-up job of one namespace picks up or deletes another's tasks"
        )
    if listed:
        raise ContractFailed(
            f"a store made with another namespace lists {len(listed)} task(s) saved in this one "
            f"({listed[0]!r}, ...): the listing ignores the namespace. A store's namespace (its "
            "table prefix, key prefix, directory) must scope list_checkpoints too, or a worker "
            "or clean-up job of one namespace picks up or deletes another's tasks"
        )
    if other.load(task_id) is not None:
        raise ContractFailed(
            f"a store made with another namespace loads {task_id!r}, saved in this one: the "
            "namespace does not scope load (two namespaces share their tasks)"
        )
    return "; a store of another namespace neither lists nor loads them"


# -- optional ------------------------------------------------------------------------------


def check_incremental(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    hooks = ctx.hooks(store)
    if "incremental" not in hooks.capabilities:
        raise NotApplicable("the store does not declare incremental saves")
    if hooks.bytes_written is None:
        raise NotCheckable(
            "the store declares incremental saves but exposes no bytes_written counter: add an "
            "int attribute bytes_written that counts the bytes its saves write",
            needs="a bytes_written counter",
        )
    task_id = ctx.task_id("incr")
    message = {"role": "user", "content": "m" * 200}
    message_bytes = len(dumps(message))
    current = store.save(Checkpoint(task_id=task_id, messages=[message] * 10))
    per_save: list[int] = []
    rewrite_cost = 0  # what writing the whole history at every save would have cost
    for _ in range(ctx.budget.incremental_saves):
        before = hooks.bytes_written()
        current = store.save(current.model_copy(update={"messages": [*current.messages, message]}))
        per_save.append(hooks.bytes_written() - before)
        rewrite_cost += message_bytes * len(current.messages)
    total = sum(per_save)
    if total <= 0:
        # A counter that never moves would pass as "writes nothing": no evidence at all.
        raise NotCheckable(
            f"bytes_written did not grow over {len(per_save)} saves: the counter does not count "
            "what the saves write, so their size cannot be judged",
            needs="a bytes_written counter that counts",
        )
    window = max(3, len(per_save) // 10)
    early = sum(per_save[:window]) / window
    late = sum(per_save[-window:]) / window
    last = 10 + len(per_save)
    ctx.figures["incremental_bytes_per_save"] = {"early": round(early), "late": round(late)}
    # Judged over the whole run, so that an occasional compaction is amortised as it
    # is in a real run: a store that rewrites the history writes at least its size.
    if total > rewrite_cost / 2:
        raise ContractFailed(
            f"{len(per_save)} one-message saves (history 10 to {last} messages) wrote "
            f"{total:,} B, {total / rewrite_cost:.0%} of rewriting the whole history each "
            f"time: bytes over a run grow quadratically ({early:.0f} B per save at first, "
            f"{late:.0f} B at the end)"
        )
    return (
        f"{len(per_save)} one-message saves wrote {total / rewrite_cost:.0%} of full "
        f"rewrites; {early:.0f} B per save at 10 messages, {late:.0f} B at {last}"
    )


#: The longest ``info().ttl`` the suite waits out; certify a store built with a shorter one.
MAX_CHECKED_TTL = 10.0


def check_ttl(ctx: CertifyContext) -> str:
    store = ctx.new_store()
    ttl = store.info().ttl
    if ttl is None:
        if "ttl" not in ctx.hooks(store).capabilities:
            raise NotApplicable("the store keeps checkpoints until they are deleted (info().ttl is None)")
        raise NotCheckable(
            "the store declares 'ttl' but info().ttl is None: report the retention in seconds "
            "in StoreInfo.ttl so the suite knows how long to wait"
        )
    if ttl > MAX_CHECKED_TTL:
        raise NotCheckable(
            f"info().ttl is {ttl:g} s, longer than the suite waits ({MAX_CHECKED_TTL:g} s): "
            "certify a store built with a short ttl (ttl=1, or ?ttl=1 in its URL)"
        )
    for attempt in range(3):
        note = _ttl_round(ctx, store, ttl, attempt)
        if note is not None:
            return note
    raise NotCheckable(
        "three attempts ran too slowly to time the ttl windows (a save or a check took longer "
        f"than {0.3 * ttl:.2f} s); certify with a longer ttl"
    )


def _ttl_round(ctx: CertifyContext, store: CheckpointStore, ttl: float, attempt: int) -> str | None:
    """One timed round; ``None`` when the machine was too slow for its windows to hold."""
    import time

    prefix = ctx.task_id(f"ttl{attempt}")
    slack = max(0.25, 0.25 * ttl)
    history = [{"role": "user", "content": "old news"}]
    started = time.monotonic()
    saved = {
        status: store.save(Checkpoint(task_id=f"{prefix}-{status}", status=status, messages=history))
        for status in ("completed", "failed", "running")
    }
    renewed = store.save(Checkpoint(task_id=f"{prefix}-renewed", status="completed"))
    all_saved = time.monotonic()
    time.sleep(max(0.0, started + 0.6 * ttl - time.monotonic()))
    renewing = time.monotonic()
    renewed = store.save(renewed.model_copy(update={"iteration": 1}))
    time.sleep(max(0.0, all_saved + ttl + slack - time.monotonic()))
    # Listed before loaded: a store that drops what a load finds expired must hide it
    # from listings on its own.
    listed = {s.task_id for s in store.list_checkpoints() if s.task_id.startswith(prefix)}
    listed_completed = {
        s.task_id for s in store.list_checkpoints(status="completed") if s.task_id.startswith(prefix)
    }
    loaded = {name: store.load(f"{prefix}-{name}") for name in ("completed", "failed", "running", "renewed")}
    if time.monotonic() >= renewing + ttl:  # the renewal may have expired too: no verdict
        return None
    for status in ("completed", "failed"):
        task_id = f"{prefix}-{status}"
        if loaded[status] is not None:
            raise ContractFailed(
                f"a {status} checkpoint still loads {ttl + slack:.2f} s after its last save with "
                f"ttl={ttl:g} s: expired checkpoints must be gone from load"
            )
        if task_id in listed:
            raise ContractFailed(f"an expired {status} checkpoint is still listed")
    if loaded["running"] is None or f"{prefix}-running" not in listed:
        raise ContractFailed(
            "a running checkpoint expired: a running task must never expire (its resume would "
            "start over and repeat every irreversible action it had done)"
        )
    _expect_same(saved["running"], loaded["running"], "a running checkpoint older than the ttl")
    if loaded["renewed"] is None or f"{prefix}-renewed" not in listed_completed:
        raise ContractFailed(
            f"a completed checkpoint saved again {renewing - started:.2f} s later expired "
            f"{ttl + slack:.2f} s after its first save: the ttl counts from the last save"
        )
    _expect_same(renewed, loaded["renewed"], "a completed checkpoint renewed by a save")
    stale = saved["completed"]
    try:
        store.save(stale)
    except ConflictError:
        pass
    else:
        raise ContractFailed(
            f"a save expecting version {stale.version} of an expired checkpoint succeeded: "
            "an expired checkpoint is absent, so only version 0 may create it"
        )
    reborn = store.save(Checkpoint(task_id=stale.task_id, goal="again"))
    again = store.load(stale.task_id)
    _expect_same(reborn, again, "a checkpoint re-created after it expired")
    if again is not None and again.messages:
        raise ContractFailed("a checkpoint re-created after it expired still holds the expired one's messages")
    return (
        f"ttl={ttl:g} s: completed and failed checkpoints gone {ttl + slack:.2f} s after their last "
        "save, a running one kept, a re-saved one renewed, an expired one re-created at version 1"
    )


CONTRACTS: tuple[Contract, ...] = (
    Contract("round_trip", "Round-trip fidelity", True,
             "An agent resumes from exactly what it saved: unicode, emoji, big integers, deep "
             "tool inputs and every content block type come back unchanged (a thinking block "
             "altered by one byte is rejected by the API); saves that edit, replace or drop "
             "stored messages keep the change. Lone surrogates are refused at save "
             "with ValueError, storing nothing.", check_round_trip),
    Contract("compare_and_set", "Compare-and-set", True,
             "The version is the fencing token that stops two resumers from erasing each "
             "other: a stale save must conflict and change nothing; version 0 creates only.",
             check_compare_and_set),
    Contract("model_based", "Model-based (state machine)", True,
             "Random programs of load/save/delete/list agree with a reference model at every "
             "step, catching bugs no hand-written sequence thought of.", check_model_based),
    Contract("lost_update_threads", "No lost update (threads)", True,
             "Threads sharing one instance race to create a task (one create wins, the others "
             "conflict, after a delete too), save a task while it is deleted (it stays deleted), "
             "then race load-modify-save: every acknowledged save "
             "is in the final history, no two succeed from the same version.",
             check_concurrent_threads),
    Contract("lost_update_processes", "No lost update (processes)", True,
             "Separate processes with their own instances race to create a task, then race "
             "load-modify-save (a note in the metadata every fourth round): the same checks.",
             check_concurrent_processes),
    Contract("atomic_under_kill", "Atomic under SIGKILL", True,
             "A writer killed mid-save leaves the old checkpoint or the new one, whole: never a "
             "mix of the two, never one that fails to load.", check_atomic_under_kill),
    Contract("acknowledged_survive_kill", "Acknowledged saves survive a crash", True,
             "Once save returns, the agent acts on it (it sends the e-mail): a save "
             "acknowledged and then lost to a crash means the action is repeated. The save "
             "a new instance makes after the crash must load whole too.",
             check_acknowledged_survive_kill),
    Contract("fresh_reads", "No stale reads across instances", True,
             "A worker resuming a task must see the latest save by any other instance, not a "
             "cached copy; a new instance's listing shows tasks other instances saved.",
             check_fresh_reads),
    Contract("aba_recreated", "No mixed history after delete and re-create", True,
             "An instance that saved a task, then saves again after another instance deleted "
             "it and re-created it to the same version and length, must conflict or rewrite "
             "the history whole, never graft its new messages onto the other history.",
             check_aba_recreated),
    Contract("corruption_reported", "Corruption reported", True,
             "Damaged data raises CorruptCheckpointError; returning None would restart the "
             "task from zero and repeat its actions.", check_corruption_reported),
    Contract("newer_schema_refused", "Newer schema refused", True,
             "A checkpoint written by newer code is refused by load and by listing, not "
             "half-read.",
             check_newer_schema_refused),
    Contract("no_aliasing", "No aliasing", True,
             "Objects handed to save, returned by save or by load share nothing with stored "
             "state: mutating them changes nothing stored.", check_no_aliasing),
    Contract("delete_idempotent", "Delete is idempotent", True,
             "Deleting a missing or deleted checkpoint is not an error; a re-created one "
             "starts clean.", check_delete),
    Contract("listing", "Listing filters", True,
             "Listing by status and metadata (workers picking up orphans) returns exactly the "
             "matching tasks, ordered by task_id, with current summaries; a store of another "
             "namespace neither lists nor loads them.", check_listing),
    Contract("task_id_fidelity", "Task ids kept apart", True,
             "Every task id names its own checkpoint: ids that differ only in case, spaces, "
             "Unicode normalisation, '/' against '_', path segments, a 4-byte character or "
             "the end of a long id are never merged (a merge makes one task resume another "
             "task's checkpoint), are loaded and listed exactly as spelled, and deleting one "
             "leaves the others.", check_task_id_fidelity),
    Contract("incremental", "Incremental saves", False,
             "Declared by info().incremental: a one-message save writes about one message, "
             "so bytes over a run grow linearly, not quadratically.", check_incremental),
    Contract("durable_restart", "Durable across a server restart", False,
             "Declared by info().durable: acknowledged saves survive a restart of the server "
             "(a private one the suite starts) and a reconnect.", check_durable_restart),
    Contract("ttl", "Time-to-live / retention", False,
             "Declared by info().ttl: finished (completed, failed) checkpoints are gone from "
             "load and listings ttl seconds after their last save, so finished work does not "
             "pile up; running ones never expire, since a resume that finds nothing repeats "
             "every irreversible action.", check_ttl),
)


def contract_by_id(contract_id: str) -> Contract:
    """The contract named ``contract_id`` (``KeyError`` listing the names otherwise)."""
    for contract in CONTRACTS:
        if contract.id == contract_id:
            return contract
    raise KeyError(f"no contract {contract_id!r}; contracts: {', '.join(c.id for c in CONTRACTS)}")
