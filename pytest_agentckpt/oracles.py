"""The oracles: what must hold after any sequence of crashes and resumes.

Each oracle is a separate, named check of a :class:`~pytest_agentckpt.timeline.Timeline`
(what the harness saw from outside the agent) against the crash-free run of the same
plan. Each returns the :class:`Violation` objects it finds, with its own message and the
timeline events to mark.

======================================  ========================================================
oracle                                  what it means when it fails
======================================  ========================================================
``valid_sequence``                      the agent sent the model a history the API rejects
                                        (HTTP 400): resume did not repair it
``no_duplicate_effect``                 an irreversible effect happened more often than in the
                                        crash-free run (or, on completion, less often)
``same_answer``                         the resumed run finished with another answer
``iteration_monotone``                  the stored iteration went backwards, or the budget was
                                        reset by a restart
``recorded_work_not_redone``            the agent asked the model again for a reply, or ran a
                                        tool again, whose result a durable checkpoint held
``completed_idempotent``                running a completed task again called the model or a
                                        tool (or answered differently)
======================================  ========================================================

The harness adds two checks of its own: ``crash_free_run`` (the agent fails with no fault
at all) and ``resumes_to_completion`` (after the last fault the agent never finishes).

>>> from pytest_agentckpt.timeline import Timeline
>>> t = Timeline(); _ = t.start_attempt()
>>> _ = t.add("store_save", version=1, iteration=3, status="running", messages=[])
>>> _ = t.add("store_save", version=2, iteration=1, status="running", messages=[])
>>> [v.oracle for v in iteration_monotone(t)]
['iteration_monotone']
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .timeline import Event, Timeline

__all__ = [
    "CHECKS",
    "ORACLES",
    "Baseline",
    "OracleName",
    "ToolFlags",
    "UnsafeTool",
    "Violation",
    "completed_idempotent",
    "iteration_monotone",
    "no_duplicate_effect",
    "recorded_work_not_redone",
    "same_answer",
    "valid_sequence",
]

OracleName = Literal[
    "valid_sequence",
    "no_duplicate_effect",
    "same_answer",
    "iteration_monotone",
    "recorded_work_not_redone",
    "completed_idempotent",
]
ORACLES: tuple[OracleName, ...] = get_args(OracleName)
"""The six oracles of the design, in the order they are checked and reported."""
CHECKS: tuple[str, ...] = ("crash_free_run", *ORACLES, "resumes_to_completion")
"""Every name a violation can carry: the oracles and the harness's own two checks."""


@dataclass(frozen=True)
class ToolFlags:
    """What the oracles need to know of a tool."""

    irreversible: bool
    idempotent: bool


@dataclass
class Violation:
    """One broken oracle: its name, what went wrong, and the events to mark."""

    oracle: str
    message: str
    marks: dict[int, str] = field(default_factory=dict)


@dataclass
class UnsafeTool:
    """A tool whose effect was repeated because no agent could know its outcome.

    Not an agent bug: the tool is irreversible, does not honour idempotency keys, and the
    crash came between its effect and any durable record of it. The fix is in the tool:
    take idempotency keys, or offer a way to check what happened.
    """

    tool: str
    input: dict[str, Any]
    times: int
    expected: int

    def describe(self) -> str:
        return (
            f"tool {self.tool!r} is unsafe: its effect {_short(self.input)} happened {self.times} "
            f"times (crash-free: {self.expected}) because a crash came after the effect and "
            "before any durable record of it; no agent can know that outcome. Make the tool "
            "honour idempotency keys (ToolSpec(idempotent=True)) or give it a way to check "
            "what happened."
        )


@dataclass
class Baseline:
    """The crash-free run of a plan, which the crashed runs are judged against."""

    answer: str | None
    effects: Counter[tuple[str, str]]
    model_turns: int
    timeline: Timeline


