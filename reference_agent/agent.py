"""The checkpointed agent loop: resume where a crash left off, act exactly once.

:func:`run` asks the model, appends its reply, runs the tools it asked for, appends their
results, and repeats, saving a checkpoint as it goes:

- **Resume.** It loads the task's checkpoint (a load error propagates: damage is never
  mistaken for "no checkpoint"), returns the stored answer of a completed task without
  any model or tool call, repairs the history, settles the calls a crash left pending,
  and continues with the iteration count already spent.
- **Saves.** After every model reply and tool batch (every ``checkpoint_every``
  iterations), always before and after an irreversible action, and on completion.
  A failing routine save is reported and the run goes on (the next save carries the
  state); a lost compare-and-set (:class:`~stores.ConflictError`) stops the run: another
  worker owns the task.
- **Irreversible tools** follow a write-ahead protocol in ``checkpoint.actions``: the
  intent (tool_use id, name, input, idempotency key) is saved before the effect, the
  outcome after it. An intent that cannot be saved blocks the action. On resume an intent
  without an outcome is re-run with the same key when the tool honours keys, and
  otherwise answered with an error saying the outcome is UNKNOWN and must be verified.

>>> from reference_agent.offline import FakeMessagesAPI
>>> from reference_agent.scripted import Plan, PlanModel
>>> from reference_agent.toolbox import Toolbox
>>> from stores import open_store
>>> api = FakeMessagesAPI(PlanModel(Plan(steps=(), final_answer="done")))
>>> run("t1", "say done", client=api.client(), store=open_store("memory://"),
...     tools=Toolbox([]))
'done'
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from opentelemetry import trace

from stores import (
    ActionRecord,
    Checkpoint,
    CheckpointStore,
    ConflictError,
    CorruptCheckpointError,
    RecordedResult,
    StoreError,
    UnstorableCheckpointError,
)
from stores.checkpoint import utcnow

from .errors import (
    AgentStoppedError,
    ContextWindowExceededError,
    IntentNotRecordedError,
    IterationBudgetExceededError,
    ModelRefusalError,
    TaskFailedError,
    TaskOwnedElsewhereError,
    UnexpectedStopReasonError,
    UnresumableHistoryError,
)
from .repair import (
    RepairReport,
    answer_pending,
    pending_tool_uses,
    repair_history_report,
    unknown_outcome_result,
)
from .toolbox import Toolbox, ToolResult, UnknownToolError
from .validation import InvalidHistoryError, RequestValidator, validate_messages

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL",
    "SYSTEM_PROMPT",
    "AgentEvent",
    "EventHandler",
    "check_goal",
    "check_task_id",
    "idempotency_key_for",
    "run",
]

#: The Claude model the agent uses when none is named: the one place it is set.
DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_MAX_ITERATIONS = 50
DEFAULT_MAX_TOKENS = 4096

#: Tells a real model what an UNKNOWN OUTCOME result means.
SYSTEM_PROMPT = (
    "You are a careful agent that completes tasks with tools. A tool result that starts "
    "with 'UNKNOWN OUTCOME' means a crash hid whether that action happened: do not repeat "
    "it unless you can first verify that it did not happen; otherwise report it as unknown."
)

# Key in checkpoint.metadata for the loop's own bookkeeping (the rest is the caller's).
_STATE_KEY = "reference_agent"
_TERMINAL_TEXT = ("end_turn", "stop_sequence")

logger = logging.getLogger("reference_agent")
_tracer = trace.get_tracer("reference_agent")


def _tracing_off() -> bool:
    """No tracer provider is set: the tracer delegates to the no-op tracer (it asks again
    at every span, so a provider set later is used from then on)."""
    # ``ProxyTracer._tracer`` is the delegate each of its spans goes to; any other tracer
    # (or an API without the attribute) takes the ordinary path.
    return isinstance(getattr(_tracer, "_tracer", None), trace.NoOpTracer)


@dataclass(frozen=True)
class AgentEvent:
    """Something the loop did, for live progress (the CLI) and tests.

    ``kind`` is one of ``loaded``, ``resumed``, ``repaired``, ``already_completed``,
    ``iteration``, ``model_reply``, ``tool_call``, ``checkpoint_written``,
    ``checkpoint_failed``, ``completed``, ``stopped``.
    """

    kind: str
    task_id: str
    iteration: int
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (one line of ``--json`` output)."""
        return {"event": self.kind, "task_id": self.task_id, "iteration": self.iteration, **self.data}


