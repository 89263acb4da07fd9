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

The harness adds checks of its own: ``crash_free_run`` (the agent fails with no fault at
all), ``resumes_to_completion`` (after the last fault the agent never finishes) and
``runaway`` (the agent made far more model requests than the crash-free run of the plan).

An oracle that needs the message history from the checkpoints and cannot find it there
(an agent that keeps its own state format) is *not checkable*: :func:`history_not_found`
says why, and the harness reports it instead of passing it silently.

>>> from pytest_agentckpt.timeline import Timeline
>>> t = Timeline(); _ = t.start_attempt()
>>> _ = t.add("store_save", version=1, iteration=3, status="running", messages=[])
>>> _ = t.add("store_save", version=2, iteration=1, status="running", messages=[])
>>> [v.oracle for v in iteration_monotone(t)]
['iteration_monotone']
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .timeline import Event, Timeline

__all__ = [
    "CHECKS",
    "ORACLES",
    "Advice",
    "Baseline",
    "OracleName",
    "ToolFlags",
    "UnsafeTool",
    "Violation",
    "answer_in_doubt",
    "completed_idempotent",
    "effects_in_doubt",
    "ended_on_pause",
    "give_up_advice",
    "history_not_found",
    "iteration_monotone",
    "no_duplicate_effect",
    "recorded_work_not_redone",
    "same_answer",
    "stale_load_advice",
    "unwinding_advice",
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
CHECKS: tuple[str, ...] = ("crash_free_run", *ORACLES, "resumes_to_completion", "runaway")
"""Every name a violation can carry: the oracles and the harness's own checks, in the order
a report lists them."""
#: Oracles that read the message history out of the checkpoints the agent wrote.
HISTORY_ORACLES: tuple[str, ...] = ("recorded_work_not_redone",)


@dataclass(frozen=True)
class ToolFlags:
    """What the oracles need to know of a tool: its kind.

    read-only (``irreversible=False``); repeat-safe (irreversible, a repeat has no second
    effect); keyed (irreversible, ``idempotent``: honours an idempotency key); unkeyed
    (irreversible, nothing else). Only a repeat of a keyed or unkeyed tool can be a
    duplicate.

    >>> ToolFlags(True, False).kind, ToolFlags(True, False, repeat_safe=True).kind
    ('unkeyed', 'repeat-safe')
    """

    irreversible: bool
    idempotent: bool
    repeat_safe: bool = False
    #: Per ``command`` of a call's input, the flags of that command (a client tool's).
    commands: tuple[tuple[str, ToolFlags], ...] = ()

    def for_input(self, tool_input: Any) -> ToolFlags:
        """The flags of a call with ``tool_input``: its command's, if it has its own."""
        if self.commands and isinstance(tool_input, dict):
            for command, flags in self.commands:
                if tool_input.get("command") == command:
                    return flags
        return self

    @property
    def kind(self) -> str:
        """``read-only``, ``repeat-safe``, ``keyed`` or ``unkeyed``."""
        if not self.irreversible:
            return "read-only"
        if self.repeat_safe:
            return "repeat-safe"
        return "keyed" if self.idempotent else "unkeyed"

    @property
    def can_duplicate(self) -> bool:
        """Whether a repeat of this tool is a second effect."""
        return self.irreversible and not self.repeat_safe


@dataclass(frozen=True)
class Advice:
    """Not a violation: what the agent could do better, shown in the report.

    >>> Advice("store_give_up", "retry the outcome write").describe()
    'retry the outcome write'
    """

    topic: str
    message: str

    def describe(self) -> str:
        return self.message


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
    #: The effect was not repeated, but the run's answer differs from the crash-free run's:
    #: the resume could only report the outcome unknown (see :func:`answer_in_doubt`).
    answer: str | None = None

    def describe(self) -> str:
        if self.answer is not None:
            return (
                f"tool {self.tool!r} is unsafe: the attempt ended (a crash, or the agent raised or "
                f"stopped) after its effect {_short(self.input)} and before any durable record of "
                "its outcome, so the resume could only answer it \"outcome unknown\", and the run "
                f"then answered {_short(self.answer)}, not as the crash-free run did; no agent can "
                "know that outcome. Make the tool honour idempotency keys (and declare it so: "
                "kinds={...: \"keyed\"} in Toolbox.from_functions, or ToolSpec(idempotent=True)) "
                "or give it a way to check what happened."
            )
        return (
            f"tool {self.tool!r} is unsafe: its effect {_short(self.input)} happened {self.times} "
            f"times (crash-free: {self.expected}) because the attempt ended (a crash, or the agent "
            "raised or stopped) after the effect and before any durable record of its outcome "
            "(an intent saved before the call does not say whether it happened); no agent can "
            "know that outcome. Make the tool "
            "honour idempotency keys (and declare it so: kinds={...: \"keyed\"} in "
            "Toolbox.from_functions, or ToolSpec(idempotent=True)) or give it a way to check "
            "what happened."
        )


@dataclass
class Baseline:
    """The crash-free run of a plan, which the crashed runs are judged against."""

    answer: str | None
    effects: Counter[tuple[str, str]]
    model_turns: int
    timeline: Timeline
    #: Model requests (generations) of the crash-free run up to its completion.
    requests: int = 0


def canonical(value: Any) -> str:
    """The canonical JSON of a tool input: equal inputs compare equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _short(value: Any, limit: int = 80) -> str:
    text = canonical(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _resumed(timeline: Timeline, event: Event) -> bool:
    """Whether ``event`` comes after an attempt ended (a crash or the agent stopping)."""
    return any(e.kind == "attempt_end" and e.seq < event.seq for e in timeline.events)


#: What a server tool's blocks must be in a history, in words.
_SERVER_RULE = (
    "a server_tool_use (web search, web fetch, code execution) ran on the API's side and its "
    "result block (web_search_tool_result, ...) is in the same assistant message: save and "
    "send back every block of a reply as it came, the use and its result together (those of "
    "a finished turn may both be dropped, never one of them), and never answer a "
    "server_tool_use with a tool_result nor run it as a client tool (only tool_use blocks "
    "get a tool_result)"
)


def _rule_broken(error: str, messages: Any = None) -> str:
    """The rule of the API that an invalid history's error names, in words; ``messages``:
    the request's, to tell a ``tool_result`` that answers a server tool."""
    if "server tool use" in error or (
        "unexpected `tool_use_id`" in error and _answers_server_use(error, messages)
    ):
        return _SERVER_RULE
    empty_user = _empty_user_turn(error, messages)
    if empty_user is not None:
        return empty_user
    if "prefill" in error or "non-empty content" in error:
        return (
            "a history ends with a user message and no message is empty; the one exception "
            "is a reply that stopped with stop_reason pause_turn (or a text cut by max_tokens), "
            "sent back as the last message exactly as it came, every block included "
            "(server_tool_use and its result too), so that the model continues its turn: "
            "keep the reply's stop_reason, or the whole reply, in the checkpoint, and on "
            "resume send a saved paused reply back as it is"
        )
    if "thinking" in error:
        return (
            "with thinking on, the assistant turn of an open tool loop goes back with its "
            "thinking and redacted_thinking blocks exactly as they came (signature and data "
            "included, none dropped, and with interleaved thinking each in its place among the "
            "tool calls), and a thinking block cut short is not sent back"
        )
    if 'first message must use the "user" role' in error:
        return (
            "a history must start with a user message, and this one started with an assistant "
            "turn: a window that keeps the last messages keeps the goal first (the window then "
            "starts at an assistant turn), or starts at a user turn that holds no tool_result"
        )
    if "Input should be 'user' or 'assistant'" in error or "Field required" in error:
        return "each message has a role, user or assistant, and content"
    return "every tool_use needs exactly one tool_result, first in the next user message"


def _empty_user_turn(error: str, messages: Any) -> str | None:
    """The rule, when the empty message an error names is a user turn: after calls, the
    turn that was to carry their results."""
    match = re.match(r"messages\.(\d+): all messages must have non-empty content", error)
    if match is None or not isinstance(messages, list) or int(match[1]) >= len(messages):
        return None
    index = int(match[1])
    message = messages[index]
    if not isinstance(message, Mapping) or message.get("role") != "user":
        return None
    before = messages[index - 1] if index else None
    content = before.get("content") if isinstance(before, Mapping) else None
    ids = [
        str(block.get("id"))
        for block in (content if isinstance(content, list) else ())
        if isinstance(block, Mapping) and block.get("type") == "tool_use"
    ]
    if not ids:
        return (
            f"no message is empty: messages.{index} is a user turn with no content; send a user "
            "turn only with something in it"
        )
    return (
        f"every tool_use needs exactly one tool_result, first in the next user message: "
        f"messages.{index} is that user turn, and it came with no content, so the call(s) "
        f"{', '.join(ids)} of messages.{index - 1} went unanswered. Build the turn from the "
        "results the checkpoint holds (each call's recorded outcome), save those results "
        "before the turn is sent, and settle any call whose result is missing"
    )


_SERVER_USES = frozenset({"server_tool_use", "mcp_tool_use"})


def _answers_server_use(error: str, messages: Any) -> bool:
    """Whether the ``tool_use_id`` an ``unexpected `tool_use_id``` error names is the id of
    a server tool use in ``messages``."""
    if not isinstance(messages, list):
        return False
    named = error.rsplit("blocks: ", 1)[-1].split(". ", 1)[0].strip()
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, Mapping) and block.get("type") in _SERVER_USES and block.get("id") == named:
                return True
    return False


def ended_on_pause(timeline: Timeline) -> str | None:
    """Why a run that completed took a paused turn for the end of its task, or ``None``:
    the last reply the model gave before the agent finished stopped with ``pause_turn``
    (a server tool loop the API paused, to be continued by sending the reply back), so
    the agent's answer is a partial turn."""
    last = None
    for event in timeline.of("model_response"):
        if event.data.get("status") == 200:
            last = event
    if last is None or last.data.get("stop_reason") != "pause_turn":
        return None
    return (
        f"the agent finished after reply #{last.data.get('index')}, which stopped with "
        "stop_reason 'pause_turn': the API paused a server tool loop (web search, ...) and "
        "the turn is not over, so the answer is a partial one. Send the paused reply back as "
        "it came, as the last (assistant) message, to let the model continue; only "
        "end_turn (or stop_sequence) ends the task"
    )


def _crashed_before(timeline: Timeline, event: Event) -> bool:
    return any(e.kind == "crash" and e.seq < event.seq for e in timeline.events)


def effect_counts(timeline: Timeline) -> Counter[tuple[str, str]]:
    """How often each (tool, input) took effect."""
    return Counter((e.data["tool"], canonical(e.data["input"])) for e in timeline.of("effect"))


def model_turns(timeline: Timeline) -> int:
    """Model replies that were built (answered 200), whether or not they arrived."""
    return sum(1 for e in timeline.of("model_response") if e.data.get("status") == 200)


# -- 1 ---------------------------------------------------------------------------------
#: Stop reasons of a reply the agent may send back as the last message to be continued.
_CONTINUED = frozenset({"max_tokens", "pause_turn"})