def canonical(value: Any) -> str:
    """The canonical JSON of a tool input: equal inputs compare equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _short(value: Any, limit: int = 80) -> str:
    text = canonical(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def effect_counts(timeline: Timeline) -> Counter[tuple[str, str]]:
    """How often each (tool, input) took effect."""
    return Counter((e.data["tool"], canonical(e.data["input"])) for e in timeline.of("effect"))


def model_turns(timeline: Timeline) -> int:
    """Model replies that were built (answered 200), whether or not they arrived."""
    return sum(1 for e in timeline.of("model_response") if e.data.get("status") == 200)


# -- 1 ---------------------------------------------------------------------------------
def valid_sequence(
    timeline: Timeline,
    validate: Callable[..., None],
    *,
    error_type: type[Exception] = ValueError,
) -> list[Violation]:
    """Every request sent to the model passes ``validate`` (the API's rules).

    Reports the first invalid request, with the HTTP 400 the API would answer.
    """
    invalid: list[tuple[Event, Exception]] = []
    for event in timeline.of("model_request"):
        try:
            validate(event.data.get("messages", []), thinking=bool(event.data.get("thinking")))
        except error_type as exc:
            invalid.append((event, exc))
    if not invalid:
        return []
    event, error = invalid[0]
    api_error = f'HTTP 400 {{"type": "invalid_request_error", "message": "{error}"}}'
    message = (
        f"model request #{event.data.get('index')} (attempt {event.attempt}) is not a valid "
        f"message sequence; the API would answer {api_error}. "
        f"{len(invalid)} invalid request(s) in all. The history loaded after a crash was not "
        "repaired: every tool_use needs exactly one tool_result, first in the next user message."
    )
    marks = {e.seq: "INVALID" for e, _ in invalid[:5]}
    marks[event.seq] = f"INVALID: {error}"
    return [Violation("valid_sequence", message, marks)]


# -- 2 ---------------------------------------------------------------------------------
def no_duplicate_effect(
    timeline: Timeline,
    baseline: Baseline,
    tools: Mapping[str, ToolFlags],
    *,
    completed: bool,
) -> tuple[list[Violation], list[UnsafeTool]]:
    """No effect more often than in the crash-free run; exactly those effects on completion.

    An effect performed more often than the model asked for it (distinct ``tool_use`` ids
    in its replies) is always the agent's bug. Otherwise the one excuse is an effect of an
    irreversible tool that does not honour keys, performed just before a crash that came
    before the agent's next durable write: repeated, it makes the tool unsafe, reported
    apart from agent bugs.
    """
    effects: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for event in timeline.of("effect"):
        effects[(event.data["tool"], canonical(event.data["input"]))].append(event)
    asks: dict[tuple[str, str], set[str]] = defaultdict(set)
    for event in timeline.of("model_response"):
        for tool_use_id, name, tool_input in event.data.get("tool_uses", ()):
            asks[(name, canonical(tool_input))].add(tool_use_id)

    unrecorded = _effects_lost_to_crash(timeline)
    violations: list[Violation] = []
    unsafe: list[UnsafeTool] = []
    for key in sorted(set(effects) | set(baseline.effects)):
        tool, raw_input = key
        done = effects.get(key, [])
        n, expected, asked = len(done), baseline.effects.get(key, 0), len(asks.get(key, ()))
        if n > asked and n > expected:
            marks = {e.seq: "DUPLICATE" for e in done[max(asked, expected):]}
            violations.append(
                Violation(
                    "no_duplicate_effect",
                    f"effect {tool}({_short(json.loads(raw_input))}) happened {n} times, but the "
                    f"model asked for it {asked} time(s) (crash-free run: {expected}): the agent "
                    "repeated an action the model asked for once. Record the intent durably "
                    "before an irreversible call and settle it on resume instead of re-running it.",
                    marks,
                )
            )
        elif n > expected:
            flags = tools.get(tool)
            excused = sum(1 for e in done if e.seq in unrecorded)
            if flags is not None and flags.irreversible and not flags.idempotent and n - expected <= excused:
                unsafe.append(UnsafeTool(tool, json.loads(raw_input), n, expected))
                continue
            marks = {e.seq: "DUPLICATE" for e in done[expected:]}
            violations.append(
                Violation(
                    "no_duplicate_effect",
                    f"effect {tool}({_short(json.loads(raw_input))}) happened {n} times; the "
                    f"crash-free run did it {expected} time(s). "
                    + (
                        "The tool honours idempotency keys: resume must pass the same key."
                        if flags is not None and flags.idempotent
                        else "The repeat is not explained by a crash between the effect and a "
                        "durable record of it."
                    ),
                    marks,
                )
            )
        elif completed and n < expected:
            violations.append(
                Violation(
                    "no_duplicate_effect",
                    f"the run completed but effect {tool}({_short(json.loads(raw_input))}) "
                    f"happened {n} time(s), not {expected} as in the crash-free run: an action "
                    "was lost across a crash.",
                    {e.seq: "too few" for e in done},
                )
            )
    return violations, unsafe


def _effects_lost_to_crash(timeline: Timeline) -> set[int]:
    """Effects followed by a crash with no durable checkpoint write in between."""
    lost: set[int] = set()
    pending: list[int] = []
    for event in timeline:
        if event.kind == "effect":
            pending.append(event.seq)
        elif event.kind == "store_save":
            pending.clear()
        elif event.kind == "crash":
            lost.update(pending)
            pending.clear()
    return lost


# -- 3 ---------------------------------------------------------------------------------
def same_answer(answer: str | None, baseline: Baseline, *, completed: bool) -> list[Violation]:
    """A completed run's answer equals the crash-free answer."""
    if not completed or answer == baseline.answer:
        return []
    return [
        Violation(
            "same_answer",
            f"the resumed run answered {_short(answer)}; the crash-free run answered "
            f"{_short(baseline.answer)}",
        )
    ]


# -- 4 ---------------------------------------------------------------------------------
def iteration_monotone(timeline: Timeline, *, budget: int | None = None) -> list[Violation]:
    """The stored iteration never goes backwards, and the budget spans restarts.

    With ``budget`` (the agent's iteration limit), the model answers at most ``budget``
    turns overall, plus one for each turn a crash or a lost response took away.
    """
    violations: list[Violation] = []
    best: Event | None = None
    for event in timeline.of("store_save"):
        iteration = event.data.get("iteration")
        if not isinstance(iteration, int):
            continue
        if best is not None and iteration < best.data["iteration"]:
            violations.append(
                Violation(
                    "iteration_monotone",
                    f"the stored iteration went back from {best.data['iteration']} (checkpoint "
                    f"version {best.data.get('version')}) to {iteration} (version "
                    f"{event.data.get('version')}): a restart reset the count, so the budget "
                    "does not span restarts",
                    {best.seq: f"iteration {best.data['iteration']}", event.seq: f"iteration {iteration} (BACKWARDS)"},
                )
            )
            break
        if best is None or iteration >= best.data["iteration"]:
            best = event
    if budget is not None:
        turns = model_turns(timeline)
        lost = len(timeline.of("crash")) + sum(
            1 for e in timeline.of("api_fault") if e.data.get("fault") == "lost_response"
        )
        if turns > budget + lost:
            responses = [e for e in timeline.of("model_response") if e.data.get("status") == 200]
            violations.append(
                Violation(
                    "iteration_monotone",
                    f"the model answered {turns} turns overall, more than the budget of {budget} "
                    f"plus {lost} turn(s) lost to faults: the budget was reset by a restart",
                    {responses[budget + lost].seq: "over budget"},
                )
            )
    return violations


# -- 5 ---------------------------------------------------------------------------------
def recorded_work_not_redone(timeline: Timeline) -> list[Violation]:
    """Work recorded in the latest durable checkpoint is not done again.

    A model request equal to a prefix of the stored history that the stored history
    continues with the model's reply asks for a recorded reply again; a tool call all of
    whose requests (``tool_use`` ids) are answered successfully in the stored history
    runs recorded work again.
    """
    durable: Event | None = None
    asked: dict[tuple[str, str], set[str]] = defaultdict(set)
    answered: set[str] = set()
    for event in timeline:
        if event.kind == "store_save":
            durable = event
            answered = _answered_ids(event.data.get("messages", ()))
        elif event.kind == "model_response":
            for tool_use_id, name, tool_input in event.data.get("tool_uses", ()):
                asked[(name, canonical(tool_input))].add(tool_use_id)
        elif event.kind == "model_request" and durable is not None:
            stored: Sequence[Any] = durable.data.get("messages", ())
            sent = event.data.get("messages", [])
            n = len(sent)
            if (
                n < len(stored)
                and isinstance(stored[n], Mapping)
                and stored[n].get("role") == "assistant"
                and list(stored[:n]) == list(sent)
            ):
                return [
                    Violation(
                        "recorded_work_not_redone",
                        f"model request #{event.data.get('index')} (attempt {event.attempt}) asks "
                        f"again for reply {n} of the history, which checkpoint version "
                        f"{durable.data.get('version')} already holds: the agent did not resume "
                        "from its checkpoint (a failed load treated as 'no checkpoint'?)",
                        {durable.seq: "recorded here", event.seq: "REDONE"},
                    )
                ]
        elif event.kind == "tool_call" and durable is not None:
            ids = asked.get((event.data["tool"], canonical(event.data["input"])), set())
            if ids and ids <= answered:
                return [
                    Violation(
                        "recorded_work_not_redone",
                        f"tool call {event.data['tool']}({_short(event.data['input'])}) in attempt "
                        f"{event.attempt} runs again though checkpoint version "
                        f"{durable.data.get('version')} holds its result (tool_use "
                        f"{', '.join(sorted(ids))})",
                        {durable.seq: "recorded here", event.seq: "REDONE"},
                    )
                ]
    return []


def _answered_ids(messages: Iterable[Any]) -> set[str]:
    answered: set[str] = set()
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            continue
        for block in content or ():
            if isinstance(block, Mapping) and block.get("type") == "tool_result" and not block.get("is_error"):
                answered.add(str(block.get("tool_use_id")))
    return answered


# -- 6 ---------------------------------------------------------------------------------
def completed_idempotent(
    rerun: Sequence[Event], answer: str | None, expected: str | None
) -> list[Violation]:
    """Running a completed task again makes no model call and no tool call.

    ``rerun`` are the events of that extra run; ``answer`` what it returned.
    """
    calls = [e for e in rerun if e.kind in ("model_request", "tool_call")]
    if calls:
        models = sum(1 for e in calls if e.kind == "model_request")
        return [
            Violation(
                "completed_idempotent",
                f"running the completed task again made {models} model call(s) and "
                f"{len(calls) - models} tool call(s): keep the checkpoint on completion "
                "(status=completed, final_answer) and return the answer from it",
                {e.seq: "AFTER COMPLETION" for e in calls[:5]},
            )
        ]
    if answer != expected:
        return [
            Violation(
                "completed_idempotent",
                f"running the completed task again answered {_short(answer)}, not {_short(expected)}",
            )
        ]
    return []