EventHandler = Callable[[AgentEvent], None]


def idempotency_key_for(task_id: str, tool_use_id: str) -> str:
    """The idempotency key of one tool call: stable across restarts, unique per call.

    >>> idempotency_key_for("t1", "toolu_1") == idempotency_key_for("t1", "toolu_1")
    True
    >>> idempotency_key_for("t1", "toolu_1") != idempotency_key_for("t2", "toolu_1")
    True
    """
    digest = hashlib.sha256(f"{task_id}\x00{tool_use_id}".encode()).hexdigest()
    return f"agentckpt-{digest[:32]}"


def check_task_id(task_id: object) -> str:
    """``task_id`` if it can key a checkpoint; a :class:`ValueError` saying why not otherwise.

    A task id is a non-empty string that is not only whitespace and is valid UTF-8 (a
    command line passes undecodable bytes as lone surrogates, which no store can write).

    >>> check_task_id("report-1")
    'report-1'
    >>> check_task_id("  ")
    Traceback (most recent call last):
    ...
    ValueError: the task id is empty: give a task id that is not blank
    """
    if not isinstance(task_id, str):
        raise ValueError(f"the task id must be a string, not {type(task_id).__name__}")
    if not task_id.strip():
        raise ValueError("the task id is empty: give a task id that is not blank")
    _check_utf8("task id", task_id)
    return task_id


def _check_collaborators(client: object, store: object, tools: object) -> None:
    """A wrong object passed as ``client``, ``store`` or ``tools``: a TypeError that says
    what to pass, before anything is read or written."""
    if not all(callable(getattr(store, name, None)) for name in ("load", "save")):
        raise TypeError(
            f"store must be a checkpoint store (stores.open_store(url)), not {type(store).__name__}"
        )
    if not all(callable(getattr(tools, name, None)) for name in ("definitions", "spec", "call")):
        raise TypeError(
            "tools must be a Toolbox (Toolbox.from_functions(*functions)), not "
            f"{type(tools).__name__}"
        )
    # Only the plain mistakes (None, a key or URL string): a client is not probed, as a
    # stand-in that must not be called (a completed task's re-run) fails on any access.
    if client is None or isinstance(client, str | bytes | int | float):
        raise TypeError(
            "client must be an anthropic.Anthropic client (or FakeMessagesAPI(...).client()), "
            f"not {type(client).__name__}"
        )


def check_goal(goal: object) -> str:
    """``goal`` if it can be the task's first user message; a :class:`ValueError` otherwise.

    The Messages API refuses an empty or blank message, so such a goal would leave a
    checkpoint that fails on every run.

    >>> check_goal("file the report")
    'file the report'
    >>> check_goal("")
    Traceback (most recent call last):
    ...
    ValueError: the goal is empty: say what the agent should do (the model refuses an empty message)
    """
    if not isinstance(goal, str):
        raise ValueError(f"the goal must be a string, not {type(goal).__name__}")
    if not goal.strip():
        raise ValueError(
            "the goal is empty: say what the agent should do (the model refuses an empty message)"
        )
    _check_utf8("goal", goal)
    return goal


def _check_utf8(what: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"the {what} {text!r} is not valid UTF-8 (character {exc.start} is an undecodable "
            f"byte): use a {what} in UTF-8"
        ) from None


_HELD_SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)

#: The C module under ``signal``: ``signal.signal`` and ``signal.getsignal`` turn every
#: handler into their enum, which raises and catches a ValueError for each handler that is
#: a function: 15 us of the 16 the hold below costs around each irreversible call.
_raw_signal: Any
try:
    _raw_signal = importlib.import_module("_signal")