def _shape(content: Any) -> tuple[tuple[str, str], ...]:
    """What identifies a reply's content when it comes back: each block's type and its
    id, text or signature (a serializer may add or drop empty fields), as the fake API
    tells a paused turn sent back."""
    if isinstance(content, str):
        return (("text", content),)
    shape = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping):
            key = block.get("id") or block.get("text") or block.get("signature") or block.get("tool_use_id") or ""
            shape.append((str(block.get("type")), str(key)))
    return tuple(shape)


def _continues(
    messages: Any, unfinished: set[str], paused: set[tuple[tuple[str, str], ...]] | None = None
) -> bool:
    """Whether ``messages`` ends with an assistant turn of text only that is one of the
    ``unfinished`` replies (sent back to be continued), or with one of the ``paused``
    replies that hold other blocks (server tool blocks), sent back as they came."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return False
    last = messages[-1]
    if last.get("role") != "assistant":
        return False
    content = last.get("content")
    if paused and _shape(content) in paused:
        return True
    if isinstance(content, str):
        return content in unfinished
    if not isinstance(content, list) or not all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return False
    return "".join(str(b.get("text", "")) for b in content) in unfinished


def valid_sequence(
    timeline: Timeline,
    validate: Callable[..., None],
    *,
    error_type: type[Exception] = ValueError,
) -> list[Violation]:
    """Every request sent to the model passes ``validate`` (the API's rules for
    ``messages``) and the rules of the whole request
    (:func:`reference_agent.validation.request_rule_error`, whose verdict the harness
    records on the event as ``request_error``).

    Reports the first invalid request, with the HTTP 400 the API would answer.
    """
    invalid: list[tuple[Event, Exception | str]] = []
    # Replies the API lets an agent send back as the last message, to be continued: a text
    # cut by max_tokens, a paused turn. Sent back as they came, they are valid.
    unfinished: set[str] = set()
    # Paused replies that hold more than text (server tool blocks): by their shape, as
    # only the whole reply sent back continues the turn.
    paused: set[tuple[tuple[str, str], ...]] = set()
    # With interleaved thinking: the thinking and calls of each reply that thought, by the
    # id of each call in it, for the rule that the open turn brings them back in place.
    from reference_agent.validation import check_interleaved_thinking, remember_shape

    served: dict[str, Any] = {}
    for event in timeline.of("model_request", "model_response"):
        if event.kind == "model_response":
            shape = event.data.get("thinking_shape")
            if shape:
                remember_shape(served, shape)
            if event.data.get("stop_reason") in _CONTINUED and not event.data.get("tool_uses"):
                content = event.data.get("content")
                if isinstance(content, list) and any(
                    not isinstance(b, Mapping) or b.get("type") != "text" for b in content
                ):
                    paused.add(_shape(content))
                else:
                    unfinished.add(str(event.data.get("text") or ""))
            continue
        messages = event.data.get("messages", [])
        try:
            validate(
                messages,
                thinking=bool(event.data.get("thinking")),
                **(
                    {"allow_prefill": True}
                    if (unfinished or paused) and _continues(messages, unfinished, paused)
                    else {}
                ),
            )
            if event.data.get("interleaved") and served:
                check_interleaved_thinking(messages, served)
        except error_type as exc:
            invalid.append((event, exc))
            continue
        rule = event.data.get("request_error")
        if rule:
            invalid.append((event, str(rule)))
    if not invalid:
        return []
    event, error = invalid[0]
    api_error = f'HTTP 400 {{"type": "invalid_request_error", "message": "{error}"}}'
    if isinstance(error, str):
        hint = (
            "Every cache_control mark counts, on tools, system and messages alike: remove the "
            "marks of earlier turns before marking the latest block, including marks saved "
            "in the checkpoint's history and loaded on resume (or save the history without "
            "them and mark a copy for each request)."
        )
        if event.attempt > 1:
            hint = f"It follows a resume. {hint}"
    else:
        rule = _rule_broken(str(error), event.data.get("messages"))
        loaded = any(e.kind == "store_load" and e.attempt == event.attempt and e.seq < event.seq for e in timeline.events)
        foreign = _never_issued(timeline, event) if event.attempt > 1 else []
        if _crashed_before(timeline, event) and foreign:
            hint = (
                f"The history sent after a crash holds tool_use ids the model never issued "
                f"({', '.join(foreign[:3])}): the agent rewrote the ids when it saved or restored "
                "the history, so the tool_result blocks no longer answer the calls. Keep each "
                "tool_use and tool_result id exactly as the API gave it (and derive keys from "
                "those ids)."
            )
        elif _crashed_before(timeline, event) and event.attempt > 1 and not loaded:
            hint = (
                f"The history sent after a crash was not valid: {rule}. The agent loaded no "
                "checkpoint through the store in that attempt: the history came from its own "
                "state (a replay, its own files), or it asked the model again and paired the "
                "new reply with results of the old one."
            )
        elif _crashed_before(timeline, event) and event.attempt > 1:
            hint = f"The history loaded after a crash was not repaired: {rule}."
        elif event.attempt > 1:
            hint = f"The history loaded when the agent was run again was not made valid: {rule}."
        elif any(e.kind == "api_fault" and e.seq < event.seq for e in timeline.events):
            hint = f"It follows an API fault (no crash): the agent's handling of it built the request: {rule}."
        else:
            hint = f"No crash came before it: the agent itself builds an invalid history ({rule})."
    what = "a request the API rejects" if isinstance(error, str) else "not a valid message sequence"
    message = (
        f"model request #{event.data.get('index')} (attempt {event.attempt}) is {what}; "
        f"the API would answer {api_error}. "
        f"{len(invalid)} invalid request(s) in all. {hint}"
    )
    marks = {e.seq: "INVALID" for e, _ in invalid[:5]}
    marks.update(_loaded_marks(timeline, event))
    marks[event.seq] = f"INVALID: {error}"
    return [Violation("valid_sequence", message, marks)]


def _never_issued(timeline: Timeline, request: Event) -> list[str]:
    """The ``tool_use`` ids of the request's assistant turns that no model reply issued
    (ids an agent made up, or rewrote, when it saved or loaded its history)."""
    issued = _issued_ids(timeline)
    if not issued:
        return []
    foreign: list[str] = []
    for message in request.data.get("messages") or ():
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_use" and str(block.get("id")) not in issued:
                foreign.append(str(block.get("id")))
    return foreign


def _loaded_marks(timeline: Timeline, request: Event) -> dict[int, str]:
    """The load of ``request``'s attempt before it, and the save that wrote the checkpoint
    it loaded: kept in a long timeline's excerpt, since they tell where the history came
    from (a save made at the wrong moment, say)."""
    loads = [
        e for e in timeline.of("store_load")
        if e.attempt == request.attempt and e.seq < request.seq and e.data.get("found")
    ]
    if not loads:
        return {}
    load = loads[-1]
    marks = {load.seq: "the checkpoint this attempt loaded"}
    for save in reversed(timeline.of("store_save")):
        if (
            save.seq < load.seq
            and save.data.get("version") == load.data.get("version")
            and save.data.get("task_id") == load.data.get("task_id")
        ):
            marks[save.seq] = "written here"
            break
    return marks


# -- 2 ---------------------------------------------------------------------------------
def no_duplicate_effect(
    timeline: Timeline,
    baseline: Baseline,
    tools: Mapping[str, ToolFlags],
    *,
    completed: bool,
    bounded: bool = True,
) -> tuple[list[Violation], list[UnsafeTool]]:
    """No effect more often than in the crash-free run; exactly those effects on completion.

    ``bounded=False``: the crash-free run is no bound (it stopped its task before the end,
    and a resume goes further): only an effect beyond what the model asked for counts.

    An effect performed more often than the model asked for it (distinct ``tool_use`` ids
    in its replies) is always the agent's bug. Otherwise the one excuse is an effect of an
    irreversible tool that does not honour keys, followed by the end of its attempt (a
    crash, or the agent raising or stopping) with no durable write of the agent in between
    (:func:`effects_in_doubt`): repeated, it makes the tool unsafe, reported apart from
    agent bugs. A repeat of a repeat-safe tool is never a duplicate.
    """
    effects: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for event in timeline.of("effect"):
        effects[(event.data["tool"], canonical(event.data["input"]))].append(event)
    asks = _asks(timeline)

    unrecorded = effects_in_doubt(timeline)
    violations: list[Violation] = []
    unsafe: list[UnsafeTool] = []
    for key in sorted(set(effects) | set(baseline.effects)):
        tool, raw_input = key
        done = effects.get(key, [])
        n, expected, asked = len(done), baseline.effects.get(key, 0), len(asks.get(key, ()))
        flags = tools.get(tool)
        if flags is not None:
            flags = flags.for_input(json.loads(raw_input))
        if flags is not None and not flags.can_duplicate:
            # Repeat-safe: only "it never happened" can be wrong.
            if completed and expected and not n:
                violations.append(_lost(tool, raw_input, done, n, expected, timeline, asks.get(key, set()), baseline))
            continue
        if n > asked and n > expected:
            marks = {e.seq: "DUPLICATE" for e in done[max(asked, expected):]}
            violations.append(
                Violation(
                    "no_duplicate_effect",
                    f"effect {tool}({_short(json.loads(raw_input))}) happened {n} times, but the "
                    f"model asked for it {asked} time(s) (crash-free run: {expected}): the agent "
                    + (
                        "repeated an action of its own, one the model never asked for. "
                        + _split_hint(tool, raw_input, asks)
                        if asked == 0
                        else "repeated an action the model asked for once. "
                        if asked == 1
                        else f"made an action more often than the {asked} times the model asked for it. "
                    )
                    + (
                        _key_advice(done, reasked=_reasked_reply(timeline, key), issued=_issued_ids(timeline))
                        if flags is not None and flags.idempotent
                        else _retried_after_failure(timeline, done) or _unkeyed_advice(_reasked_reply(timeline, key))
                    ),
                    marks,
                )
            )
        elif n > expected and bounded:
            excused = sum(1 for e in done if e.seq in unrecorded)
            if flags is not None and flags.irreversible and not flags.idempotent and n - expected <= excused:
                unsafe.append(UnsafeTool(tool, json.loads(raw_input), n, expected))
                continue
            marks = {e.seq: "DUPLICATE" for e in done[expected:]}
            answered_error = _error_answer_after_effect(timeline, done[0], asks.get(key, set()))
            violations.append(
                Violation(
                    "no_duplicate_effect",
                    f"effect {tool}({_short(json.loads(raw_input))}) happened {n} times; the "
                    f"crash-free run did it {expected} time(s). "
                    + (
                        answered_error
                        if answered_error is not None
                        else _key_advice(done, reasked=_reasked_reply(timeline, key), issued=_issued_ids(timeline))
                        if flags is not None and flags.idempotent
                        else "The repeat is not explained by the end of an attempt between the "
                        "effect and a durable record of it."
                        + _also_asked_again(_reasked_reply(timeline, key))
                    ),
                    marks,
                )
            )
        elif completed and n < expected:
            violations.append(_lost(tool, raw_input, done, n, expected, timeline, asks.get(key, set()), baseline))
    return violations, unsafe


def _split_hint(tool: str, raw_input: str, asks: Mapping[tuple[str, str], Any]) -> str:
    """For an effect the model never asked for, of a tool it did ask for with another
    input: the agent made the call itself, as an agent that splits a call into parts does
    (an outside round's bulk sender, one call per recipient, read "asked for it 0 times")."""
    other = next((json.loads(raw) for name, raw in asks if name == tool and raw != raw_input), None)
    if other is None:
        return ""
    return (
        f"The model asked for {tool} with another input ({_short(other)}): a call the agent "
        "makes itself (a part of one it split into several, say) is judged on its own, and "
        "needs its own key, or its own record saved before it runs. "
    )


def _asks(timeline: Timeline) -> dict[tuple[str, str], set[tuple[Any, str, str]]]:
    """Each planned call's distinct requests by the model: ``tool_use`` ids, each within its
    conversation.

    A reply to the same history (an SDK retry, a resumed agent asking again) asks for the
    same calls, and counts once: the scripted model gives it fresh ids, as the API would
    (``toolu_s0c0a0_g1``, the second reply holding ``toolu_s0c0a0``), which count as the
    first. A scripted model's ids are unique only within one conversation,
    where the API's are unique everywhere: an agent that holds several conversations (a
    sub-task each) gets the same ids in each of them, and each is a request of its own. A
    conversation is told by its first message and by the checkpoint the agent loaded or
    saved last before the request (two sub-tasks alike have the same first message, but
    each its own checkpoint).
    """
    from reference_agent.scripted import first_issue  # the scripted model's ids are its own

    asks: dict[tuple[str, str], set[tuple[Any, str, str]]] = defaultdict(set)
    for event, (where, first) in _replies_by_conversation(timeline):
        for tool_use_id, name, tool_input in event.data.get("tool_uses", ()):
            asks[(name, canonical(tool_input))].add((where, first, first_issue(str(tool_use_id))))
    return asks


def _replies_by_conversation(timeline: Timeline) -> Iterator[tuple[Event, tuple[Any, str]]]:
    """Each model reply with its conversation, as :func:`_asks` tells them: the checkpoint
    the agent loaded or saved last before the request, and the request's first message."""
    conversation: dict[Any, tuple[Any, str]] = {}
    task: Any = None
    for event in timeline.of("store_load", "store_save", "model_request", "model_response"):
        if event.kind in ("store_load", "store_save"):
            task = event.data.get("task_id")
        elif event.kind == "model_request":
            messages = event.data.get("messages") or ()
            conversation[event.data.get("index")] = (task, canonical(messages[0]) if messages else "")
        else:
            yield event, conversation.get(event.data.get("index"), (task, ""))


def _reasked(timeline: Timeline) -> dict[tuple[str, str], tuple[set[str], set[int]]]:
    """The calls a scripted model's reply asked for again, under fresh ids, because the
    agent sent the same history again (it had lost the reply that asked first): for each,
    the ids its conversation had got the call under before, and the attempts that asked
    again.

    A scripted model gives a fresh id to a call of any history it answered before; only
    one sent again in the conversation that got the call first is asked again: the same
    first message, and the same checkpoint or a later attempt (a resume that looks under
    another task id). Another conversation (a part of the task with a goal of its own, a
    second sub-task alike running beside the first) is asked for the first time, under a
    fresh id all the same: that id is its first, and a later one in it is asked again.
    """
    from reference_agent.scripted import first_issue

    issued: dict[str, list[tuple[Any, str, int, str]]] = defaultdict(list)
    again: dict[tuple[str, str], tuple[set[str], set[int]]] = {}
    for event, (task, opening) in _replies_by_conversation(timeline):
        for tool_use_id, name, tool_input in event.data.get("tool_uses", ()):
            use = str(tool_use_id)
            first = first_issue(use)
            if first != use:
                earlier = issued.get(first, [])
                prior = {
                    issued_id
                    for where, opened, attempt, issued_id in earlier
                    if opened == opening and (where == task or attempt < event.attempt)
                }
                if prior or not earlier:
                    ids, attempts = again.setdefault((name, canonical(tool_input)), (set(), set()))
                    ids.update(prior or {first})
                    attempts.add(event.attempt)
            issued[first].append((task, opening, event.attempt, use))
    return again


def _error_answer_after_effect(
    timeline: Timeline, effect: Event, asks: set[tuple[Any, str, str]]
) -> str | None:
    """Why the model asked again, when the agent told it a call had failed after its
    effect happened: the first request after ``effect`` that answers one of the call's
    ``tool_use`` ids with ``is_error``, described; ``None`` if there is none."""
    from reference_agent.scripted import first_issue

    ids = {tool_use_id for _where, _first, tool_use_id in asks}
    # An error answered before the effect (a call that timed out, told "outcome unknown")
    # comes back with every later request's history: it is not what followed the effect.
    earlier = {
        str(block.get("tool_use_id"))
        for event, block in _sent_results(timeline)
        if event.seq < effect.seq and block.get("is_error")
    }
    for event, block in _sent_results(timeline, after=effect.seq):
        use = str(block.get("tool_use_id"))
        if first_issue(use) in ids and block.get("is_error") and use not in earlier:
            said = (
                f"The model asked for it again because model request #{event.data.get('index')} "
                f"answered tool_use {block['tool_use_id']} with an error "
                f"({_cut(_result_text(block.get('content')), 100)}) although its effect had happened"
            )
            crashed = any(effect.seq < c.seq < event.seq for c in timeline.of("crash"))
            # A run that stopped on an error (a store outage it gave up on) is resumed too.
            stopped = crashed or any(effect.seq < a.seq < event.seq for a in timeline.of("attempt_start"))
            if stopped:
                # The error was written on resume: a repair of the call the stop cut off.
                where = "before the crash" if crashed else "before the run stopped on an error"
                return (
                    f"{said}, {where}: the resume answered the call that stop cut off "
                    "with an error (a repair's \"interrupted\"), so the model asked for it again, "
                    "under a new tool_use id. On resume, settle such a call by its kind instead: "
                    "run a keyed call again with the key it had (derived from the task and its "
                    "tool_use id), answer one recorded as done with its recorded result, and check "
                    "before doing an unkeyed one again (see the tool kinds in the docs)."
                )
            return (
                f"{said}: the tool raised after the effect (a failed checkpoint save, say), "
                "and the error reached the model (a loop such as the SDK's tool_runner sends "
                "any exception a tool raises as an error result). Once the effect happened, "
                "answer the call with its result, and record the outcome again later if the "
                "save fails."
            )
    return None


def _sent_results(timeline: Timeline, *, after: int = -1) -> Iterator[tuple[Event, Mapping[str, Any]]]:
    """Each ``tool_result`` block of each model request (after event ``after``), with it."""
    for event in timeline.of("model_request"):
        if event.seq < after:
            continue
        for message in event.data.get("messages") or ():
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    yield event, block


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return str(content)


def _reasked_reply(timeline: Timeline, call: tuple[str, str]) -> str | None:
    """Whether the model was asked again for ``call`` (``(name, canonical input)``), under a
    fresh id: ``"saved"`` when a save had held the reply that asked first (the agent resumed
    from a checkpoint without it), ``"deleted"`` when the agent deleted that checkpoint
    since, ``"other_task"`` when the attempts that asked again
    found nothing under the other task ids they loaded (never the one it was saved under), ``"unsaved"`` when none had, ``"not_in_store"`` when the
    agent saved nothing through the store, ``None`` if never asked again."""
    found = _reasked(timeline).get(call)
    if found is None:
        return None
    # The ids the conversation that asked again had got the call under before, and the
    # attempts that asked again.
    first, reasking = found
    for save in timeline.of("store_save"):
        for message in save.data.get("messages") or ():
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, Mapping) and block.get("type") == "tool_use" and block.get("id") in first:
                    # Saved under one task id; did the attempts that asked again look there?
                    # Only when every load they made found nothing, under other ids: one that
                    # found an older checkpoint (a snapshot of its own) is a stale load.
                    loads = [load for load in timeline.of("store_load") if load.attempt in reasking]
                    saved_under = save.data.get("task_id")
                    if (
                        loads
                        and saved_under is not None
                        and not any(load.data.get("found") for load in loads)
                        and saved_under not in {load.data.get("task_id") for load in loads}
                    ):
                        return "other_task"
                    if any(
                        d.seq > save.seq and d.data.get("task_id") == saved_under
                        for d in timeline.of("store_delete")
                    ):
                        # The agent deleted the checkpoint that held the reply, and began
                        # again from nothing.
                        return "deleted"
                    return "saved"
    # An agent that keeps its state outside the store it was handed: whether the reply
    # was saved cannot be told.
    return "unsaved" if timeline.of("store_save") else "not_in_store"