except ImportError:  # pragma: no cover - an interpreter without it
    _raw_signal = signal


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM while an irreversible action is in flight.

    From its intent's save to its outcome's save, a signal is noted and delivered (to the
    handler that was in place) once the outcome is durable, so a graceful stop never
    leaves an effect that happened with its outcome unknown. A second signal of the same
    kind is delivered at once: the way out of a tool that hangs. Only in the main thread
    (where Python runs signal handlers); elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    held: list[int] = []

    def restore() -> None:
        while previous:
            signum, handler = previous.popitem()
            _raw_signal.signal(signum, handler)

    def deliver(signum: int) -> None:
        signal.raise_signal(signum)

    def hold(signum: int, frame: object) -> None:
        if signum in held:
            held.remove(signum)
            restore()
            deliver(signum)
            return
        held.append(signum)

    for signum in _HELD_SIGNALS:
        current = _raw_signal.getsignal(signum)
        # Ignored signals stay ignored; a handler set outside Python cannot be restored.
        if current in (signal.SIG_IGN, None):
            continue
        try:
            previous[signum] = _raw_signal.signal(signum, hold)
        except (ValueError, OSError):  # pragma: no cover - not the main thread after all
            continue
    try:
        yield
    finally:
        restore()
        for signum in dict.fromkeys(held):
            deliver(signum)