#: Why keys differ, by what :func:`_reasked_reply` says of the call.
_WHY_KEYS_DIFFER = {
    "saved": (
        "the agent saved the reply that asked for the call, but a resume went on from a "
        "checkpoint without it (an older one, or the reply dropped on load), asked the model "
        "the same again and got the call under a new tool_use id (the API gives every reply "
        "new ids). Resume from the newest checkpoint as it was saved."
    ),
    "deleted": (
        "the agent saved the reply that asked for the call, then deleted the checkpoint that "
        "held it and began again from nothing (a step or task retried from a clean slate), "
        "asked the model the same again and got the call under a new tool_use id (the API "
        "gives every reply new ids). Retry from the checkpoint, not from a clean slate, so "
        "that the same tool_use ids run with the same keys."
    ),
    "other_task": (
        "the agent saved the reply that asked for the call, but the resume loaded another "
        "task id than the one it had saved under (the ids in [brackets] in the timeline), "
        "asked the model the same again and got the call under a new "
        "tool_use id (the API gives every reply new ids). An id made anew at each start (a "
        "random or time-based app, session or thread id) does this: derive the id the agent "
        "saves under from the task_id it is given, so a resume finds its checkpoint."
    ),
    "unsaved": (
        "the agent ran the call of a reply it had not saved, then, resumed, asked the model "
        "the same again and got the call under a new tool_use id (the API gives every reply "
        "new ids). Save the model's reply durably before running its tools, so a resume runs "
        "the same tool_use ids with the same keys. An agent that saves only every few turns "
        "by design must match a redone call to the intent it recorded before the first one "
        "(by what the redo sees again: its place in the turn, the tool and its input) and "
        "reuse the key recorded there: a key made from the new id, or from a counter the "
        "redo moves on, is another key."
    ),
    "not_in_store": (
        "a resume asked the model the same again and got the call under a new tool_use id "
        "(the API gives every reply new ids): it did not find the reply that asked first. The "
        "agent keeps its state outside the store fuzz handed it, so whether the reply was "
        "saved cannot be told; a resume that looks under another id (a task, session or "
        "workflow id not stable across attempts) does this, as does a reply not saved before "
        "its tools ran. Resume from the state that holds the reply, so the same tool_use ids "
        "run with the same keys."
    ),
    None: (
        "the resume did not call with the key the first call used. A key made anew on each "
        "attempt (random or time-based), or one saved only after the call ran (an outbox "
        "entry performed before it was saved), is not the key a resume has. Derive the key "
        "from what a resume sees again (the task id and the tool_use id, or a workflow id "
        "and step number), or save a key made once (a uuid) durably before the call that "
        "uses it, and call with the saved key on resume."
    ),
}


#: Why the model was asked again for a call the agent then ran again (a tool without a
#: key), by what :func:`_reasked_reply` says of the call.
_WHY_ASKED_AGAIN: dict[str, str] = {
    "saved": (
        "The model was asked for it again, under a new tool_use id: the agent had saved the "
        "reply that asked for it, but a resume went on from a checkpoint without it (an "
        "older one, or the reply dropped on load). Resume from the newest checkpoint as it "
        "was saved."
    ),
    "deleted": (
        "The model was asked for it again, under a new tool_use id: the agent had saved the "
        "reply that asked for it, then deleted that checkpoint and began again from nothing "
        "(a step or task retried from a clean slate). Retry from the checkpoint instead: it "
        "holds the call and its intent, to settle."
    ),
    "other_task": (
        "The model was asked for it again, under a new tool_use id: the agent had saved the "
        "reply that asked for it under one task id, and the resume loaded another (the "
        "ids in [brackets] in the timeline). Derive the id the agent saves under from the "
        "task_id it is given."
    ),
    "unsaved": (
        "The model was asked for it again, under a new tool_use id: the agent ran the call "
        "of a reply it had not saved. Save the model's reply durably before running its "
        "tools, and the intent before each irreversible call, so a resume settles the same "
        "tool_use id instead of running a new one."
    ),
    "not_in_store": (
        "The model was asked for it again, under a new tool_use id: a resume did not find "
        "the reply that asked first. The agent keeps its state outside the store fuzz "
        "handed it, so why cannot be told (an id not stable across attempts, or a reply not "
        "saved before its tools ran); resume from the state that holds the reply."
    ),
}


def _also_asked_again(reasked: str | None) -> str:
    return "" if reasked is None else " " + _WHY_ASKED_AGAIN[reasked]


def _issued_ids(timeline: Timeline) -> frozenset[str]:
    """Every ``tool_use`` id the model's replies issued."""
    return frozenset(
        str(tool_use_id) for e in timeline.of("model_response") for tool_use_id, _name, _input in e.data.get("tool_uses", ())
    )


def _unkeyed_advice(reasked: str | None) -> str:
    """What to do about a repeat of a tool without a key (``reasked``: what
    :func:`_reasked_reply` says of its call)."""
    record = (
        "Record the intent durably before an irreversible call and settle it on resume "
        "instead of re-running it."
    )
    if reasked is None:
        return record
    why = _WHY_ASKED_AGAIN[reasked]
    # An agent that lost the reply had no chance to settle the call: how it lost it is the
    # fix. One that never saved the reply needs the intent too.
    return f"{record} {why}" if reasked == "unsaved" else why


def _retried_after_failure(timeline: Timeline, done: list[Event]) -> str | None:
    """The advice when a call was made again in the attempt that made it, with a failed
    save or API request between the two and no new reply of the model: the agent's own
    retry (a loop, or a library such as tenacity) wrapped the call with what failed after
    it. ``None`` otherwise."""
    replies = [e.seq for e in timeline.of("model_response")]
    failed = {
        e.seq: "a save" if e.kind == "store_save_failed" else "an API request"
        for e in timeline.of("store_save_failed", "api_fault")
    }
    for first, again in itertools.pairwise(done):
        if first.attempt != again.attempt or any(first.seq < seq < again.seq for seq in replies):
            continue
        between = [what for seq, what in failed.items() if first.seq < seq < again.seq]
        if between:
            return (
                f"Both calls were made in attempt {again.attempt}, with the same model reply, and "
                f"{between[0]} failed between them: a retry (a loop, or a library such as "
                "tenacity) wrapped the call with what came after it, and ran the call again "
                "when only that needed retrying. The call had happened: retry the failed step "
                "alone (the outcome's save), or record the call's outcome first and settle the "
                "call from the record."
            )
    return None


def _key_advice(done: list[Event], *, reasked: str | None = None, issued: frozenset[str] = frozenset()) -> str:
    """What to do about repeats of a tool that drops a repeat of the same key (``reasked``:
    what :func:`_reasked_reply` says of its call)."""
    keys = [e.data.get("key") for e in done]
    if None in keys:
        return (
            "The tool honours idempotency keys, but a call came without one: pass a key on "
            "every call, derived from what a resume sees again (the task and the tool_use id, "
            "or a workflow id and step number)."
        )
    shown = ", ".join(repr(k) for k in dict.fromkeys(keys))
    why = _WHY_KEYS_DIFFER[reasked if len(set(keys)) > 1 else None]
    renumbered = False
    if reasked is None and issued and len(set(keys)) > 1:
        # The model was not asked again, yet the keys differ: when one key holds an id the
        # model issued and another holds none, the call's id changed on the agent's side.
        holds = [next((i for i in issued if i and i in str(k)), None) for k in keys]
        if any(holds) and not all(holds):
            held = next(h for h in holds if h)
            renumbered = True
            why = (
                f"one key holds the tool_use id {held!r} the model issued, another holds no id the "
                "model ever issued: the call's id changed between the reply and the repeat (a "
                "serializer or a framework that renumbers call ids when it saves or loads the "
                "history). Keep every tool_use id as the API gave it."
            )
    counted = _counted_apart(keys) if reasked is None and not renumbered else None
    if counted is not None:
        why = (
            f"the keys differ only in a number ({counted}): a counter in the key (a step, "
            "call or attempt number) counted otherwise on the resume. A counter that "
            "counts failed tries or retries (a model call retried by the agent, a step "
            "that failed once), or calls made since the attempt began, shifts when a "
            "resume replays fewer or more of them. Number a step by what every attempt "
            "replays alike (the recorded steps), or key the call by the task and its "
            "tool_use id. (A number drawn at random for each attempt does this too.)"
        )
    return f"The tool honours idempotency keys, but the calls came with different keys ({_cut(shown)}): {why}"


def _counted_apart(keys: list[Any]) -> str | None:
    """``"1 and 2"`` when the keys are alike but for one small number (a counter: below
    10,000, so a timestamp or a random id is not taken for one), else ``None``."""
    shapes = {tuple(re.split(r"(\d+)", str(key))) for key in keys}
    if len(shapes) < 2 or len({len(shape) for shape in shapes}) != 1:
        return None
    columns = list(zip(*shapes, strict=True))
    differing = [i for i, column in enumerate(columns) if len(set(column)) > 1]
    if len(differing) != 1 or differing[0] % 2 == 0:  # odd places hold the digit runs
        return None
    numbers = sorted({int(n) for n in columns[differing[0]]})
    if numbers[-1] >= 10_000:
        return None
    return " and ".join(str(n) for n in numbers)