def _text_of(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


class _Loop:
    """One run of one task; discarded after a crash (all state is in the store)."""

    def __init__(
        self,
        task_id: str,
        goal: str,
        *,
        client: anthropic.Anthropic,
        store: CheckpointStore,
        tools: Toolbox,
        max_iterations: int,
        checkpoint_every: int,
        model: str,
        max_tokens: int,
        system: str | None,
        metadata: Mapping[str, Any] | None,
        on_event: EventHandler | None,
        save_attempts: int,
        retry_backoff: float,
    ) -> None:
        self.task_id = task_id
        self.goal = goal
        self.client = client
        self.store = store
        self.tools = tools
        self.max_iterations = max_iterations
        self.checkpoint_every = checkpoint_every
        self.model = model
        self.max_tokens = max_tokens
        self.system = system
        self.metadata = dict(metadata or {})
        self.on_event = on_event
        self.save_attempts = save_attempts
        self.retry_backoff = retry_backoff
        self.cp = Checkpoint(task_id=task_id, goal=goal)
        # Each request extends the last: its check reads the new messages only (the prefix
        # is compared, never assumed; this loop never edits a message in place, it appends
        # or replaces).
        self.validator = RequestValidator()
        # States whose save raised a StoreError: one may have landed with its
        # acknowledgement lost, which a later compare-and-set must not mistake for
        # another worker.
        self._unacknowledged: list[dict[str, Any]] = []

    # -- reporting -------------------------------------------------------------------

    def emit(self, kind: str, **data: Any) -> None:
        logger.debug("%s %s", kind, data)
        if self.on_event is not None:
            self.on_event(AgentEvent(kind, self.task_id, self.cp.iteration, data))

    def span(self, name: str, **attributes: Any) -> AbstractContextManager[trace.Span]:
        # The tracer's own context manager, not wrapped in another one: spans are made
        # around every save.
        if _tracing_off():
            current = trace.get_current_span()
            if isinstance(current, trace.NonRecordingSpan):
                # What the no-op tracer would do: make the current (non-recording) span
                # current again, ignore the attributes and end nothing. Skip the work.
                return nullcontext(current)
        return _tracer.start_as_current_span(
            name,
            attributes={
                "agentckpt.task_id": self.task_id,
                "agentckpt.version": self.cp.version,
                "agentckpt.iteration": self.cp.iteration,
                **attributes,
            },
        )

    @property
    def state(self) -> dict[str, Any]:
        value = self.cp.metadata.setdefault(_STATE_KEY, {})
        return cast(dict[str, Any], value)

    # -- saving ----------------------------------------------------------------------

    def save(self, reason: str, *, required: bool = False) -> bool:
        """Save the checkpoint; True when it is durable.

        ``required``: retry with backoff and raise :class:`IntentNotRecordedError` if the
        store stays down. Otherwise a failure is reported and the run goes on.
        """
        attempts = self.save_attempts if required else 1
        attempt = 0
        adopted = False
        while attempt < attempts:
            self.cp.updated_at = utcnow()
            try:
                with self.span("agentckpt.save", **{"agentckpt.save.reason": reason}) as span:
                    saved = self.store.save(self.cp)
                    span.set_attribute("agentckpt.version.saved", saved.version)
            except ConflictError as exc:
                if not adopted and self._adopt_lost_acknowledgement():
                    adopted = True
                    continue
                self.emit("stopped", reason="conflict", error=str(exc))
                # Saved before (a version held) and now nothing stored: deleted meanwhile, not
                # another writer's (a CLI round was told "another writer saved first").
                deleted = exc.actual is None and self.cp.version > 0
                raise TaskOwnedElsewhereError(self.task_id, str(exc), deleted=deleted) from exc
            except UnstorableCheckpointError as exc:
                # The checkpoint's own data, not the store: every save would refuse it, so
                # neither a retry nor going on unsaved helps. Nothing was written.
                self.emit("stopped", reason="unstorable", error=str(exc))
                raise
            except StoreError as exc:
                attempt += 1
                self._unacknowledged = [
                    *self._unacknowledged[-7:],
                    self.cp.model_dump(mode="json", exclude={"version", "updated_at"}),
                ]
                logger.warning("checkpoint save (%s) of %r failed: %s", reason, self.task_id, exc)
                self.emit(
                    "checkpoint_failed", reason=reason, error=str(exc), required=required,
                    attempt=attempt,
                )
                if not required:
                    return False
                if attempt < attempts:
                    time.sleep(self.retry_backoff * 2 ** (attempt - 1))
                continue
            self.cp.version = saved.version
            self.cp.updated_at = saved.updated_at
            self._unacknowledged.clear()
            self.emit("checkpoint_written", reason=reason, version=saved.version)
            return True
        self.emit("stopped", reason="intent_not_recorded")
        raise IntentNotRecordedError(
            self.task_id,
            f"the checkpoint store stayed unavailable for {attempts} attempts while recording "
            f"{reason}; the action was not performed and the task can be resumed",
        )

    def _adopt_lost_acknowledgement(self) -> bool:
        """After a conflict: did one of our failed saves land after all?"""
        if not self._unacknowledged:
            return False
        try:
            stored = self.store.load(self.task_id)
        except StoreError:
            return False
        if stored is None:
            return False
        found = stored.model_dump(mode="json", exclude={"version", "updated_at"})
        if found not in self._unacknowledged:
            return False
        logger.info("a failed save of %r had landed; continuing from version %d",
                    self.task_id, stored.version)
        self.cp.version = stored.version
        self._unacknowledged.clear()
        return True

    def routine_due(self) -> bool:
        return self.checkpoint_every <= 1 or self.cp.iteration % self.checkpoint_every == 0

    # -- the run ---------------------------------------------------------------------

    def run(self) -> str:
        with self.span("agentckpt.load") as span:
            loaded = self.store.load(self.task_id)
            if loaded is not None:
                span.set_attribute("agentckpt.version", loaded.version)
                span.set_attribute("agentckpt.iteration", loaded.iteration)
        if loaded is None:
            self.emit("loaded", found=False)
            return self.start()
        self.cp = loaded
        state = loaded.metadata.get(_STATE_KEY, {})
        if not isinstance(state, dict):
            raise CorruptCheckpointError(
                self.task_id,
                f"metadata[{_STATE_KEY!r}] is a JSON {type(state).__name__}, not an object",
            )
        self.emit("loaded", found=True, version=loaded.version, status=loaded.status)
        if loaded.status == "completed":
            self.emit("already_completed", answer=loaded.final_answer)
            return loaded.final_answer or ""
        if loaded.status == "failed":
            self.revive_or_refuse()
        if loaded.goal != self.goal:
            logger.warning("task %r resumes its stored goal, not the one passed", self.task_id)
        if self.metadata:
            self.cp.metadata.update(self.metadata)
        self.emit(
            "resumed", version=loaded.version, messages=len(loaded.messages),
            pending=[b.get("name") for b in pending_tool_uses(loaded.messages)],
        )
        self.repair()
        return self.loop()

    def start(self) -> str:
        now = utcnow()
        self.cp = Checkpoint(
            task_id=self.task_id,
            goal=self.goal,
            messages=[{"role": "user", "content": self.goal}],
            metadata={**self.metadata, _STATE_KEY: {"model": self.model}},
            created_at=now,
            updated_at=now,
        )
        # Version 0 means "must not exist": a second worker starting the same task loses.
        self.save("start")
        return self.loop()

    def revive_or_refuse(self) -> None:
        reason = str(self.state.get("failure", "unknown reason"))
        if self.state.get("failure_kind") == "budget" and self.cp.iteration < self.max_iterations:
            self.cp.status = "running"
            self.state.pop("failure", None)
            self.state.pop("failure_kind", None)
            return
        self.emit("stopped", reason="failed_before", failure=reason)
        raise TaskFailedError(self.task_id, f"the task failed earlier: {reason}")

    def check_resumable(self, messages: list[dict[str, Any]], report: RepairReport) -> None:
        """Refuse a stored checkpoint no resume can use, before anything is written.

        ``messages`` is the repaired history (``report`` says how). Its calls still
        pending are answered on a copy, and a final assistant reply left out (it completes
        the task, or goes back as it is after ``pause_turn``): what remains must be a
        history the API accepts. Without this check, damage that repair cannot mend (a
        message with no content, a first message that is not the user's) would be saved
        by the repair and then fail every resume. The error names the stored message.
        """
        probe, answered = repair_history_report(messages, self.cp.actions)
        if probe and probe[-1].get("role") == "assistant":
            probe = probe[:-1]
        try:
            validate_messages(probe)
        except InvalidHistoryError as exc:
            origins = [None if o is None else report.origins[o] for o in answered.origins]
            problem = _in_stored_terms(exc, origins, self.cp.messages, probe)
            raise UnresumableHistoryError(self.task_id, problem) from None

    def repair(self) -> None:
        with self.span("agentckpt.repair") as span:
            messages, report = repair_history_report(
                self.cp.messages, self.cp.actions, keep_pending=True
            )
            span.set_attribute("agentckpt.repair.steps", len(report.steps))
        self.check_resumable(messages, report)
        if report.changed:
            self.cp.messages = messages
        if report.steps:
            logger.info("repaired %r: %s", self.task_id, "; ".join(report.describe()))
            self.emit("repaired", **report.to_dict(), lines=report.describe())
        if report.changed:
            self.save("repair")

    def loop(self) -> str:
        # Each pass either makes one model call (bounded by max_iterations) or settles
        # one tool batch, so the loop ends within 2 * max_iterations + 1 passes.
        for _ in range(2 * self.max_iterations + 2):
            if pending_tool_uses(self.cp.messages):
                self.settle_batch()
                continue
            last = self.cp.messages[-1]
            stop_reason = self.state.get("last_stop_reason")
            if last.get("role") == "assistant" and stop_reason != "pause_turn":
                # A final reply saved before a crash hid its completion.
                return self.complete(_text_of(_blocks(last)))
            if self.cp.iteration >= self.max_iterations:
                self.fail(
                    "budget",
                    f"max_iterations={self.max_iterations} reached (the count spans restarts)",
                    IterationBudgetExceededError,
                )
            answer = self.iterate()
            if answer is not None:
                return answer
        raise AssertionError("unreachable: the loop is bounded by max_iterations")

    def iterate(self) -> str | None:
        self.cp.iteration += 1
        self.emit("iteration", max_iterations=self.max_iterations)
        prefill = self.cp.messages[-1].get("role") == "assistant"
        # Fail loudly here rather than with an HTTP 400 from the API.
        self.validator.validate(self.cp.messages, allow_prefill=prefill)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": self.cp.messages,
        }
        if len(self.tools):
            kwargs["tools"] = self.tools.definitions()
        if self.system:
            kwargs["system"] = self.system
        response = self.client.messages.create(**kwargs)
        content = [block.model_dump(mode="json", exclude_unset=True) for block in response.content]
        stop_reason = response.stop_reason
        uses = [b for b in content if b.get("type") == "tool_use"]
        self.emit(
            "model_reply", stop_reason=stop_reason, tool_calls=[b.get("name") for b in uses],
            text=_text_of(content),
        )
        self.state["last_stop_reason"] = stop_reason
        if stop_reason == "max_tokens":
            self.cut_off(content)
            return None
        if stop_reason == "refusal":
            self.fail("refusal", f"the model refused: {_text_of(content)!r}", ModelRefusalError)
        if stop_reason == "model_context_window_exceeded":
            self.fail(
                "context", "the history no longer fits the model's context window",
                ContextWindowExceededError,
            )
        if uses or stop_reason in ("tool_use", "pause_turn"):
            # A reply that calls tools is answered whatever its stop reason says.
            if content:
                self.cp.messages.append({"role": "assistant", "content": content})
            if self.routine_due():
                self.save("model reply")
            return None
        if stop_reason in _TERMINAL_TEXT:
            if content:
                self.cp.messages.append({"role": "assistant", "content": content})
            return self.complete(_text_of(content))
        self.fail(
            "stop_reason", f"unexpected stop_reason {stop_reason!r}", UnexpectedStopReasonError
        )
        raise AssertionError("unreachable")

    def cut_off(self, content: list[dict[str, Any]]) -> None:
        """A reply cut by max_tokens: keep its text, never run its (maybe partial) calls."""
        kept = [b for b in content if b.get("type") != "tool_use"]
        while kept and kept[-1].get("type") in ("thinking", "redacted_thinking"):
            kept.pop()  # the API rejects an assistant message that ends with thinking
        if kept and kept[-1].get("type") == "text":
            text = str(kept[-1].get("text", "")).rstrip()
            kept[-1] = {**kept[-1], "text": text} if text else kept[-1]
            if not text:
                kept.pop()
        dropped = len(content) - len(kept)
        if kept:
            self.cp.messages.append({"role": "assistant", "content": kept})
        note = "Your previous reply was cut off by the max_tokens limit"
        if any(b.get("type") == "tool_use" for b in content):
            note += "; its tool call was incomplete and was NOT executed"
        self.cp.messages.append(
            {"role": "user", "content": note + ". Continue, and repeat any tool call in full."}
        )
        self.emit("model_reply_cut", dropped_blocks=dropped)
        if self.routine_due():
            self.save("model reply (cut off)")

    def settle_batch(self) -> None:
        """Run (or settle from the ledger) every pending call of the last reply."""
        results: list[dict[str, Any]] = []
        for block in pending_tool_uses(self.cp.messages):
            tool_use_id = str(block.get("id"))
            name = str(block.get("name"))
            raw_input = block.get("input")
            tool_input: dict[str, Any] = dict(raw_input) if isinstance(raw_input, Mapping) else {}
            try:
                spec = self.tools.spec(name)
                irreversible, idempotent = spec.irreversible, spec.idempotent
                repeat_safe = spec.repeat_safe
            except UnknownToolError:
                # A tool gone from the toolbox since the call: one with an intent in the
                # ledger was irreversible, and its outcome is unknown (never "no such
                # tool", which would tell the model it never happened).
                irreversible = self.cp.action(tool_use_id) is not None
                idempotent = repeat_safe = False
            if irreversible:
                result = self.irreversible_call(
                    tool_use_id, name, tool_input, idempotent, repeat_safe=repeat_safe
                )
            else:
                result = self.tools.call(name, tool_input)
                self.emit(
                    "tool_call", tool=name, tool_use_id=tool_use_id, irreversible=False,
                    outcome="ran", is_error=result.is_error,
                )
            if tool_use_id not in self.cp.completed_tasks:
                self.cp.completed_tasks.append(tool_use_id)
            results.append(result.to_block(tool_use_id))
        self.cp.messages = answer_pending(self.cp.messages, results)
        if self.routine_due():
            self.save("tool results")

    def irreversible_call(
        self,
        tool_use_id: str,
        name: str,
        tool_input: dict[str, Any],
        idempotent: bool,
        *,
        repeat_safe: bool = False,
    ) -> ToolResult:
        record = self.cp.action(tool_use_id)
        if record is not None and record.state in ("done", "unknown") and record.result:
            self.emit(
                "tool_call", tool=name, tool_use_id=tool_use_id, irreversible=True,
                outcome="from_ledger", is_error=record.result.is_error,
            )
            return ToolResult(record.result.content, record.result.is_error)
        if record is not None and not (idempotent or repeat_safe):
            # Intent without outcome, and a tool that cannot be asked twice safely.
            result = unknown_outcome_result(name, tool_use_id)
            record.state = "unknown"
            record.result = RecordedResult(content=result.content, is_error=True)
            record.recorded_at = utcnow()
            self.emit(
                "tool_call", tool=name, tool_use_id=tool_use_id, irreversible=True,
                outcome="unknown", is_error=True, idempotency_key=record.idempotency_key,
            )
            self.save(f"unknown outcome of {name}")
            return result
        with _signals_held():
            return self.perform(record, tool_use_id, name, tool_input, repeat_safe=repeat_safe)

    def perform(
        self,
        record: ActionRecord | None,
        tool_use_id: str,
        name: str,
        tool_input: dict[str, Any],
        *,
        repeat_safe: bool = False,
    ) -> ToolResult:
        """Intent, effect, outcome: the write-ahead protocol of one irreversible call.

        An intent without an outcome is settled by running the call again: with its
        recorded idempotency key (a keyed tool), or as it is (a repeat-safe tool, whose
        repeat has no second effect).
        """
        outcome = "ran" if record is None else "rerun" if repeat_safe else "rerun_with_key"
        if record is None:
            record = ActionRecord(
                tool_use_id=tool_use_id,
                tool_name=name,
                input=tool_input,
                idempotency_key=idempotency_key_for(self.task_id, tool_use_id),
            )
            self.cp.actions.append(record)
            # Write-ahead: no durable intent, no action.
            self.save(f"intent of {name}", required=True)
        result = self.tools.call(name, tool_input, idempotency_key=record.idempotency_key)
        record.state = "done"
        record.result = RecordedResult(content=result.content, is_error=result.is_error)
        record.recorded_at = utcnow()
        if not result.is_error:
            self.cp.artifacts[tool_use_id] = {"tool": name, "result": result.content}
        if tool_use_id not in self.cp.completed_tasks:
            self.cp.completed_tasks.append(tool_use_id)
        self.emit(
            "tool_call", tool=name, tool_use_id=tool_use_id, irreversible=True, outcome=outcome,
            is_error=result.is_error, idempotency_key=record.idempotency_key,
        )
        self.save(f"outcome of {name}")
        return result

    def complete(self, answer: str) -> str:
        self.cp.status = "completed"
        self.cp.final_answer = answer
        # Retried like an intent: a completion that is not durable would cost a model call
        # on the next run. If the store stays down the answer is still returned.
        try:
            self.save("completed", required=True)
        except IntentNotRecordedError:
            logger.error("task %r completed but its completion could not be saved", self.task_id)
        self.emit("completed", answer=answer)
        return answer

    def fail(self, kind: str, reason: str, error: type[AgentStoppedError]) -> None:
        self.cp.status = "failed"
        self.state["failure"] = reason
        self.state["failure_kind"] = kind
        self.save(f"failed: {kind}")
        self.emit("stopped", reason=kind, failure=reason)
        raise error(self.task_id, reason)