def _cut(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _lost(
    tool: str,
    raw_input: str,
    done: list[Event],
    n: int,
    expected: int,
    timeline: Timeline,
    asks: Iterable[tuple[Any, str, str]] = (),
    baseline: Baseline | None = None,
) -> Violation:
    crashes, others = timeline.of("crash"), timeline.of("api_fault", "store_outage")
    cause = (
        "an action was lost across the faults (a crash, and an API or store fault)"
        if crashes and others
        else "an action was lost across a crash"
        if crashes
        else "an action was lost across a fault"
        if others
        else "an action was lost"
    )
    doubled = _crash_free_repeat(baseline, tool, raw_input) if baseline is not None else None
    if doubled is not None:
        # The crash-free run is the one that went wrong: it made the call twice.
        cause = doubled
    answered = _plain_answer_of_unrun_call(timeline, tool, raw_input, asks)
    cut = next((e for e in others if e.kind == "api_fault" and e.data.get("fault") == "max_tokens"), None)
    if cut is not None and not answered:
        # A reply cut by the token limit: its last call may be partial, and an agent (or its
        # framework) that drops that call and runs the rest never asks for it again.
        partial = next(
            (
                e
                for e in timeline.of("tool_call")
                if e.seq > cut.seq
                and e.attempt == cut.attempt
                and e.data.get("tool") == tool
                and canonical(e.data.get("input")) != raw_input
            ),
            None,
        )
        did = (
            f"the agent ran the cut call with the input it had ({_short(partial.data.get('input'))}), "
            "and went on as if the turn were whole: the call the model meant was never made"
            if partial is not None
            else "an agent that drops a cut reply's calls, or only its last, and goes on as if "
            "the turn were whole loses them"
        )
        answered = (
            f"A reply was cut by max_tokens (request #{cut.data.get('index')}): {did}. Run none "
            "of a cut reply's calls; ask again (say the reply was cut off), so the model "
            "repeats the call in full."
        )
    return Violation(
        "no_duplicate_effect",
        f"the run completed but effect {tool}({_short(json.loads(raw_input))}) "
        f"happened {n} time(s), not {expected} as in the crash-free run: {cause}."
        + (f" {answered}" if answered else ""),
        {e.seq: "too few" for e in done},
    )


def _crash_free_repeat(baseline: Baseline, tool: str, raw_input: str) -> str | None:
    """When the crash-free run made a call more than once because the agent told the model
    it had failed after its effect, what to say: that run is the wrong one. ``None``
    otherwise (the crash-free run is the measure)."""
    done = [
        e
        for e in baseline.timeline.of("effect")
        if e.data.get("tool") == tool and canonical(e.data.get("input")) == raw_input
    ]
    if len(done) < 2:
        return None
    why = _error_answer_after_effect(baseline.timeline, done[0], _asks(baseline.timeline).get((tool, raw_input), set()))
    if why is None:
        return None
    return (
        f"the crash-free run is the one that went wrong: it made the call {len(done)} times. "
        f"In that run, {why[0].lower()}{why[1:].rstrip('.')}"
    )


def _plain_answer_of_unrun_call(
    timeline: Timeline, tool: str, raw_input: str, asks: Iterable[tuple[Any, str, str]]
) -> str | None:
    """Why the model did not ask again for a call that never ran, when the agent answered
    it with a result that is no error (an "outcome unknown" told as a plain result after a
    resume, or an error before the call told as a result): the first such answer,
    described; ``None`` if there is none."""
    from reference_agent.scripted import first_issue

    ids = {tool_use_id for _where, _first, tool_use_id in asks}
    asked_at = {
        str(tool_use_id): event.seq
        for event in timeline.of("model_response")
        for tool_use_id, _name, _input in event.data.get("tool_uses", ())
    }
    calls = [
        e.seq
        for e in timeline.of("tool_call")
        if e.data.get("tool") == tool and canonical(e.data.get("input")) == raw_input
    ]
    ends = [e.seq for e in timeline.of("attempt_end")]
    failures = [e.seq for e in timeline.of("store_save_failed", "store_outage", "api_fault", "tool_error")]
    for event, block in _sent_results(timeline):
        use_id = str(block.get("tool_use_id"))
        if (
            first_issue(use_id) in ids
            and not block.get("is_error")
            and not any(asked_at.get(use_id, -1) < seq < event.seq for seq in calls)
        ):
            said = (
                f"Model request #{event.data.get('index')} answered tool_use {use_id} with a "
                f"result that is not an error ({_cut(_result_text(block.get('content')), 100)}) "
                f"although {tool} never ran for it, so the model took the call for done."
            )
            asking = _request_of(timeline, asked_at.get(use_id, -1))
            cut = _cut_reply(timeline, asking)
            if cut is not None:
                # An outside round's streaming agent kept a reply a dropped connection cut,
                # and ran the call with the part of its input that had come.
                return (
                    f"{said} The reply that asked for it was cut short ({cut} on model request "
                    f"#{asking}): the agent "
                    "kept the part of the reply that had come as if it were whole, and ran a "
                    "call whose input was cut (another input, so not this call). A stream that "
                    "ends without its message_stop event is no reply: ask again (the SDK's "
                    "get_final_message() raises for it), never run its calls"
                )
            if any(asked_at.get(use_id, -1) < end < event.seq for end in ends):
                return (
                    f"{said} If the agent could not know the outcome (a crash after the intent "
                    "was recorded), answer with is_error: true: a model asks again for a call "
                    "answered with an error, and fuzz reports the tool unsafe if the first call "
                    "had happened. (An agent with an outbox answers \"queued\" on purpose and "
                    "makes the call later: then the entry was lost or never dispatched. Save the "
                    "entry with the turn that asked for it, mark it dispatched only after the "
                    "call, and dispatch what is left when it resumes.)"
                )
            if any(asked_at.get(use_id, -1) < seq < event.seq for seq in failures):
                return (
                    f"{said} Within one attempt: something failed before the tool ran (a failed "
                    "intent save, say) and its error went to the model as an ordinary result (a "
                    "framework that turns a tool's exception into its result, without is_error). "
                    "Answer such a call with is_error: true, or end the attempt, so the call is "
                    "asked for again."
                )
            # Nothing failed between the ask and the answer: the agent answered without
            # running the call on purpose (an outbox's "queued"), and lost it afterwards.
            after = next((end for end in ends if end > event.seq), None)
            lost_when = (
                " The attempt that answered it ended before making the call, and no later "
                "attempt made it."
                if after is not None
                else ""
            )
            return (
                f"{said} Nothing failed between the request and that answer: the agent answered "
                f"the call without running it, as an outbox does (\"queued\", the call made "
                f"later).{lost_when} Save the entry with the turn that answered it, mark it "
                "dispatched only after the call, and on every resume dispatch what is left "
                "before the task counts as done (a task saved completed with entries left must "
                "still dispatch them)."
            )
    return None


def _request_of(timeline: Timeline, response_seq: int) -> Any:
    """The request index of the model response at ``response_seq``."""
    event = timeline.events[response_seq] if 0 <= response_seq < len(timeline.events) else None
    return None if event is None else event.data.get("index")


def _cut_reply(timeline: Timeline, index: Any) -> str | None:
    """The stream fault that cut the reply to model request ``index``, if one did: its kind."""
    from .faults import STREAM_FAULT_KINDS

    if index is None:
        return None
    for event in timeline.of("api_fault"):
        if event.data.get("index") == index and event.data.get("fault") in STREAM_FAULT_KINDS:
            return str(event.data.get("fault"))
    return None


def effects_in_doubt(timeline: Timeline) -> set[int]:
    """Effects followed by the end of their attempt with no durable write in between.

    The end of an attempt is a crash, or the agent raising or returning: seen from
    outside, an agent that exits and one that dies are the same, and neither could have
    recorded the outcome. (After a crash the attempt is dead, so nothing of it follows.)
    """
    lost: set[int] = set()
    pending: list[int] = []
    for event in timeline:
        if event.kind == "effect":
            pending.append(event.seq)
        elif event.kind == "store_save":
            pending.clear()
        elif event.kind in ("crash", "attempt_end"):
            lost.update(pending)
            pending.clear()
    return lost


# The name this had when only crashes ended an attempt.
_effects_lost_to_crash = effects_in_doubt


def answer_in_doubt(
    timeline: Timeline, tools: Mapping[str, ToolFlags], baseline: Baseline, answer: str | None
) -> list[UnsafeTool]:
    """The unsafe tools that excuse an answer other than the crash-free run's, if any.

    An effect of an irreversible tool that honours no key, whose attempt ended before any
    durable record of its outcome (:func:`effects_in_doubt`), and whose call a later
    request answered with an error (the resume's "outcome unknown"): no agent could know
    that outcome, so the model's answer may differ (an agent that plans once and asks the
    model only for its summary has no turn in which the model could check). Nothing else
    excuses a different answer.
    """
    doubtful = effects_in_doubt(timeline)
    excuses: list[UnsafeTool] = []
    for event in timeline.of("effect"):
        if event.seq not in doubtful:
            continue
        tool = event.data["tool"]
        flags = tools.get(tool)
        if flags is not None:
            flags = flags.for_input(event.data["input"])
        if flags is None or not flags.can_duplicate or flags.idempotent:
            continue
        if not any(_answers_with_error(request, block, tool) for request, block in _sent_results(timeline, after=event.seq)):
            continue
        key = (tool, canonical(event.data["input"]))
        times = sum(1 for e in timeline.of("effect") if (e.data["tool"], canonical(e.data["input"])) == key)
        if times > baseline.effects.get(key, 0):
            continue  # repeated: no_duplicate_effect judges it
        excuses.append(UnsafeTool(tool, event.data["input"], times, baseline.effects.get(key, 0), answer=answer or ""))
    return excuses


def _answers_with_error(request: Event, block: Mapping[str, Any], tool: str) -> bool:
    """Whether ``block`` (a tool_result of ``request``) answers a call of ``tool`` with an error."""
    if not block.get("is_error"):
        return False
    wanted = block.get("tool_use_id")
    for message in request.data.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        for use in content if isinstance(content, list) else ():
            if isinstance(use, Mapping) and use.get("type") == "tool_use" and use.get("id") == wanted:
                return use.get("name") == tool
    return False


def give_up_advice(timeline: Timeline, tools: Mapping[str, ToolFlags] | None = None) -> list[Advice]:
    """Advice for an agent that gave up on a store fault while an outcome was unrecorded.

    Stopping is legitimate (the effect is then in doubt, not a bug), but a transient
    outage is better met by retrying the outcome write: the outcome is known right now,
    and after the restart it is not.
    """
    advice: list[Advice] = []
    pending: list[Event] = []
    failed_write = False
    # Whether a save came between the model's latest reply and an effect: without one,
    # nothing of the call was durable when it ran, and a resume cannot know it is in doubt
    # (the violation's own words say what to do; "that is allowed" would contradict them).
    saved_since_reply = unsaved_effect = False
    for event in timeline:
        if event.kind == "attempt_start":
            pending, failed_write, saved_since_reply, unsaved_effect = [], False, False, False
        elif event.kind == "model_response":
            saved_since_reply = False
        elif event.kind == "effect":
            pending.append(event)
            failed_write = False
            unsaved_effect = unsaved_effect or not saved_since_reply
        elif event.kind == "store_save":
            pending, failed_write, unsaved_effect = [], False, False
            saved_since_reply = True
        elif event.kind == "store_save_failed" and pending:
            failed_write = True
        elif (
            event.kind == "attempt_end"
            and event.data.get("outcome") in ("error", "stopped")
            and failed_write
            and not unsaved_effect
        ):
            names = ", ".join(dict.fromkeys(f"{e.data['tool']}({_short(e.data['input'], 40)})" for e in pending))
            # A call made with an idempotency key is not in doubt: a resume sends it again
            # under the same key, and the tool drops the repeat. Nor is a repeat-safe one
            # (an outside round's status update, sent with no key, was told about its key).
            kinds = [_kind_of(tools, e) for e in pending]
            if all(kind == "repeat-safe" for kind in kinds):
                then = "the resume makes it again, and a repeat of it has no second effect"
            elif all(kind == "repeat-safe" or e.data.get("key") is not None for kind, e in zip(kinds, pending, strict=True)):
                then = "the resume sends it again with its idempotency key, and the tool drops the repeat"
            else:
                then = "the action is then in doubt on resume"
            advice.append(
                Advice(
                    "store_give_up",
                    f"attempt {event.attempt} stopped on a failed checkpoint write while the "
                    f"outcome of {names} was not recorded; that is allowed ({then}), but a "
                    "transient store outage is better met by retrying the outcome write with "
                    "backoff before giving up.",
                )
            )
            pending, failed_write = [], False
    return advice


def _kind_of(tools: Mapping[str, ToolFlags] | None, effect: Event) -> str | None:
    """The kind of the tool an effect was of, for its input, if the tools are known."""
    flags = None if tools is None else tools.get(str(effect.data.get("tool")))
    return None if flags is None else flags.for_input(effect.data.get("input")).kind


def unwinding_advice(timeline: Timeline) -> list[Advice]:
    """For a failure of an agent that saved nothing through the store, after a crash in
    process: the crash was a ``SystemExit`` raised at its point, and code that ran while it
    unwound may have written the agent's own state, which a killed process would not have
    written. Process mode tells the two apart. None when the agent saved through the store
    (the harness refuses its writes once the attempt has crashed) or nothing crashed."""
    if timeline.of("store_save") or not timeline.of("crash"):
        return []
    return [
        Advice(
            "crash_unwinding",
            "the agent keeps its state outside the store fuzz handed it, and in memory mode a "
            "crash is a SystemExit raised at its point: code that runs while it unwinds (a "
            "finally: block, a framework's after-step hook or persister) still runs, and what "
            "it writes to the agent's own storage a killed process would not have written. A "
            "Ctrl-C or sys.exit() would write it too, so it may be a hazard of its own, but if "
            "it is what happened here this verdict is not a crash's: check the scenario in "
            'process mode (fuzz("module:run", "module:tools", mode="process")), where a crash '
            "is a SIGKILL.",
        )
    ]


def resume_drift_advice(timeline: Timeline, baseline: Timeline) -> list[Advice]:
    """What a resume may have failed to restore: the first model request of a resumed
    attempt sent a history the crash-free run sent too, but with another system prompt or
    other tools (state that chooses them, an active specialist or a mode, not loaded back).

    Advice, not a violation: an agent may tell the model on purpose that it resumed. None
    when the requests of the first attempt already differ from the crash-free run's in
    those (a prompt that changes from run to run: a clock, an id).
    """
    first_requests: dict[int, Event] = {}
    for event in timeline.of("model_request"):
        first_requests.setdefault(event.attempt, event)
    if len(first_requests) < 2:
        return []
    clean = baseline.of("model_request")

    def twin(event: Event) -> Event | None:
        sent = event.data.get("messages") or ()
        return next(
            (e for e in clean if len(e.data.get("messages") or ()) == len(sent) and e.data.get("messages") == sent),
            None,
        )

    def steering(event: Event) -> tuple[Any, Any]:
        return event.data.get("system"), event.data.get("tools")

    first = first_requests.get(1)
    match = None if first is None else twin(first)
    if first is None or match is None or steering(first) != steering(match):
        return []
    for attempt, event in sorted(first_requests.items()):
        match = twin(event) if attempt > 1 else None
        if match is None or steering(event) == steering(match):
            continue
        sent = event.data.get("messages")
        if any(e.data.get("messages") == sent and steering(e) == steering(event) for e in clean):
            # The crash-free run sent the same history twice, asking two things of it (the
            # next turn, and a summary of the history to compact it): this is the second.
            continue
        what = [
            name
            for name, ours, theirs in (
                ("another system prompt", event.data.get("system"), match.data.get("system")),
                ("other tools", event.data.get("tools"), match.data.get("tools")),
            )
            if ours != theirs
        ]
        return [
            Advice(
                "resume_drift",
                f"model request #{event.data.get('index')}, the first of resumed attempt {attempt}, "
                f"sent the history the crash-free run sent in its request #{match.data.get('index')}, "
                f"but with {' and '.join(what)}: state that chooses them (an active "
                "specialist, a mode) may not be restored from the checkpoint. A real model "
                "would go on differently. If the difference is on purpose (telling the model "
                "that the task resumed), ignore this.",
            )
        ]
    return _goal_again(first_requests, clean)


def _user_texts(event: Event) -> list[str]:
    """The text of each user turn's text content in a request, in order."""
    texts: list[str] = []
    for message in event.data.get("messages") or ():
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content.strip())
        elif isinstance(content, list):
            texts += [
                str(b.get("text", "")).strip()
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "text"
            ]
    return texts


def _goal_again(first_requests: Mapping[int, Event], clean: Sequence[Event]) -> list[Advice]:
    """A resumed attempt whose first request sends the task's opening user text more
    often than any request of the crash-free run did: the resume appended the goal to the
    restored history. The scripted model goes on from the history either way; a real one
    may start the task over. Advice: an agent may repeat it on purpose."""
    opening = next((texts[0] for texts in map(_user_texts, clean[:1]) if texts), "")
    if not opening:
        return []
    most = max(_user_texts(e).count(opening) for e in clean)
    for attempt, event in sorted(first_requests.items()):
        sent = _user_texts(event).count(opening)
        if attempt > 1 and sent > most:
            return [
                Advice(
                    "resume_drift",
                    f"model request #{event.data.get('index')}, the first of resumed attempt "
                    f"{attempt}, sends the task's opening message ({_short(opening, 60)}) "
                    f"{sent} times; no request of the crash-free run sent it more than {most}: "
                    "the resume appended the goal to the restored history. The scripted model "
                    "goes on from the history; a real model, asked for the task again, may "
                    "start it over. Resume with the restored history alone (a framework's "
                    "run with no new input), or ignore this if the repeat is on purpose.",
                )
            ]
    return []


def stale_load_advice(timeline: Timeline) -> list[Advice]:
    """What explains a failure whose resume went on from a stale checkpoint: a load that
    found a checkpoint whose stored history a save made before the load (of the same
    checkpoint, a later version; or of another key, as with snapshots never overwritten)
    had already extended. The first such load, or none.
    """
    saves: list[Event] = []
    by_version: dict[tuple[Any, Any], Event] = {}
    for event in timeline:
        if event.kind == "store_save":
            saves.append(event)
            by_version[(event.data.get("task_id"), event.data.get("version"))] = event
        elif event.kind == "store_load" and event.data.get("found"):
            loaded = by_version.get((event.data.get("task_id"), event.data.get("version")))
            held = (loaded.data.get("messages") or []) if loaded is not None else []
            if loaded is None or not held:
                continue
            newer = next(
                (
                    save
                    for save in reversed(saves)
                    if save.seq > loaded.seq
                    and len(save.data.get("messages") or ()) > len(held)
                    and list((save.data.get("messages") or ())[: len(held)]) == list(held)
                ),
                None,
            )
            if newer is None:
                continue
            # Snapshots under keys of their own: the newest is picked by its key.
            keys = (
                " (it picked the snapshot by its key: sorted as text, 'task@10' comes before "
                "'task@9'; compare numbers as numbers)"
                if loaded.data.get("task_id") != newer.data.get("task_id")
                else ""
            )
            return [
                Advice(
                    "stale_load",
                    f"attempt {event.attempt} resumed from a stale checkpoint: it loaded "
                    f"{_checkpoint_name(loaded)} ({len(held)} messages, iteration "
                    f"{loaded.data.get('iteration')}), but the agent had since saved "
                    f"{_checkpoint_name(newer)} ({len(newer.data.get('messages') or ())} messages, "
                    f"iteration {newer.data.get('iteration')}, status {newer.data.get('status')}), "
                    "which carries that history further. Load the newest checkpoint" + keys
                    + "; work done after the stale one is done again.",
                )
            ]
    return []


def _checkpoint_name(save: Event) -> str:
    return f"{save.data.get('task_id')!r} version {save.data.get('version')}"


def history_not_found(timeline: Timeline) -> str | None:
    """Why the oracles that read the stored history cannot check this run, or ``None``.

    The history is not found when the agent saved checkpoints and asked the model with a
    history, but no checkpoint held one where the harness looks (``checkpoint.messages``,
    or what ``fuzz(history=...)`` returns).
    """
    saves = timeline.of("store_save")
    requests = [e for e in timeline.of("model_request") if e.data.get("messages")]
    if not saves or not requests:
        return None
    if any(e.data.get("messages") for e in saves):
        return None
    only_completion = all(e.data.get("status") == "completed" for e in saves)
    if any("located" in e.data for e in saves):
        errors = [e.data["located"] for e in saves if isinstance(e.data.get("located"), str)]
        if len(errors) == len(saves):
            said = f"it raised on every one; the first time {errors[0]}"
        elif errors:
            said = (
                f"it returned None or an empty list on {len(saves) - len(errors)} and raised on "
                f"{len(errors)}; the first time {errors[0]}"
            )
        else:
            said = "it returned None or an empty list"
        return (
            f"the history= function given to fuzz found no messages in any of the "
            f"{len(saves)} checkpoint(s) the agent wrote ({said}), though the agent asked the "
            "model with a history: check it against a checkpoint the agent saves (replay a "
            "scenario and print store.load(task_id))"
        )
    return (
        f"the agent wrote {len(saves)} checkpoint(s) but none held the message history where "
        "the harness looks (checkpoint.messages): tell fuzz where it lives with "
        "history=lambda checkpoint: ... (for example checkpoint.artifacts['session']['messages'])"
        + (
            "; every checkpoint it wrote was of a completed task, so if it keeps no history at "
            "all a crash starts the task over and asks the model again"
            if only_completion
            else ""
        )
    )


#: The oracles that read the tool calls the agent makes through the toolbox it is given.
TOOL_ORACLES: tuple[str, ...] = ("no_duplicate_effect", "recorded_work_not_redone")


def tools_not_called(timeline: Timeline, names: Iterable[str], baseline: Timeline | None = None) -> str | None:
    """Why the oracles that count tool calls and effects cannot check this run, or ``None``:
    the agent answered the model's calls of a toolbox tool with results, but never called
    that tool through the toolbox ``fuzz`` handed it, so its effects were not seen (its
    tools run elsewhere: say a ``tool_runner`` given the agent's own ``@beta_tool``
    functions). A tool the crash-free run (``baseline``) called through the toolbox runs
    there: a call of it answered without a call (an outcome in doubt) is the agent's
    answer, which the oracles judge."""
    known = set(names)
    called = {e.data.get("tool") for e in timeline.of("tool_call")}
    if baseline is not None:
        called |= {e.data.get("tool") for e in baseline.of("tool_call")}
    asked: dict[str, str] = {}
    for event in timeline.of("model_response"):
        for tool_use_id, name, _input in event.data.get("tool_uses", ()):
            if name in known and name not in called:
                asked[str(tool_use_id)] = name
    if not asked:  # every toolbox tool the model asked for was called through the toolbox
        return None
    answered = {
        asked[str(block.get("tool_use_id"))]
        for _event, block in _sent_results(timeline)
        if not block.get("is_error") and str(block.get("tool_use_id")) in asked
    }
    if not answered:
        return None
    return (
        f"the model's calls of {', '.join(sorted(answered))} were answered with results, but "
        "the agent never called them through the toolbox fuzz handed it (run(..., tools=...)), "
        "so no tool call or effect of them was seen: its tools run elsewhere (a tool_runner "
        "given the agent's own @beta_tool functions, say). Give the runner tools that call "
        "tools.call(name, input, idempotency_key=...), as docs/fuzz-your-agent.md shows"
    )


#: The oracles that read what the agent saved through the store it is given.
SAVED_STATE_ORACLES: tuple[str, ...] = ("recorded_work_not_redone", "iteration_monotone")


def nothing_saved(timeline: Timeline) -> str | None:
    """Why the oracles that read the agent's saves had nothing to read, or ``None``: the
    agent asked the model but saved no checkpoint through the store it was given (its
    state lives elsewhere, say in a framework's own checkpointer, or nowhere)."""
    if timeline.of("store_save") or not timeline.of("model_request"):
        return None
    return (
        "the agent saved no checkpoint through the store fuzz handed it, so there was no "
        "recorded work or iteration count to read (an agent whose framework keeps its own "
        "checkpoints, such as a LangGraph checkpointer, is judged by its effects, answers "
        "and requests only). Save the state through `store` to have these checked"
    )


# -- 3 ---------------------------------------------------------------------------------
def same_answer(
    answer: str | None, baseline: Baseline, *, completed: bool, timeline: Timeline | None = None
) -> list[Violation]:
    """A completed run's answer equals the crash-free answer.

    With ``timeline``: when the model API failed before the answer (an ``api_outage``, or
    failed requests), the message says what an agent that gave up on a failed model call
    should do instead.
    """
    if not completed or answer == baseline.answer:
        return []
    resumed = timeline is None or bool(timeline.of("crash")) or len(timeline.of("attempt_start")) > 1
    message = (
        f"the {'resumed run' if resumed else 'run under faults (no crash, no resume)'} answered "
        f"{_short(answer)}; the crash-free run answered {_short(baseline.answer)}"
    )
    cut = [e for e in (timeline.of("api_fault") if timeline is not None else ()) if e.data.get("fault") == "max_tokens"]
    if cut and not resumed:
        message += (
            f". A reply was cut by max_tokens (request #{cut[0].data.get('index')}): an agent "
            "that takes a cut text for its final answer answers with a fragment; on "
            'stop_reason "max_tokens", ask the model to continue (or again) instead'
        )
    failed = [
        e for e in (timeline.of("api_fault") if timeline is not None else ())
        if e.data.get("fault") in _REQUEST_FAILED
    ]
    if any(e.data.get("outage") for e in failed):
        message += (
            ". An API outage came first: the model API failed for longer than the SDK's "
            "retries, and the agent finished with another answer. On a model call that "
            "fails for good, stop resumable (raise, or save with status running and "
            "return) or retry longer; never complete the task with a fallback answer"
        )
    elif failed:
        message += (
            f". API faults came first ({', '.join(sorted({str(e.data.get('fault')) for e in failed}))}): "
            "if the agent gave up on a failed model call, it should stop resumable (raise, "
            "or save with status running and return) or retry, not complete the task with "
            "a fallback answer"
        )
    return [Violation("same_answer", message)]