def _in_stored_terms(
    problem: InvalidHistoryError,
    origins: Sequence[int | None],
    stored: Sequence[Mapping[str, Any]],
    repaired: Sequence[Mapping[str, Any]],
) -> InvalidHistoryError:
    """``problem``, found in ``repaired``, with its ``messages.N`` counted in ``stored``.

    ``origins[n]`` is the stored index ``repaired[n]`` was made from (``None``: the repair
    added it). Block indexes of a message the repair changed are those of the repaired one.
    """
    match = re.fullmatch(r"messages\.(\d+)((?:\.\w+)*)", problem.path)
    if match is None or int(match[1]) >= len(origins):
        return problem
    n, rest = int(match[1]), match[2]
    origin = origins[n]
    if origin is None:
        before = next((o for o in reversed(origins[:n]) if o is not None), None)
        after = "at the start" if before is None else f"after stored messages.{before}"
        return InvalidHistoryError(
            problem.path,
            f"in a message the repair added {after}, counted in the repaired history: "
            f"{problem.detail}",
        )
    if rest and origin < len(stored) and stored[origin] != repaired[n]:
        return InvalidHistoryError(
            f"messages.{origin}",
            f"at {rest[1:]} of this message as the repair changed it: {problem.detail}",
        )
    return InvalidHistoryError(f"messages.{origin}{rest}", problem.detail)


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def run(
    task_id: str,
    goal: str,
    *,
    client: anthropic.Anthropic,
    store: CheckpointStore,
    tools: Toolbox,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    checkpoint_every: int = 1,
    model: str = DEFAULT_MODEL,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    system: str | None = SYSTEM_PROMPT,
    metadata: Mapping[str, Any] | None = None,
    on_event: EventHandler | None = None,
    save_attempts: int = 5,
    retry_backoff: float = 0.05,
) -> str:
    """Run task ``task_id`` towards ``goal`` to its final answer, resuming if it was begun.

    ``max_iterations`` bounds model calls over the task's whole life (restarts included).
    ``checkpoint_every``: routine saves after a model reply or tool batch happen every N
    iterations (saves around irreversible actions and on completion always happen).
    ``metadata`` (a user id, ...) is stored with the checkpoint. ``on_event`` receives an
    :class:`AgentEvent` for each step. ``save_attempts`` and ``retry_backoff`` (seconds,
    doubled per attempt) bound the retries of saves that must succeed.

    An empty or blank ``task_id`` or ``goal``, or one that is not valid UTF-8, raises
    :class:`ValueError` before anything is read or written. Ctrl-C (SIGINT) and SIGTERM
    during an irreversible action are held until its outcome is saved, then delivered.

    Raises :class:`~reference_agent.errors.AgentStoppedError` subclasses for a clean stop
    (another worker owns the task, the store is down at an intent, budget exhausted,
    refusal, context window full); store load errors propagate unchanged.

    >>> from reference_agent.offline import FakeMessagesAPI
    >>> from reference_agent.scripted import Plan, PlanModel
    >>> from stores import open_store
    >>> store = open_store("memory://")
    >>> api = FakeMessagesAPI(PlanModel(Plan(steps=(), final_answer="42")))
    >>> run("q", "answer", client=api.client(), store=store, tools=Toolbox([]))
    '42'
    >>> store.load("q").status
    'completed'
    """
    # Refused before anything is written: a bad id or goal would leave a checkpoint
    # that fails on every later run.
    check_task_id(task_id)
    check_goal(goal)
    for name, count in (
        ("max_iterations", max_iterations), ("checkpoint_every", checkpoint_every), ("save_attempts", save_attempts)
    ):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{name} must be an int >= 1, not {count!r}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping (a dict) stored with the checkpoint, not {type(metadata).__name__}")
    if on_event is not None and not callable(on_event):
        raise TypeError(f"on_event must be a function of an AgentEvent, not {type(on_event).__name__}")
    if isinstance(retry_backoff, bool) or not isinstance(retry_backoff, int | float) or not retry_backoff >= 0:
        raise ValueError(f"retry_backoff must be a number of seconds, 0 or more, not {retry_backoff!r}")
    _check_collaborators(client, store, tools)
    loop = _Loop(
        task_id,
        goal,
        client=client,
        store=store,
        tools=tools,
        max_iterations=max_iterations,
        checkpoint_every=checkpoint_every,
        model=model,
        max_tokens=max_tokens,
        system=system,
        metadata=metadata,
        on_event=on_event,
        save_attempts=save_attempts,
        retry_backoff=retry_backoff,
    )
    return loop.run()