#: API faults that fail the request (no reply reaches the model's side or the agent).
_REQUEST_FAILED = frozenset({"rate_limit", "server_error", "overloaded", "timeout", "disconnect"})


#: API faults after which the model has answered a turn the agent never received whole
#: (or received cut by the token limit).
_REPLY_LOST = frozenset({"lost_response", "stream_disconnect", "stream_error", "max_tokens"})


def turns_lost(timeline: Timeline) -> int:
    """Model turns the agent lost to faults: one per crash and per reply an API fault took
    away, and more where an attempt ended (a crash, a failed save the agent raised on)
    with several replies answered since its last durable write (an agent that saves
    every few turns loses them all)."""
    lost = sum(1 for e in timeline.of("api_fault") if e.data.get("fault") in _REPLY_LOST)
    unsaved = crashes = 0
    for event in timeline.events:
        kind = event.kind
        if kind == "attempt_start":
            unsaved = crashes = 0
        elif kind == "store_save" and (event.data.get("messages") or event.data.get("iteration")):
            # A save that holds no history and no count (a ledger, an index or a lock kept
            # under a task id of its own) records none of the turns: an outside round's
            # agent, saving its conversation every third turn and a ledger before each
            # irreversible call, was told its budget was reset by a restart.
            unsaved = 0
        elif kind == "model_response" and event.data.get("status") == 200:
            unsaved += 1
        elif kind == "crash":
            crashes += 1
        elif kind == "attempt_end":
            # A crash loses at least the turn it cut; an attempt that ended otherwise
            # (the agent raised, or stopped) loses what it had not saved, an answer nothing.
            if event.data.get("outcome") != "answer":
                lost += max(crashes, unsaved)
            unsaved = crashes = 0
    return lost + crashes  # a crash with no attempt end recorded after it


# -- 4 ---------------------------------------------------------------------------------
def _went_back_within(timeline: Timeline, event: Event, task: Any, iteration: int) -> str:
    """Why a count went back between two saves of one attempt: one that loaded a higher
    count and then saved its own, counted from zero, restarted it."""
    loaded = next(
        (
            e.data.get("iteration")
            for e in timeline.of("store_load")
            if e.attempt == event.attempt and e.data.get("found") and e.data.get("task_id") == task and e.seq < event.seq
        ),
        None,
    )
    if isinstance(loaded, int) and iteration < loaded:
        return (
            f"attempt {event.attempt} loaded iteration {loaded} and then saved {iteration}: its "
            "count started over instead of going on from the loaded one (a counter of its own, "
            "or a framework's step count, reset at each run), so the budget does not span "
            "restarts"
        )
    return "the count went back within one attempt"


def _deleted_between(timeline: Timeline, task: Any, before: Event, after: Event) -> Event | None:
    """The last delete of checkpoint ``task`` between events ``before`` and ``after``."""
    deletes = [
        e for e in timeline.of("store_delete") if before.seq < e.seq < after.seq and e.data.get("task_id") == task
    ]
    return deletes[-1] if deletes else None


def _deleted_and_made_again(deleted: Event) -> str:
    return (
        f"the agent deleted this checkpoint (attempt {deleted.attempt}) and then saved it again "
        "from nothing, so the work it recorded (replies, results, the count) was done again. "
        "Keep a checkpoint until the work it records is recorded elsewhere too (a finished "
        "sub-task's result in its parent), and retry a failed step from its own checkpoint, "
        "not from a clean slate"
    )


def iteration_monotone(timeline: Timeline, *, budget: int | None = None) -> list[Violation]:
    """The stored iteration never goes backwards, and the budget spans restarts.

    With ``budget`` (the agent's iteration limit), the model answers at most ``budget``
    turns overall, plus the turns faults took away (:func:`turns_lost`).
    """
    violations: list[Violation] = []
    # Per checkpoint: an agent may keep several (a sub-task each, say), each with its own count.
    bests: dict[Any, Event] = {}
    for event in timeline.of("store_save"):
        iteration = event.data.get("iteration")
        if not isinstance(iteration, int):
            continue
        task = event.data.get("task_id")
        best = bests.get(task)
        if best is not None and iteration < best.data["iteration"]:
            violations.append(
                Violation(
                    "iteration_monotone",
                    f"the stored iteration went back from {best.data['iteration']} (checkpoint "
                    f"version {best.data.get('version')}) to {iteration} (version "
                    f"{event.data.get('version')}): "
                    + (
                        _deleted_and_made_again(deleted)
                        if (deleted := _deleted_between(timeline, task, best, event)) is not None
                        else "a restart reset the count, so the budget does not span restarts"
                        if event.attempt > best.attempt
                        else _went_back_within(timeline, event, task, iteration)
                    ),
                    {best.seq: f"iteration {best.data['iteration']}", event.seq: f"iteration {iteration} (BACKWARDS)"}
                    | ({} if deleted is None else {deleted.seq: "DELETED"}),
                )
            )
            break
        if best is None or iteration >= best.data["iteration"]:
            bests[task] = event
    if budget is not None:
        turns = model_turns(timeline)
        lost = turns_lost(timeline)
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
def recorded_work_not_redone(timeline: Timeline, tools: Mapping[str, ToolFlags] | None = None) -> list[Violation]:
    """Work recorded in the latest durable checkpoint is not done again.

    A model request equal to a prefix of the stored history that the stored history
    continues with the model's reply asks for a recorded reply again; a tool call all of
    whose requests (``tool_use`` ids) are answered successfully in the stored history
    runs recorded work again — when its result can be the one recorded: for each of those
    ids, the same call ran before the first durable save that answered it. An agent with
    an outbox answers a call ("queued") before a separate step makes it: its first call
    after the answer is the work, not a repeat of it. A read-only tool (``tools`` gives
    the kinds) is re-run freely: an agent that reads again what it read before the crash
    (a ticket that may have changed meanwhile) redoes no work that counts.

    An agent may keep several checkpoints (a sub-agent's conversation each, a ledger
    apart): each request is judged against the latest save of its conversation's
    checkpoint, the one whose stored history starts with the request's first message and
    that the agent loaded or saved last; the tool calls against the latest save of each.

    A reply is recorded only once the agent has it whole: a save made while the reply to
    that history was still streaming (before it was read to its end) holds at most a draft
    of it, and asking again for it redoes nothing.
    """
    # The latest save of each checkpoint, and when the agent last loaded or saved each.
    durable: dict[Any, Event] = {}
    touched: dict[Any, int] = {}
    asked: dict[tuple[str, str], set[str]] = defaultdict(set)
    answered_by: dict[Any, set[str]] = {}
    answered: set[str] = set()
    #: The first durable save that answered each tool_use id, and when each call ran.
    first_answer: dict[str, int] = {}
    calls: dict[tuple[str, str], list[tuple[int, Any]]] = defaultdict(list)
    call_keys: dict[tuple[str, str], set[str]] = defaultdict(set)
    # The checkpoints the agent restarted or read again since their latest save: only in
    # those can a request repeat recorded work. Before that it still has what it saved,
    # and a request alike is a new conversation (a second sub-task like the first).
    reread: set[Any] = set()
    # The messages of each request, the streamed replies not yet read to their end, and
    # the saves made while some were (request indices).
    requests: dict[Any, Sequence[Any]] = {}
    request_events: dict[Any, Event] = {}
    response_ids: dict[Any, frozenset[str]] = {}
    streaming: set[Any] = set()
    mid_stream: dict[int, frozenset[Any]] = {}
    # Each save by checkpoint and version, and the save each checkpoint was loaded from,
    # until the first request after the load: a reply the agent loaded is recorded, even
    # once a later save of its own dropped it again.
    versions: dict[tuple[Any, Any], Event] = {}
    loaded: dict[Any, Event] = {}
    for event in timeline:
        if event.kind == "store_save":
            task = event.data.get("task_id")
            versions[(task, event.data.get("version"))] = event
            if streaming:
                mid_stream[event.seq] = frozenset(streaming)
            durable[task] = event
            touched[task] = event.seq
            answered_by[task] = _answered_ids(event.data.get("messages") or ())
            answered = set().union(*answered_by.values())
            for tool_use_id in answered_by[task]:
                first_answer.setdefault(tool_use_id, event.seq)
            reread.discard(task)
        elif event.kind == "store_load":
            task = event.data.get("task_id")
            touched[task] = event.seq
            reread.add(task)
            source = versions.get((task, event.data.get("version"))) if event.data.get("found") else None
            if source is not None:
                loaded[task] = source
            else:
                loaded.pop(task, None)
        elif event.kind in ("attempt_start", "store_outage"):
            reread.update(durable)
            if event.kind == "attempt_start":
                streaming.clear()  # a new process reads no stream of the last one
                loaded.clear()
        elif event.kind == "model_response":
            for tool_use_id, name, tool_input in event.data.get("tool_uses", ()):
                asked[(name, canonical(tool_input))].add(tool_use_id)
            response_ids[event.data.get("index")] = frozenset(u[0] for u in event.data.get("tool_uses", ()))
            if event.data.get("streamed"):
                streaming.add(event.data.get("index"))
        elif event.kind == "model_delivered":
            streaming.discard(event.data.get("index"))
        elif event.kind == "model_request":
            sent = event.data.get("messages", [])
            requests[event.data.get("index")] = sent
            request_events[event.data.get("index")] = event
            if not durable:
                continue
            latest = _conversation_save(durable, touched, sent)
            if latest is None:
                continue
            # The first request after a load is the resumed one: judged against the save
            # loaded too (the agent may have saved a shorter history since).
            source = loaded.pop(latest.data.get("task_id"), None)
            judged = [latest] if latest.data.get("task_id") in reread else []
            if source is not None and source is not latest:
                judged.append(source)
            n = len(sent)
            for saved in judged:
                stored = _api_messages(saved.data.get("messages") or ())
                if (
                    n < len(stored)
                    and isinstance(stored[n], Mapping)
                    and stored[n].get("role") == "assistant"
                    and _same_history(stored[:n], sent)
                    and not _draft_of_streaming_reply(stored, n, mid_stream.get(saved.seq, frozenset()), requests)
                    and not _another_question(timeline, event, stored, n, request_events, response_ids)
                ):
                    hint = (
                        _not_resumed_hint(timeline, saved, event)
                        if saved is latest
                        else _dropped_after_load_hint(latest)
                    )
                    return [
                        Violation(
                            "recorded_work_not_redone",
                            f"model request #{event.data.get('index')} (attempt {event.attempt}) asks "
                            f"again for reply {n} of the history, which checkpoint version "
                            f"{saved.data.get('version')} already holds: " + hint,
                            {saved.seq: "recorded here", event.seq: "REDONE"}
                            | ({} if saved is latest else {latest.seq: "the reply dropped and saved"}),
                        )
                    ]
        elif event.kind == "tool_call":
            call = (event.data["tool"], canonical(event.data["input"]))
            ids = asked.get(call, set())
            key = event.data.get("key")
            calls[call].append((event.seq, key))
            # A keyed call repeats the runs under its key only: an agent's own call with a
            # key of its own (a compensation, a clean-up) that happens to have the input of
            # an earlier call of the model's is not that call, even made again.
            ran = [seq for seq, k in calls[call] if key is None or k == key]
            # A key no earlier run of the same call carried is a call of its own (an
            # outbox's second entry with the same input, dispatched before its answer was
            # saved), not a repeat; a repeat under a new key is an effect more than the
            # model asked for, which no_duplicate_effect judges.
            new_key = key is not None and key not in call_keys[call]
            if key is not None:
                call_keys[call].add(key)
            flags = (tools or {}).get(call[0])
            if flags is not None:
                flags = flags.for_input(event.data["input"])
            if (
                durable
                and ids
                and not new_key
                and (flags is None or flags.irreversible)
                and ids <= answered
                and all(any(seq < first_answer[i] for seq in ran) for i in ids)
            ):
                holder = next(
                    (durable[t] for t, held in answered_by.items() if ids & held), max(durable.values(), key=lambda e: e.seq)
                )
                return [
                    Violation(
                        "recorded_work_not_redone",
                        f"tool call {event.data['tool']}({_short(event.data['input'])}) in attempt "
                        f"{event.attempt} runs again though checkpoint version "
                        f"{holder.data.get('version')} holds its result (tool_use "
                        f"{', '.join(sorted(ids))})",
                        {holder.seq: "recorded here", event.seq: "REDONE"},
                    )
                ]
    return []


def _another_question(
    timeline: Timeline,
    event: Event,
    stored: Sequence[Any],
    n: int,
    request_events: Mapping[Any, Event],
    response_ids: Mapping[Any, frozenset[str]],
) -> bool:
    """Whether request ``event``, which sends the history ``stored[:n]`` again, asks the
    model another question than the one ``stored[n]`` answered, so that it cannot be asking
    for that reply again: a summary of the history made to compact it, say.

    It is when the reply calls tools and the request offers none (``tool_choice`` ``none``,
    or no tools); or when the request has another system prompt than the one the reply
    came from (found by the reply's ``tool_use`` ids; for a reply without calls, every
    earlier request that sent the same history) and its own reply never takes
    ``stored[n]``'s place: an agent that asks again under a system prompt changed on
    resume goes on from the new reply."""
    ids = _call_ids(stored[n])
    choice = event.data.get("tool_choice")
    offers_none = ("tools" in event.data and not event.data["tools"]) or (
        isinstance(choice, Mapping) and choice.get("type") == "none"
    )
    if ids and offers_none:
        return True
    if "system" not in event.data:
        return False
    if ids:
        sources = [request_events[i] for i, got in response_ids.items() if got == ids and i in request_events]
    else:
        sources = [e for e in request_events.values() if _same_history(stored[:n], e.data.get("messages", []))]
    sources = [e for e in sources if e.seq < event.seq]
    if not sources or any(e.data.get("system") == event.data.get("system") for e in sources):
        return False
    return not _reply_continues(timeline, event, stored[:n])


def _call_ids(message: Any) -> frozenset[str]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return frozenset(
        str(block.get("id"))
        for block in (content if isinstance(content, list) else ())
        if isinstance(block, Mapping) and block.get("type") == "tool_use"
    )


def _reply_continues(timeline: Timeline, request: Event, history: Sequence[Any]) -> bool:
    """Whether the reply to ``request`` is saved later as the next message of ``history``."""
    index = request.data.get("index")
    reply: Event | None = None
    for later in timeline.events:
        if later.seq <= request.seq:
            continue
        if reply is None:
            if later.kind == "model_response" and later.data.get("index") == index:
                reply = later
            continue
        if later.kind != "store_save":
            continue
        saved = _api_messages(later.data.get("messages") or ())
        n = len(history)
        if len(saved) <= n or not isinstance(saved[n], Mapping) or not _same_history(saved[:n], history):
            continue
        ids = frozenset(str(u[0]) for u in reply.data.get("tool_uses", ()))
        if ids:
            if _call_ids(saved[n]) == ids:
                return True
        elif _text_of(saved[n]) == reply.data.get("text"):
            return True
    return False


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(
        str(block.get("text", ""))
        for block in (content if isinstance(content, list) else ())
        if isinstance(block, Mapping) and block.get("type") == "text"
    )


def _draft_of_streaming_reply(
    stored: Sequence[Any], n: int, open_requests: frozenset[Any], requests: Mapping[Any, Sequence[Any]]
) -> bool:
    """Whether ``stored[n]``, the last message stored, was saved while the reply to the
    history before it was still streaming: then it is a draft of that reply at most."""
    if n != len(stored) - 1:
        return False
    return any(
        len(requests.get(index, ())) == n and _same_history(stored[:n], requests[index]) for index in open_requests
    )


def _conversation_save(durable: Mapping[Any, Event], touched: Mapping[Any, int], sent: Sequence[Any]) -> Event | None:
    """The latest save of the checkpoint that holds the conversation of a request whose
    messages are ``sent``: of the checkpoints whose stored history starts with the same
    message, the one the agent loaded or saved last."""
    if not sent:
        return None
    first = sent[0]
    best: Event | None = None
    for task, saved in durable.items():
        stored = _api_messages(saved.data.get("messages") or ())
        if not stored or not _same_history(stored[:1], [first]):
            continue
        if best is None or touched.get(task, -1) > touched.get(best.data.get("task_id"), -1):
            best = saved
    return best


def _same_history(stored: Sequence[Any], sent: Sequence[Any]) -> bool:
    """Whether ``sent`` is the ``stored`` history, up to what an agent changes in a copy
    for each request: ``cache_control`` marks (a breakpoint moved onto the latest block,
    on the request only), a string content written as one text block to carry one, and
    what it leaves out of earlier turns to save tokens: the content of tool results (older
    screenshots removed, long outputs cut), thinking blocks and server tool blocks, and
    keys of its own beside ``role`` and ``content``. The turns are the same when their
    text, their calls and the ids their results answer are."""
    if list(stored) == list(sent):
        return True
    return len(stored) == len(sent) and all(
        _turn(a) == _turn(b) for a, b in zip(stored, sent, strict=True)
    )


def _api_messages(stored: Sequence[Any]) -> Sequence[Any]:
    """A saved history as its requests send it: without the messages of another role
    than ``user`` and ``assistant`` (a history kept in a chat-completions shape holds its
    system prompt as its first message, which the agent sends as ``system=``)."""
    if all(not isinstance(m, Mapping) or m.get("role") in ("user", "assistant") for m in stored):
        return stored
    return [m for m in stored if not isinstance(m, Mapping) or m.get("role") in ("user", "assistant")]


#: Blocks of an earlier assistant turn that an agent may leave out of a request.
_DROPPABLE = frozenset({"thinking", "redacted_thinking", "server_tool_use", "mcp_tool_use"})


def _turn(message: Any) -> Any:
    """What identifies a message of a history (see :func:`_same_history`)."""
    out = _unmarked(message)
    if isinstance(out, dict) and "role" in out:
        # Keys of the agent's own beside role and content (a reply's usage, a timestamp)
        # are not sent.
        out = {"role": out["role"], "content": out.get("content")}
    if not isinstance(out, dict) or not isinstance(out.get("content"), list):
        return out
    blocks = []
    for block in out["content"]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in _DROPPABLE or (isinstance(kind, str) and kind.endswith("_tool_result")):
            continue
        if kind == "tool_result":
            block = {"type": "tool_result", "tool_use_id": block.get("tool_use_id")}
        blocks.append(block)
    return {**out, "content": blocks}


def _unmarked(value: Any) -> Any:
    """``value`` (a message, a block, a content) without ``cache_control``, string
    contents as one text block."""
    if isinstance(value, Mapping):
        out = {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(out.get("content"), str) and ("role" in out or out.get("type") == "tool_result"):
            out["content"] = [{"type": "text", "text": out["content"]}]
        return out
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _dropped_after_load_hint(latest: Event) -> str:
    return (
        "the agent loaded that checkpoint, dropped the reply, saved the shorter history "
        f"(version {latest.data.get('version')}) and asked again: the model's recorded "
        "decision is lost and paid for again, and the model may decide otherwise. Keep the "
        "reply and answer its tool calls (a read-only one run again, the others settled "
        "from their records)"
    )


def _not_resumed_hint(timeline: Timeline, durable: Event, event: Event) -> str:
    between = [e for e in timeline.events if durable.seq < e.seq < event.seq]
    if any(e.kind == "store_outage" and e.data.get("operation") == "load" for e in between):
        return "the agent did not resume from its checkpoint: a failed load was treated as 'no checkpoint'"
    task = durable.data.get("task_id")
    # A load of another key (a second checkpoint of the agent's, say its ledger) finding
    # nothing says nothing of this one.
    if any(
        e.kind == "store_load" and not e.data.get("found") and (task is None or e.data.get("task_id") in (None, task))
        for e in between
    ):
        return "the agent did not resume from its checkpoint: the load found none (was it deleted?)"
    if any(e.kind == "attempt_start" for e in between) and not any(
        e.kind == "store_load" and (task is None or e.data.get("task_id") in (None, task)) for e in between
    ):
        # An outside round's agent read a cache of its own first, and found an older copy.
        return (
            "the agent did not resume from its checkpoint: the attempt that asked again loaded "
            "nothing from the store, so it went on from state it keeps elsewhere (a cache, a "
            "file, a copy in memory), older than the checkpoint. Load the task from the store "
            "when a run starts; a cache in front of it must be checked against the store's version"
        )
    version = durable.data.get("version")
    if any(
        e.kind == "store_load" and e.data.get("found") and e.data.get("version") == version
        and (task is None or e.data.get("task_id") in (None, task))
        for e in between
    ):
        # It read the checkpoint that holds the reply, and sent a history without it.
        return (
            "the agent loaded that checkpoint and dropped the reply from the history it sent "
            "(a repair that removes tool_use blocks with no result, or a trim of the history's "
            "end): the model's recorded decision is lost and paid for again, and the model may "
            "decide otherwise. Keep the reply and answer its tool calls (a read-only one run "
            "again, the others settled from their records)"
        )
    return "the agent did not resume from its checkpoint"


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
