"""Scripted models: stand-ins for Claude whose replies are pure functions of the request.

A scripted model receives the JSON body of ``messages.create`` and returns the Messages
API's ``Message`` JSON. :class:`PlanModel` follows a :class:`Plan` (steps of parallel tool
calls, then a final answer) by reading the history it is sent, so that a crash-free run
and a crashed-and-resumed run of the same plan can be compared call for call.
:class:`CannedModel` replays a fixed list of replies.

>>> plan = Plan(steps=(Step(calls=(ToolCall("add", {"a": 1, "b": 2}),)),), final_answer="3")
>>> model = PlanModel(plan)
>>> request = {"model": "m", "messages": [{"role": "user", "content": "1+2?"}]}
>>> reply = model.respond(request)
>>> reply["stop_reason"], reply["content"][0]["name"], reply["content"][0]["id"]
('tool_use', 'add', 'toolu_s0c0a0')
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar, cast, runtime_checkable

__all__ = [
    "INTERLEAVED_THINKING_BETA",
    "CannedModel",
    "Plan",
    "PlanMismatchError",
    "PlanModel",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Step",
    "ToolCall",
    "interleaved_thinking",
    "limited_reply",
    "max_tokens_reply",
    "message_json",
    "redacted_thinking_block",
    "signature_matches",
    "thinking_block",
    "token_limited_content",
]

DEFAULT_MODEL = "claude-scripted"
# A turn that asks for only some of its step's missing calls (a forced ``tool_choice``,
# ``disable_parallel_tool_use``) names the calls it left for later: ``_d1-2``.
# A sub-agent's conversation (a call's own plan, ``ToolCall.plan``) has ids of its own,
# prefixed by the call's place in the plan: ``toolu_v0-1_s0c0a0`` (step 0, call 1).
_PLAN_ID = re.compile(r"^toolu_((?:v\d+-\d+_)*)s(\d+)c(\d+)a(\d+)(?:_d(\d+(?:-\d+)*))?(?:_g\d+)?$")
#: One of our ids in a reply to a history asked again (see :meth:`PlanModel._fresh`).
_REISSUED = re.compile(r"^(toolu_(?:v\d+-\d+_)*s\d+c\d+a\d+(?:_d\d+(?:-\d+)*)?)_g\d+$")


def first_issue(block_id: str) -> str:
    """The id the first reply gave to the call that ``block_id`` names again, in a reply
    of a :class:`PlanModel` to a history asked again; any other id as it is.

    >>> first_issue("toolu_s0c1a0_g2"), first_issue("toolu_s0c1a0"), first_issue("toolu_x_g1")
    ('toolu_s0c1a0', 'toolu_s0c1a0', 'toolu_x_g1')
    >>> first_issue("toolu_v0-1_s0c0a0_g1")
    'toolu_v0-1_s0c0a0'
    """
    match = _REISSUED.match(block_id)
    return match[1] if match else block_id
# What a PlanModel id names: (step, call), attempt + 1, the planned call, its class, and
# the calls of its step its turn left for later.
_PlanId = tuple[tuple[int, int], int, "ToolCall | None", int, frozenset[int]]


@runtime_checkable
class ScriptedModel(Protocol):
    """A model the fake API can host: request JSON in, ``Message`` JSON out."""

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to one ``messages.create`` request body."""
        ...


class ScriptExhaustedError(RuntimeError):
    """A :class:`CannedModel` was asked for more replies than it holds."""


class PlanMismatchError(ValueError):
    """A request asks for a reply the plan cannot give (a ``tool_choice`` that forces a
    tool the plan does not call next, or a planned call the tool has answered with an
    error :data:`MAX_ERROR_ANSWERS` times); the message says how to write the plan for it.

    The fake API answers it with HTTP 500 ``api_error`` (``x-should-retry: false``) whose
    message carries this one: a broken script, not a transient fault.
    """


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model will make: a tool name and its input.

    ``plan``: for a call the agent answers by running a sub-agent (a ``delegate`` or
    ``research`` tool of its own, whose sub-agent holds a conversation of its own with the
    model), the plan that conversation follows. A :class:`PlanModel` tells the
    sub-agent's conversation by its first message, which holds the call's longest string
    argument (the task the agent hands on): every request of that conversation gets its
    replies from ``plan``, under ids of its own (``toolu_v0-1_s0c0a0`` for step 0, call 1
    of the plan that made the call).

    >>> ToolCall("send_email", {"to": "a@example.com"}).to_dict()
    {'name': 'send_email', 'input': {'to': 'a@example.com'}}
    >>> sub = Plan(steps=(), final_answer="3 sources")
    >>> ToolCall.from_dict(ToolCall("delegate", {"task": "Find sources"}, plan=sub).to_dict()).plan == sub
    True
    """

    #: For :meth:`from_dict`: a key that is no field is an error, not ignored.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    name: str
    input: Mapping[str, Any] = field(default_factory=dict, hash=False)
    plan: Plan | None = None

    def __post_init__(self) -> None:
        if self.plan is not None and not isinstance(self.plan, Plan):
            raise ValueError("ToolCall.plan must be a Plan or None")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, for sending to a child process."""
        data: dict[str, Any] = {"name": self.name, "input": dict(self.input)}
        if self.plan is not None:
            data["plan"] = self.plan.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Inverse of :meth:`to_dict`; a ``ValueError`` that names what is missing or
        wrong, and shows the expected shape, for a dict of another shape."""
        return _from_dict(cls, data, "call")

    def key(self) -> tuple[str, str]:
        """Identity used to match this call against ``tool_use`` blocks in a history."""
        return (self.name, _canonical(self.input))


@dataclass(frozen=True)
class Step:
    """Tool calls the model makes together, in one assistant turn (parallel tool calls).

    ``text``: an optional text block the model writes before the calls.
    """

    #: For :meth:`from_dict`: a key that is no field is an error, not ignored.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    calls: tuple[ToolCall, ...]
    text: str | None = None

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("Step.calls must hold at least one ToolCall")
        if self.text is not None and not self.text.strip():
            raise ValueError("Step.text must be None or contain non-whitespace text")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, for sending to a child process."""
        return {"calls": [c.to_dict() for c in self.calls], "text": self.text}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        """Inverse of :meth:`to_dict`; a ``ValueError`` that names what is missing or
        wrong, and shows the expected shape, for a dict of another shape."""
        return _from_dict(cls, data, "step")


@dataclass(frozen=True)
class Plan:
    """Steps of tool calls, then a final answer.

    ``final_call``: the call the model makes once every step has succeeded when a request
    forces a tool (``tool_choice`` ``any``, or ``tool`` with this call's name): an agent's
    structured final answer through a ``submit`` tool, say. Without it, such a request
    gets ``final_answer`` as the input of the forced tool when that tool takes a single
    string argument, and :class:`PlanMismatchError` otherwise. A request that does not
    force a tool gets ``final_answer`` as text, as before.

    >>> plan = Plan(steps=(Step(calls=(ToolCall("lookup", {"q": "x"}),)),), final_answer="done")
    >>> Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    True
    """

    #: For :meth:`from_dict`: a key that is no field is an error, not ignored.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    steps: tuple[Step, ...]
    final_answer: str
    final_call: ToolCall | None = None

    def __post_init__(self) -> None:
        if not self.final_answer.strip():
            raise ValueError("Plan.final_answer must contain non-whitespace text")
        if self.final_call is not None and not isinstance(self.final_call, ToolCall):
            raise ValueError("Plan.final_call must be a ToolCall or None")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, for sending to a child process."""
        data: dict[str, Any] = {
            "steps": [s.to_dict() for s in self.steps],
            "final_answer": self.final_answer,
        }
        if self.final_call is not None:
            data["final_call"] = self.final_call.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """Inverse of :meth:`to_dict`. A dict of another shape is a ``ValueError`` that
        names what is missing or wrong, and shows the expected shape:

        >>> Plan.from_dict({"steps": [{"calls": [{"tool": "search"}]}], "final_answer": "ok"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: plan['steps'][0]['calls'][0]['name'] is missing; plan['steps'][0]['calls'][0]['tool'] is not a field. A plan as a dict looks like ...
        """
        return _from_dict(cls, data, "plan")


#: The shape :meth:`Plan.from_dict` reads, for its errors.
_PLAN_DICT_SHAPE = (
    "{'steps': [{'calls': [{'name': 'search', 'input': {'query': 'x'}}], 'text': None}], "
    "'final_answer': 'Done.'} (optional: a step's 'text', a call's 'input' and 'plan' "
    "(a plan of the same shape), the plan's 'final_call' (a call))"
)

_Built = TypeVar("_Built")


def _from_dict(cls: type[_Built], data: Any, where: str) -> _Built:
    """``cls`` (a plan, a step or a call) from its dict, validated by pydantic against the
    dataclasses themselves (their fields, types and checks); a ValueError naming every
    part missing or wrong, and showing the shape a plan dict has, when any is."""
    from pydantic import ValidationError

    try:
        built: _Built = _adapter(cast(Hashable, cls)).validate_python(data)
    except ValidationError as exc:
        raise ValueError(
            f"{'; '.join(_problem(where, error) for error in exc.errors())}. A plan as a dict "
            f"looks like {_PLAN_DICT_SHAPE}"
        ) from None
    return built


@functools.cache
def _adapter(cls: Any) -> Any:
    """pydantic's validator of ``cls`` (a dataclass of this module), built once."""
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def _problem(where: str, error: Any) -> str:
    """One of pydantic's errors, said of the part of the dict it is about."""
    path = where + "".join(f"[{part!r}]" for part in error["loc"])
    if error["type"] == "missing":
        return f"{path} is missing"
    if error["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        return f"{path} is not a field"
    # The dict form holds lists where the dataclasses hold tuples.
    message = str(error["msg"]).removeprefix("Value error, ").replace("a valid tuple", "a list")
    if error["type"] == "value_error":
        return f"{path} is refused: {message}"
    return f"{path}: {message}, not {error['input']!r:.80}"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _block_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, Mapping):
        return dict(block)
    return {
        k: getattr(block, k, None)
        for k in ("type", "id", "name", "input", "tool_use_id", "is_error")
    }


def _estimate_tokens(content: Sequence[Mapping[str, Any]]) -> int:
    # About four characters per token, as a rough stand-in for the real tokenizer.
    return max(1, len(_canonical(list(content))) // 4)


def message_json(
    content: str | Sequence[Mapping[str, Any]],
    *,
    model: str = DEFAULT_MODEL,
    stop_reason: str | None = None,
    message_id: str | None = None,
    input_tokens: int = 0,
) -> dict[str, Any]:
    """A complete Messages API ``Message`` JSON around ``content``.

    ``stop_reason`` defaults to ``tool_use`` when the content calls tools, else ``end_turn``.

    >>> message_json("Hello", message_id="msg_1")["content"]
    [{'type': 'text', 'text': 'Hello'}]
    """
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}]
        if isinstance(content, str)
        else [dict(b) for b in content]
    )
    if stop_reason is None:
        uses_tools = any(b.get("type") == "tool_use" for b in blocks)
        stop_reason = "tool_use" if uses_tools else "end_turn"
    if message_id is None:
        digest = hashlib.sha256(_canonical([blocks, stop_reason]).encode()).hexdigest()
        message_id = f"msg_{digest[:24]}"
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "model": model,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": _estimate_tokens(blocks)},
    }


class PlanModel:
    """Follows a :class:`Plan`, reading only the history it is sent.

    At each request it finds the earliest step with calls whose successful result it has
    not seen (a ``tool_use`` with the call's name and input, answered by a ``tool_result``
    without ``is_error``) and asks for all of that step's missing calls in one turn. A call
    answered with an error is asked for again with a fresh id, as real models retry, up to
    :data:`MAX_ERROR_ANSWERS` error answers to one call; then :class:`PlanMismatchError`
    says the tool keeps refusing it (its input does not fit the tool's schema, say). Ids
    are ``toolu_s{step}c{call}a{attempt}``: deterministic, and unique in the conversation.
    When every step has succeeded it answers with ``plan.final_answer``.

    A history asked again (an agent that lost the reply, to a crash before its save, and
    asks the same question) gets the same reply under fresh ids, as the API gives every
    reply ids of its own: ``toolu_s0c0a0_g1`` for the second reply holding
    ``toolu_s0c0a0``, and so on (message ids alike). So an agent that keys an action by
    the id of a reply it never saved does the action again under a new key, as it would
    against the API.

    Progress survives a compacted history: the last turn in the history that asked for
    planned calls by these ids says where the plan is (it asked for its step's calls
    that were missing then, once every earlier step had succeeded). An agent that
    replaces its older turns by a summary and keeps its latest exchange therefore goes
    on where it was, as a model reading the summary would, instead of being asked for
    the whole plan again.

    Several conversations: a call with a plan of its own (``ToolCall(..., plan=...)``, a
    task the agent hands to a sub-agent) is followed, in the conversation whose first
    message holds the call's task text, by that plan, under ids of its own; every other
    conversation follows ``plan``. A step that calls a tool the request's ``tools`` does
    not offer is :class:`PlanMismatchError`, as the API never calls a tool it was not
    given. A request that offers no tools at all still gets the plan's calls (scripted
    replies for tests that send none), unless ``strict_tools``: then it is answered in
    text, as with ``tool_choice`` ``none``, and the plan waits for a request that offers
    tools, as Claude would (fuzz, the chaos harness and the ``agentckpt_model(plan=...)``
    fixture set it: a planner call without tools is a common design).

    Server tools: a request whose ``tools`` offer a web search or web fetch tool (a
    definition of ``type`` ``web_search_*`` / ``web_fetch_*``) gets replies that use it,
    as Claude's do: a ``server_tool_use`` block (``srvtoolu_s0``) and its result in the
    assistant message, and, for every third step, a reply that stops there with
    ``pause_turn`` (see :meth:`_server_step`). A request that offers none gets the
    replies it always got.

    Thinking: a request that enables it gets replies that open with a signed thinking
    block (redacted for every second step), as Claude's do. With interleaved thinking
    (:func:`interleaved_thinking`) the reply of a parallel batch also thinks between its
    first two calls, on steps 0, 1, 3, 4, ... (redacted on 1, 4, ...); the reply after the
    tool results opens with thinking again.

    >>> model = PlanModel(Plan(steps=(), final_answer="Nothing to do."))
    >>> model.respond({"messages": [{"role": "user", "content": "hi"}]})["content"]
    [{'type': 'text', 'text': 'Nothing to do.'}]
    """

    def __init__(self, plan: Plan, *, model: str | None = None, strict_tools: bool = False) -> None:
        self.plan = plan
        self.model = model
        self.strict_tools = strict_tools
        # What this model's ids start with after ``toolu_`` (a sub-agent's plan: the call's
        # place, ``v0-1_``); and, for the model of the whole plan, each sub-agent's plan:
        # (the text its conversation's first message holds, its prefix, its plan), the
        # longest text first, and the model that follows each.
        self._prefix = ""
        self._routes: list[tuple[str, str, Plan]] = sorted(
            _sub_plans(plan, ""), key=lambda route: -len(route[0])
        )
        self._children: dict[str, PlanModel] = {}
        # The first message of the first conversation this model was asked (the lead's):
        # never a sub-agent's, whatever it holds.
        self._lead_first: str | None = None
        # Identical planned calls (same name and input) form one class; successes are
        # counted per class and consumed in plan order, so each identical call needs its
        # own success. Precomputed: respond() runs on every request of a test.
        class_by_key: dict[tuple[str, str], int] = {}
        self._steps: list[list[tuple[int, ToolCall, int]]] = []
        self._calls: dict[tuple[int, int], tuple[ToolCall, int]] = {}
        for s, step in enumerate(plan.steps):
            slots = []
            for c, call in enumerate(step.calls):
                cls = class_by_key.setdefault(call.key(), len(class_by_key))
                slots.append((c, call, cls))
                self._calls[(s, c)] = (call, cls)
            self._steps.append(slots)
        self._class_by_key = class_by_key
        # Each planned block's share of ``_estimate_tokens`` (its canonical JSON length
        # with an empty id), so a reply's usage costs no second JSON dump.
        self._text_len = [
            None if step.text is None else len(_canonical({"type": "text", "text": step.text}))
            for step in plan.steps
        ]
        self._use_len = {
            s_c: len(_canonical(_tool_use("", call))) for s_c, (call, _) in self._calls.items()
        }
        # What a tool_use id names, parsed once per distinct id string: ``(step, call),
        # attempt`` for the plan's own ids, ``None`` for others. A pure function of the
        # string, so the cache is correct across requests; bounded, as ids may be foreign.
        self._ids: dict[str, _PlanId | None] = {}
        # How many replies have held each id so far: a reply that would hold one again
        # (the same history asked again) gets fresh ids, as the API's replies do.
        self._issued: dict[str, int] = {}
        # The last scan of _respond_parsed: its messages, what they hold (uses by class,
        # successes per class, the next attempt of each call), to resume from.
        self._scanned: (
            tuple[
                list[Any],
                dict[Any, tuple[int, tuple[int, int]]],
                list[int],
                dict[tuple[int, int], int],
                tuple[int, frozenset[int], frozenset[int]] | None,
                set[tuple[int, int]],
                dict[tuple[int, int], tuple[int, Any]],
                dict[int, int],
            ]
            | None
        ) = None

    def _fresh(self, base: str) -> str:
        """``base`` the first time a reply holds it, then ``base_g1``, ``base_g2``, ..."""
        n = self._issued.get(base, 0)
        self._issued[base] = n + 1
        return f"{base}_g{n}" if n else base

    def _parse_id(self, block_id: str) -> _PlanId | None:
        """``((step, call), attempt + 1, planned call or None, its class, calls left for
        later)`` for one of our ids, ``None`` for another; remembered in ``self._ids``."""
        match = _PLAN_ID.match(block_id)
        parsed: _PlanId | None = None
        if match is not None and match[1] == self._prefix:
            s_c = (int(match[2]), int(match[3]))
            call, cls = self._calls.get(s_c, (None, -1))
            later = frozenset(int(c) for c in match[5].split("-")) if match[5] else frozenset()
            parsed = (s_c, int(match[4]) + 1, call, cls, later)
        if len(self._ids) >= _ID_CACHE_SIZE:
            self._ids.clear()
        self._ids[block_id] = parsed
        return parsed

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        """The next reply for the history in ``request["messages"]``."""
        return self._respond(request, resume=False)

    def _respond_parsed(self, request: dict[str, Any]) -> dict[str, Any]:
        """:meth:`respond` for a request its caller parsed afresh and will not edit (the
        fake API's): when its messages start with every message of the last such request
        (compared with ``==``), only the messages it adds are read."""
        return self._respond(request, resume=True)

    def _missing(
        self,
        latest: tuple[int, frozenset[int], frozenset[int]] | None,
        won: set[tuple[int, int]],
        succeeded: list[int],
    ) -> Iterator[tuple[int, list[tuple[int, ToolCall]]]]:
        """The step to ask for next and its calls still missing (nothing: answer).

        With a turn of ours in the history, progress is read from the last one: it asked
        for the calls of its step that were missing then (every earlier step, and the
        step's other calls, had succeeded), so only those calls are checked for a success
        of ours, and the next step follows. This holds whether or not the earlier turns
        are still in the history: an agent that compacts its older turns into a summary
        and keeps the latest exchange goes on where it was, as a model reading the
        summary would. A turn that asked for only some of them (a forced ``tool_choice``,
        ``disable_parallel_tool_use``) names the others in its ids: they are missing too.
        Without such a turn (a fresh history, or ids of another model), successes are
        counted per class of identical calls and consumed in plan order.
        """
        if latest is not None:
            s, asked, later = latest
            missing = [
                (c, call)
                for c, call, _ in self._steps[s]
                if (c in asked or c in later) and (s, c) not in won
            ]
            if missing:
                yield s, missing
                return
            if s + 1 < len(self._steps):
                yield s + 1, [(c, call) for c, call, _ in self._steps[s + 1]]
            return
        for s, slots in enumerate(self._steps):
            missing = []
            for c, call, cls in slots:
                if succeeded[cls] > 0:
                    succeeded[cls] -= 1
                else:
                    missing.append((c, call))
            if missing:
                yield s, missing
                return

    def _conversation(self, messages: Any) -> PlanModel:
        """The model that follows the conversation of ``messages``: a sub-agent's, when its
        first message holds the task of a call with a plan of its own, else this one."""
        if not self._routes or not messages:
            return self
        text = _opening_text(messages[0])
        if self._lead_first is None:
            self._lead_first = text
        if text == self._lead_first:
            return self
        for needle, prefix, plan in self._routes:
            if needle in text:
                child = self._children.get(prefix)
                if child is None:
                    child = PlanModel(plan, model=self.model, strict_tools=self.strict_tools)
                    child._prefix, child._routes = prefix, []
                    self._children[prefix] = child
                return child
        return self

    def _respond(self, request: dict[str, Any], *, resume: bool) -> dict[str, Any]:
        messages = request.get("messages") or ()
        if self._routes:
            conversation = self._conversation(messages)
            if conversation is not self:
                return conversation._respond(request, resume=resume)
        start = 0
        scanned = self._scanned
        self._scanned = None  # until this scan completes
        if resume and scanned is not None and type(messages) is list:
            known, class_of_use, succeeded, next_attempt, latest, won, failed, foreign = scanned
            n = len(known)
            if len(messages) >= n and (messages[:n] if len(messages) > n else messages) == known:
                start = n
        if start == 0:
            class_of_use = {}
            succeeded = [0] * len(self._class_by_key)
            next_attempt = {}
            # The last turn in the history that asked for planned calls by this model's
            # ids: its step and the calls it asked for (None: no such turn). And the
            # planned calls whose use by one of our ids succeeded.
            latest = None
            won = set()
            # Per planned call: how many error results answered its uses, and the last.
            failed = {}
            # Per class of planned call: its uses under ids not ours (an agent that replays
            # a journal may write the calls back under ids of its own, which the API
            # accepts). Each is an ask: the next asks for that call get a later attempt.
            foreign = {}
        ids = self._ids
        class_by_key = self._class_by_key
        final = (len(self._steps), 0)
        for i in range(start, len(messages)):
            message = messages[i]
            if type(message) is dict:
                role = message.get("role")
                content = message.get("content")
            else:
                role = _get(message, "role")
                content = _get(message, "content")
            if content is None or isinstance(content, str):
                continue
            if role == "assistant":
                asked: list[tuple[int, int]] = []
                later: frozenset[int] = frozenset()
                for block in content:
                    if type(block) is not dict:
                        block = _block_dict(block)
                    if block.get("type") != "tool_use":
                        continue
                    block_id = block.get("id")
                    if type(block_id) is not str:
                        block_id = str(block_id)
                    try:
                        parsed = ids[block_id]
                    except KeyError:
                        parsed = self._parse_id(block_id)
                    cls = -1
                    s_c = _NO_CALL
                    if parsed is not None:
                        s_c, attempt, planned, planned_cls, deferred = parsed
                        if attempt > next_attempt.get(s_c, 0):
                            next_attempt[s_c] = attempt
                        # Our own id names the planned call: a cheap equality check
                        # instead of canonical JSON.
                        if (
                            planned is not None
                            and planned.name == block.get("name")
                            and planned.input == block.get("input")
                        ):
                            cls = planned_cls
                            asked.append(s_c)
                            later |= deferred
                        elif s_c != final:
                            # (The final call, past the last step, is kept: its error
                            # answers are counted too.)
                            s_c = _NO_CALL
                    if cls < 0:
                        cls = class_by_key.get(
                            (str(block.get("name")), _canonical(block.get("input"))), -1
                        )
                        if parsed is None and cls >= 0:
                            foreign[cls] = foreign.get(cls, 0) + 1
                    class_of_use[block_id] = (cls, s_c)
                if asked and all(step == asked[0][0] for step, _ in asked):
                    latest = (asked[0][0], frozenset(c for _, c in asked), later)
            else:
                for block in content:
                    if type(block) is not dict:
                        block = _block_dict(block)
                    if block.get("type") != "tool_result":
                        continue
                    cls, s_c = class_of_use.get(block.get("tool_use_id"), _NO_USE)
                    if not block.get("is_error"):
                        if cls >= 0:
                            succeeded[cls] += 1
                            if s_c[0] >= 0:
                                won.add(s_c)
                    elif s_c[0] >= 0:
                        failed[s_c] = (failed.get(s_c, (0, None))[0] + 1, block.get("content"))

        if resume and type(messages) is list:
            self._scanned = (
                list(messages),
                class_of_use,
                list(succeeded),
                next_attempt,
                latest,
                set(won),
                dict(failed),
                dict(foreign),
            )
        model = self.model or str(request.get("model") or DEFAULT_MODEL)
        # With thinking enabled, a reply starts with a signed thinking block, as Claude's
        # do: agents must carry it back unchanged.
        thinking = _thinking_enabled(request)
        choice = _ToolChoice.of(request)
        # Structured outputs (``output_config.format``, or the beta's ``output_format``):
        # every text block the API writes is JSON of the schema, and the SDK's
        # ``messages.parse`` parses each one, so no free text goes before the calls.
        schema = output_schema(request)
        offered = _offered(request.get("tools"))
        for s, missing in self._missing(latest, won, succeeded):
            step = self.plan.steps[s]
            if choice.kind == "none" or (self.strict_tools and offered is None):
                # tool_choice "none" (or, with strict_tools, no tools offered): Claude
                # answers in text, and the plan waits for a request that lets it call tools.
                names = ", ".join(call.name for _, call in missing)
                return self._text_reply(
                    structured_text(schema, f"Step {s + 1} of the plan still needs: {names}."),
                    request,
                    model,
                    self._fresh(f"msg_{self._prefix}{len(messages):04d}s{s}wait"),
                )
            chosen = missing
            if choice.kind == "tool":
                chosen = [(c, call) for c, call in missing if call.name == choice.name]
                if not chosen:
                    raise PlanMismatchError(_forced_mismatch(choice.name, s, missing))
            if choice.one:
                chosen = chosen[:1]
            if offered is not None and any(call.name not in offered for _, call in chosen):
                raise PlanMismatchError(_not_offered(s, chosen, offered, messages, bool(self._prefix)))
            for c, call in chosen:
                errors, last = failed.get((s, c), (0, None))
                if errors >= MAX_ERROR_ANSWERS:
                    where = f"step {s + 1} of {'its sub-agent plan' if self._prefix else 'the plan'}"
                    raise PlanMismatchError(_keeps_failing(where, call, errors, last))
            left = [c for c, _ in missing if all(c != k for k, _ in chosen)]
            suffix = f"_d{'-'.join(str(c) for c in left)}" if left else ""
            blocks: list[dict[str, Any]] = []
            text_len = self._text_len[s]
            # The canonical JSON of the block list: brackets, commas, the blocks.
            size = 1
            # A request that offers a server tool (web search, web fetch) gets replies that
            # use it, as Claude's do: see _server_step. Only then; other requests take the
            # path below unchanged.
            server = None if choice.forced else _server_tool(request.get("tools"))
            search: list[dict[str, Any]] = []
            pause = False
            if server is not None:
                search, pause = self._server_step(server, s, missing, messages)
                if not search and s % 3 == 0 and _continues_search(messages):
                    # The rest of a paused turn sent back as the last message: the model
                    # goes on in the same turn, which opened with its thinking.
                    thinking = False
            if thinking:
                names = ", ".join(call.name for _, call in missing)
                reasoning = f"Step {s + 1} of the plan still needs: {names}."
                if s % 2:
                    # Every second step's reasoning comes redacted, as the API sends
                    # reasoning its safety systems flag: a turn that opens with
                    # ``redacted_thinking`` alone, which must come back as it came too.
                    block = redacted_thinking_block(reasoning)
                    size += len(block["data"]) + 40
                else:
                    block = thinking_block(reasoning)
                    size += len(block["thinking"]) + len(block["signature"]) + 50
                blocks.append(block)
            if search:
                blocks.extend(search)
                size += len(_canonical(search))
                if pause:
                    return _message(
                        blocks,
                        model,
                        "pause_turn",
                        self._fresh(f"msg_{self._prefix}{len(messages):04d}s{s}pause"),
                        max(1, size // 4),
                        server=server,
                    )
            # A forced tool_choice makes the API start the reply with the tool call: no
            # text before it.
            if step.text is not None and text_len is not None and not choice.forced and schema is None:
                blocks.append({"type": "text", "text": step.text})
                size += text_len + 1
            # Interleaved thinking: Claude may think between the calls of one turn. Steps
            # 0, 3, 6, ... of a parallel batch think after the first call, steps 1, 4, 7,
            # ... likewise in redacted form; the others do not.
            between: dict[str, Any] | None = None
            if thinking and len(chosen) > 1 and s % 3 != 2 and interleaved_thinking(request):
                rest = ", ".join(call.name for _, call in chosen[1:])
                reasoning = f"{chosen[0][1].name} is asked for; step {s + 1} also needs: {rest}."
                between = thinking_block(reasoning) if s % 3 == 0 else redacted_thinking_block(reasoning)
                size += len(_canonical(between)) + 1
            for n, (c, call) in enumerate(chosen):
                if n == 1 and between is not None:
                    blocks.append(between)
                attempt = max(next_attempt.get((s, c), 0), foreign.get(self._calls[(s, c)][1], 0))
                block_id = self._fresh(f"toolu_{self._prefix}s{s}c{c}a{attempt}{suffix}")
                blocks.append(_tool_use(block_id, call))
                size += self._use_len[(s, c)] + len(block_id) + 1
            return _message(
                blocks,
                model,
                "tool_use",
                self._fresh(f"msg_{self._prefix}{len(messages):04d}s{s}a{max(next_attempt.values(), default=0)}"),
                max(1, size // 4),
                server=server if search else None,
            )
        if choice.forced:
            # Every step has succeeded and the request forces a tool: the plan's final
            # call (a structured answer), under an id past the last step.
            n = len(self._steps)
            call = self._final_call(choice, request)
            errors, last = failed.get(final, (0, None))
            if errors >= MAX_ERROR_ANSWERS:
                where = f"the final call of {'its sub-agent plan' if self._prefix else 'the plan'}"
                raise PlanMismatchError(_keeps_failing(where, call, errors, last))
            blocks = [thinking_block("Every step of the plan has succeeded.")] if thinking else []
            blocks.append(_tool_use(self._fresh(f"toolu_{self._prefix}s{n}c0a{next_attempt.get((n, 0), 0)}"), call))
            return message_json(
                blocks, model=model, stop_reason="tool_use",
                message_id=self._fresh(f"msg_{self._prefix}{len(messages):04d}call"),
            )
        return self._text_reply(
            structured_text(schema, self.plan.final_answer),
            request,
            model,
            self._fresh(f"msg_{self._prefix}{len(messages):04d}final"),
            "Every step of the plan has succeeded." if thinking else None,
        )

    def _server_step(
        self, server: tuple[str, str], s: int, missing: Sequence[tuple[int, ToolCall]], messages: Any
    ) -> tuple[list[dict[str, Any]], bool]:
        """The server tool blocks a reply asking for step ``s`` holds, and whether the reply
        stops there with ``pause_turn``.

        Which steps use the server tool is a pure function of the step's index, so a
        plan needs nothing new: step 0, 3, 6, ... searches and pauses (the reply holds the
        ``server_tool_use`` and its result, ``stop_reason: "pause_turn"``; the paused turn
        sent back as the last message, or followed by the agent's own message, gets the
        rest of the step: its text and calls); step 1, 4, 7, ... searches in the reply
        that makes the calls; the others do not search. A paused step whose search is
        already in the history since the last turn that made calls goes on with its
        calls; a history asked again without it searches again, under a fresh id
        (``srvtoolu_s0``, then ``srvtoolu_s0_g1``, ...).
        """
        kind = s % 3
        if kind == 2:
            return [], False
        if kind == 0 and _searched(messages, f"srvtoolu_{self._prefix}s{s}"):
            return [], False
        use_id = self._fresh(f"srvtoolu_{self._prefix}s{s}")
        names = ", ".join(call.name for _, call in missing)
        return _server_blocks(server, use_id, s, names), kind == 0

    def _text_reply(
        self,
        text: str,
        request: Mapping[str, Any],
        model: str,
        message_id: str,
        thinking: str | None = None,
    ) -> dict[str, Any]:
        """A text reply (``end_turn``), opened by a signed ``thinking`` block when one is
        given. When the history ends with an assistant turn whose text starts this reply's
        (a reply cut by ``max_tokens``, sent back as a prefill to be continued), the reply
        holds only the rest of the text, as the API continues a prefill."""
        prefill = _prefilled_text(request.get("messages"))
        if prefill and text.startswith(prefill) and len(text) > len(prefill):
            text = text[len(prefill) :]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if thinking is not None:
            blocks.insert(0, thinking_block(thinking))
        return message_json(blocks, model=model, stop_reason="end_turn", message_id=message_id)

    def _final_call(self, choice: _ToolChoice, request: Mapping[str, Any]) -> ToolCall:
        """The call a forced ``tool_choice`` gets once the plan is done (see :class:`Plan`)."""
        final = self.plan.final_call
        if final is not None and (choice.kind == "any" or final.name == choice.name):
            return final
        if choice.kind == "tool" and choice.name is not None:
            argument = _single_string_argument(request.get("tools"), choice.name)
            if argument is not None:
                return ToolCall(choice.name, {argument: self.plan.final_answer})
        raise PlanMismatchError(_finished_mismatch(choice, final))


@dataclass(frozen=True)
class _ToolChoice:
    """What a request's ``tool_choice`` asks of the model: ``auto`` (the default, and
    for a value it does not know), ``any``, ``tool`` (``name``) or ``none``; ``one``:
    ``disable_parallel_tool_use``.

    (A request without ``tools`` still gets the plan's calls, unless the model is
    ``strict_tools``: tests of the fake API rely on it, as scripted replies, not as what
    Claude would do.)
    """

    kind: str  # auto, any, tool, none
    name: str | None = None
    one: bool = False  # disable_parallel_tool_use: at most one tool_use

    @property
    def forced(self) -> bool:
        """Whether the reply must call a tool."""
        return self.kind in ("any", "tool")

    @classmethod
    def of(cls, request: Mapping[str, Any]) -> _ToolChoice:
        choice = request.get("tool_choice")
        if not isinstance(choice, Mapping):
            return _AUTO
        kind = choice.get("type")
        if kind not in ("auto", "any", "tool", "none"):
            return _AUTO
        name = choice.get("name") if kind == "tool" else None
        return cls(
            str(kind),
            None if name is None else str(name),
            choice.get("disable_parallel_tool_use") is True,
        )


_AUTO = _ToolChoice("auto")


def _task_text(call: ToolCall) -> str:
    """The longest string argument of ``call``'s input (nested ones included): the task
    its sub-agent's conversation starts with."""
    best = ""
    stack: list[Any] = [call.input]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if len(value.strip()) > len(best.strip()):
                best = value
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return best.strip()


def _sub_plans(plan: Plan, prefix: str) -> Iterator[tuple[str, str, Plan]]:
    """Each call with a plan of its own in ``plan`` (and in those plans): the task text its
    conversation starts with, the prefix of that conversation's ids, its plan."""
    for s, step in enumerate(plan.steps):
        for c, call in enumerate(step.calls):
            if call.plan is None:
                continue
            own = f"{prefix}v{s}-{c}_"
            task = _task_text(call)
            if not task:
                raise ValueError(
                    f"ToolCall({call.name!r}, ...) has a plan of its own but no string argument: "
                    "its sub-agent's conversation is told by its first message, which must hold "
                    "the call's task text"
                )
            yield task, own, call.plan
            yield from _sub_plans(call.plan, own)


def _opening_text(message: Any) -> str:
    """The text of a conversation's first message (its string content, or its text blocks)."""
    content = _get(message, "content")
    if isinstance(content, str):
        return content
    return "".join(
        str(_get(block, "text") or "") for block in content or () if _get(block, "type") == "text"
    )


def _offered(tools: Any) -> frozenset[str] | None:
    """The names of the tools a request offers; ``None`` when it offers none (a request
    without ``tools`` still gets the plan's calls)."""
    if not isinstance(tools, list) or not tools:
        return None
    return frozenset(str(_get(tool, "name")) for tool in tools)


def _not_offered(
    step: int, chosen: Sequence[tuple[int, ToolCall]], offered: frozenset[str], messages: Any, sub: bool
) -> str:
    names = ", ".join(sorted({call.name for _, call in chosen if call.name not in offered}))
    which = "its sub-agent plan" if sub else "the plan"
    opening = _opening_text(messages[0])[:80] if messages else ""
    return (
        f"step {step + 1} of {which} calls {names}, which this request does not offer (its tools: "
        f"{', '.join(sorted(offered))}); the API never answers with a call of a tool it was not "
        "given. A sub-agent's conversation (a tool the agent answers by running a sub-agent with "
        "tools of its own) follows the plan of the call that started it, "
        "ToolCall(name, {'task': ...}, plan=Plan(...)), when its first message holds that "
        f"call's task text; this conversation starts {opening!r}, which holds none, so it "
        "followed the lead's plan. Give the delegating call a plan of its own "
        "(pytest_agentckpt.sub_agent_plans draws such plans), and start the sub-agent's "
        "conversation with the task text it was given"
    )


#: How many error results (``is_error: true``) a :class:`PlanModel` takes for one planned
#: call before it gives up on it with :class:`PlanMismatchError`: a call the tool refuses
#: every time (a plan whose input the tool's schema does not accept) would otherwise be
#: asked for again forever. Generous, so that a few injected faults never reach it.
MAX_ERROR_ANSWERS = 20


def _keeps_failing(where: str, call: ToolCall, errors: int, last: Any) -> str:
    said = _result_text(last)
    return (
        f"the tool keeps answering errors to planned call {call.name}({_canonical(call.input)}) "
        f"({errors} times): check the plan's input against the tool's schema. A PlanModel asks "
        f"again for a call answered with is_error: true, as models do, and gives up after "
        f"{MAX_ERROR_ANSWERS} error answers to one call ({where})"
        + (f"; the tool's last answer: {said!r}" if said else "")
    )


def _result_text(content: Any) -> str:
    """The text of a ``tool_result``'s content (a string, or blocks), cut to 300 characters."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list | tuple):
        text = " ".join(str(_get(b, "text")) for b in content if _get(b, "type") == "text")
    else:
        text = ""
    text = text.strip()
    return text if len(text) <= 300 else text[:299] + "…"


def _forced_mismatch(name: str | None, step: int, missing: Sequence[tuple[int, ToolCall]]) -> str:
    needs = ", ".join(call.name for _, call in missing)
    return (
        f"tool_choice forces the tool {name!r}, but step {step + 1} of the plan calls {needs} "
        f"next and not {name!r}. A PlanModel calls only what its plan has next: write the "
        f"plan so that the step where the agent forces {name!r} calls it, e.g. "
        f"Step(calls=(ToolCall({name!r}, {{...}}),)); for a structured final answer forced "
        f"after the last step, give Plan(final_call=ToolCall({name!r}, {{...}}))"
    )


def _finished_mismatch(choice: _ToolChoice, final: ToolCall | None) -> str:
    forced = "any tool" if choice.kind == "any" else f"the tool {choice.name!r}"
    name = choice.name or "submit"
    have = (
        f"its final_call calls {final.name!r}"
        if final is not None
        else "it has no final_call"
    )
    return (
        f"tool_choice forces {forced} after every step of the plan has succeeded, and {have}. "
        f"Give the plan the call the agent expects then: Plan(steps, final_answer, "
        f"final_call=ToolCall({name!r}, {{...}})) (a forced tool that takes a single string "
        f"argument gets final_answer without it)"
    )


def _single_string_argument(tools: Any, name: str) -> str | None:
    """The one string property of tool ``name``'s ``input_schema`` in ``tools``, if it
    has exactly one property, or exactly one required property, of type string that
    admits any text (no ``enum``, ``const`` or ``pattern``)."""
    if not isinstance(tools, list):
        return None
    for tool in tools:
        if not isinstance(tool, Mapping) or tool.get("name") != name:
            continue
        schema = tool.get("input_schema")
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(properties, Mapping):
            return None
        required = schema.get("required") if isinstance(schema, Mapping) else None
        names = list(properties) if len(properties) == 1 else list(required or ())
        if len(names) == 1:
            prop = properties.get(names[0])
            free = isinstance(prop, Mapping) and not {"enum", "const", "pattern"} & set(prop)
            if free and isinstance(prop, Mapping) and prop.get("type") == "string":
                return str(names[0])
        return None
    return None


def _prefilled_text(messages: Any) -> str:
    """The text of the history's last message when it is an assistant turn (a prefill)."""
    if not isinstance(messages, list) or not messages:
        return ""
    last = messages[-1]
    if _get(last, "role") != "assistant":
        return ""
    content = _get(last, "content")
    if isinstance(content, str):
        return content
    text = ""
    for block in content or ():
        if _get(block, "type") == "text":
            text += str(_get(block, "text") or "")
    return text


def max_tokens_reply(message: Mapping[str, Any], max_tokens: int | None = None) -> dict[str, Any]:
    """``message`` as the API returns it when the reply reaches ``max_tokens``: cut short,
    ``stop_reason`` ``"max_tokens"``. A pure function of the reply.

    The cut falls in the last ``tool_use`` block when there is one: its input loses its
    last argument (the blocks after it are not written; one without arguments is not
    written at all), as the SDK parses a tool call whose JSON stopped mid-way. Otherwise
    the last text block keeps its first half (without trailing whitespace, so that the
    reply can be sent back as a prefill to be continued). ``usage.output_tokens`` becomes
    ``max_tokens`` when given.

    >>> cut = max_tokens_reply(message_json("The answer is forty-two."))
    >>> cut["stop_reason"], cut["content"]
    ('max_tokens', [{'type': 'text', 'text': 'The answer i'}])
    """
    blocks = [dict(b) for b in message.get("content") or ()]
    uses = [i for i, b in enumerate(blocks) if b.get("type") == "tool_use"]
    texts = [i for i, b in enumerate(blocks) if b.get("type") == "text"]
    if uses:
        i = uses[-1]
        arguments = list(dict(blocks[i].get("input") or {}).items())
        if arguments:
            blocks[i]["input"] = dict(arguments[:-1])
            blocks = blocks[: i + 1]
        else:
            blocks = blocks[:i]
    elif texts:
        i = texts[-1]
        text = str(blocks[i].get("text", ""))
        kept = text[: len(text) // 2].rstrip()
        blocks = blocks[:i] + ([{**blocks[i], "text": kept}] if kept else [])
    cut = dict(message)
    cut["content"] = blocks
    cut["stop_reason"] = "max_tokens"
    cut["stop_sequence"] = None
    if isinstance(message.get("id"), str):
        cut["id"] = f"{message['id']}_cut"
    usage = dict(message.get("usage") or {})
    if isinstance(max_tokens, int) and max_tokens > 0:
        usage["output_tokens"] = max_tokens
    cut["usage"] = usage
    return cut


def limited_reply(message: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` as the API ends it under the request's ``stop_sequences`` and
    ``max_tokens`` (``message`` itself, unchanged, when neither stops it). A pure function
    of the reply and the request; the fake API applies it to every generation.

    - ``stop_sequences``: the first text block that holds one of them ends before it (the
      one whose generation completes first, when several match), the blocks after it are
      not written; ``stop_reason`` ``"stop_sequence"``, ``stop_sequence`` the one matched,
      ``usage.output_tokens`` what is left. Only text is matched (not thinking, nor tool
      input).
    - ``max_tokens``: a reply longer than it by the scripted models' estimate (the
      canonical JSON of its content blocks, about four characters a token, as
      ``usage.output_tokens`` counts it) is cut where the limit falls, with ``stop_reason``
      ``"max_tokens"`` and ``usage.output_tokens == max_tokens``. See
      :func:`token_limited_content` for how each block is cut.

    >>> reply = message_json("Hello. Goodbye.")
    >>> cut = limited_reply(reply, {"max_tokens": 1024, "stop_sequences": [". G"]})
    >>> cut["content"], cut["stop_reason"], cut["stop_sequence"]
    ([{'type': 'text', 'text': 'Hello'}], 'stop_sequence', '. G')
    >>> cut = limited_reply(message_json("word " * 40), {"max_tokens": 16})
    >>> cut["stop_reason"], cut["usage"]["output_tokens"], len(cut["content"][0]["text"])
    ('max_tokens', 16, 39)
    >>> limited_reply(reply, {"max_tokens": 1024}) is reply
    True
    """
    blocks = message.get("content")
    if not isinstance(blocks, list) or not all(isinstance(b, Mapping) for b in blocks):
        return cast("dict[str, Any]", message)
    result = cast("dict[str, Any]", message)
    stops = request.get("stop_sequences")
    if isinstance(stops, list) and stops:
        hit = _first_stop(blocks, [s for s in stops if isinstance(s, str) and s])
        if hit is not None:
            index, at, sequence = hit
            text = str(blocks[index].get("text") or "")[:at]
            blocks = [*blocks[:index], *([{**blocks[index], "text": text}] if text else [])]
            result = dict(message)
            result["content"] = blocks
            result["stop_reason"] = "stop_sequence"
            result["stop_sequence"] = sequence
            result["usage"] = {**(message.get("usage") or {}), "output_tokens": _estimate_tokens(blocks)}
    limit = request.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return result
    reported = (result.get("usage") or {}).get("output_tokens")
    if (isinstance(reported, int) and reported <= limit) or _estimate_tokens(blocks) <= limit:
        # A reply that says it took no more than the limit fits (the scripted models
        # count it by the same estimate): its JSON is not made again.
        return result
    result = dict(result)
    result["content"] = token_limited_content(blocks, limit)
    result["stop_reason"] = "max_tokens"
    result["stop_sequence"] = None
    result["usage"] = {**(message.get("usage") or {}), "output_tokens": limit}
    return result


def _first_stop(blocks: Sequence[Mapping[str, Any]], stops: Sequence[str]) -> tuple[int, int, str] | None:
    """``(block index, offset, sequence)`` of the stop sequence the text of ``blocks``
    completes first: the earliest to end, then the earliest to start."""
    for index, block in enumerate(blocks):
        if block.get("type") != "text":
            continue
        text = str(block.get("text") or "")
        best: tuple[int, int, str] | None = None
        for sequence in stops:
            at = text.find(sequence)
            if at < 0:
                continue
            key = (at + len(sequence), at, sequence)
            if best is None or key[:2] < best[:2]:
                best = key
        if best is not None:
            return index, best[1], best[2]
    return None


def token_limited_content(blocks: Sequence[Mapping[str, Any]], max_tokens: int) -> list[dict[str, Any]]:
    """The content blocks a reply holds when its generation stops at ``max_tokens``, by the
    scripted models' estimate (:func:`limited_reply`): every block that fits whole, then
    the one the limit falls in, cut, and none after it.

    - a text block keeps the longest start that fits (without trailing whitespace, so that
      the reply can come back as a prefill to be continued); when nothing before it was
      written and not even its start fits the estimate's JSON overhead, it keeps its first
      ``4 * max_tokens`` characters;
    - a ``tool_use`` block is written incomplete, as the API writes a call cut short: its
      ``id`` and ``name`` with the leading arguments of its input that fit (``{}`` when
      none does), and is left out when not even that fits. An agent must not run it;
    - any other block (thinking, a server tool's blocks) is written whole or not at all;
      a server tool's call is left out with its result.

    >>> blocks = [{"type": "text", "text": "On it."},
    ...           {"type": "tool_use", "id": "t", "name": "send", "input": {"to": "ann", "body": "x" * 80}}]
    >>> token_limited_content(blocks, 25)[1]["input"]
    {'to': 'ann'}
    """
    kept: list[dict[str, Any]] = []
    for block in blocks:
        whole = dict(block)
        if _estimate_tokens([*kept, whole]) <= max_tokens:
            kept.append(whole)
            continue
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text") or "")
            low, high = 0, len(text)  # the longest start that fits: text[:low]
            while low < high:
                mid = (low + high + 1) // 2
                if _estimate_tokens([*kept, {**whole, "text": text[:mid]}]) <= max_tokens:
                    low = mid
                else:
                    high = mid - 1
            start = text[:low].rstrip()
            if not start and not kept:
                start = text[: 4 * max_tokens].rstrip()
            if start:
                kept.append({**whole, "text": start})
        elif kind == "tool_use":
            arguments = block.get("input")
            written: dict[str, Any] = {}
            if _estimate_tokens([*kept, {**whole, "input": written}]) <= max_tokens:
                for name, value in (arguments.items() if isinstance(arguments, Mapping) else ()):
                    if _estimate_tokens([*kept, {**whole, "input": {**written, name: value}}]) > max_tokens:
                        break
                    written[name] = value
                kept.append({**whole, "input": written})
        break
    if kept and kept[-1].get("type") == "server_tool_use":
        # A server tool's call whose result was not written: the API writes the result
        # with the call, so neither is written.
        kept.pop()
    return kept


_ID_CACHE_SIZE = 4096
_NO_CALL = (-1, -1)
_NO_USE: tuple[int, tuple[int, int]] = (-1, _NO_CALL)

# Signatures of the thinking blocks scripted models write: a keyed digest of the text, so
# the fake API can tell a block carried back unchanged from an edited one, as the API does.
_SIGNATURE_PREFIX = "ckptsig1"
_SIGNING_KEY = b"agentckpt offline thinking"


def _signature(thinking: str) -> str:
    digest = hashlib.sha256(_SIGNING_KEY + thinking.encode()).hexdigest()
    return f"{_SIGNATURE_PREFIX}{digest[:48]}"


def thinking_block(thinking: str) -> dict[str, Any]:
    """A ``thinking`` block with the signature scripted models give theirs.

    >>> block = thinking_block("Let me add.")
    >>> block["type"], signature_matches(block)
    ('thinking', True)
    """
    return {"type": "thinking", "thinking": thinking, "signature": _signature(thinking)}


def redacted_thinking_block(thinking: str) -> dict[str, Any]:
    """A ``redacted_thinking`` block as scripted models give one: its ``data`` is opaque,
    like the API's (here the signature of the reasoning it stands for).

    >>> redacted_thinking_block("Let me add.")["type"]
    'redacted_thinking'
    """
    return {"type": "redacted_thinking", "data": _signature(thinking)}


def signature_matches(block: Mapping[str, Any]) -> bool | None:
    """Whether a thinking block signed by a scripted model is as it was signed: ``True``
    or ``False``; ``None`` for a signature a scripted model did not make (canned replies
    bring their own, which nothing can check offline).

    >>> signature_matches({**thinking_block("a"), "thinking": "b"})
    False
    """
    signature = block.get("signature")
    if not isinstance(signature, str) or not signature.startswith(_SIGNATURE_PREFIX):
        return None
    return signature == _signature(str(block.get("thinking", "")))


def _thinking_enabled(request: Mapping[str, Any]) -> bool:
    config = request.get("thinking")
    return isinstance(config, Mapping) and config.get("type") in ("enabled", "adaptive")


#: The beta that lets Claude 4 models think between tool calls with manual thinking
#: (``thinking.type: "enabled"``); adaptive thinking interleaves without it.
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"


def interleaved_thinking(request: Mapping[str, Any]) -> bool:
    """Whether a request turns on interleaved thinking: adaptive thinking (which
    interleaves on its own), or manual thinking with the ``interleaved-thinking-2025-05-14``
    beta in the body's ``anthropic_beta`` (where Bedrock carries betas; the fake API puts
    the betas of an ``anthropic-beta`` header there for its model).

    >>> interleaved_thinking({"thinking": {"type": "adaptive"}})
    True
    >>> manual = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    >>> interleaved_thinking(manual), interleaved_thinking({**manual, "anthropic_beta": [INTERLEAVED_THINKING_BETA]})
    (False, True)
    """
    config = request.get("thinking")
    if not isinstance(config, Mapping):
        return False
    kind = config.get("type")
    if kind == "adaptive":
        return True
    if kind != "enabled":
        return False
    betas = request.get("anthropic_beta")
    if isinstance(betas, str):
        betas = betas.split(",")
    return isinstance(betas, list | tuple) and any(
        isinstance(b, str) and b.strip() == INTERLEAVED_THINKING_BETA for b in betas
    )


def output_schema(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema a request's structured output must follow, or ``None``:
    ``output_config.format`` (what ``messages.parse(output_format=Model)`` sends), or the
    beta's top-level ``output_format``, when its ``type`` is ``json_schema``.

    >>> output_schema({"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}})
    {'type': 'object'}
    >>> output_schema({"output_config": {"effort": "low"}}) is None
    True
    """
    config = request.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if fmt is None:
        fmt = request.get("output_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        if isinstance(schema, Mapping):
            return schema
    return None


def structured_text(schema: Mapping[str, Any] | None, text: str) -> str:
    """The text of a reply that must follow ``schema`` (as JSON), saying ``text``.

    ``text`` as it is when there is no schema, or when it is JSON already (a plan whose
    ``final_answer`` is the structured answer it wants, written out). Otherwise the
    smallest instance of the schema: each string holds ``text`` (so that two plans' answers
    differ as their texts do), a number its ``minimum`` (or 0), a boolean ``false``, an
    array its ``minItems`` items, an object its required properties; ``enum`` and
    ``const`` give their first value, ``anyOf`` / ``oneOf`` their first option that is not
    ``null``, ``$ref`` its ``$defs`` entry.

    >>> structured_text({"type": "object", "properties": {"summary": {"type": "string"},
    ...     "n": {"type": "integer"}}, "required": ["summary", "n"]}, "All done.")
    '{"summary": "All done.", "n": 0}'
    >>> structured_text(None, "All done."), structured_text({"type": "object"}, '{"a": 1}')
    ('All done.', '{"a": 1}')
    """
    if schema is None:
        return text
    try:
        json.loads(text)
    except ValueError:
        return json.dumps(_instance(schema, schema, text, 0), ensure_ascii=False)
    return text


#: Formats of JSON Schema strings the API's structured outputs support, and a value of each.
_STRING_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "time": "00:00:00",
    "date": "2026-01-01",
    "duration": "P1D",
    "email": "answer@example.com",
    "hostname": "example.com",
    "uri": "https://example.com/",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def _instance(schema: Any, root: Mapping[str, Any], text: str, depth: int) -> Any:
    """The smallest instance of ``schema`` (see :func:`structured_text`)."""
    if not isinstance(schema, Mapping) or depth > 32:
        return text
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        return _instance(target, root, text, depth + 1)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            chosen = next(
                (o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")), options[0]
            )
            return _instance(chosen, root, text, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        names = [n for n in required if n in properties] if isinstance(required, list) else []
        return {str(n): _instance(properties[n], root, text, depth + 1) for n in names}
    bounds = _bounds(schema)
    if kind == "array":
        low = bounds.get("minItems", 0)
        return [_instance(schema.get("items"), root, text, depth + 1) for _ in range(max(0, int(low)))]
    if kind in ("integer", "number"):
        # The least value the bounds allow (0 when they allow it).
        value: float = 0
        if "minimum" in bounds:
            value = max(value, bounds["minimum"]) if bounds["minimum"] > 0 else bounds["minimum"]
        if "exclusiveMinimum" in bounds and value <= bounds["exclusiveMinimum"]:
            value = bounds["exclusiveMinimum"] + (1 if kind == "integer" else 0.5)
        if "maximum" in bounds and value > bounds["maximum"]:
            value = bounds["maximum"]
        if "exclusiveMaximum" in bounds and value >= bounds["exclusiveMaximum"]:
            value = bounds["exclusiveMaximum"] - (1 if kind == "integer" else 0.5)
        return int(value) if kind == "integer" or value == int(value) else value
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _STRING_FORMATS:
        return _STRING_FORMATS[fmt]
    low, high = int(bounds.get("minLength", 0)), bounds.get("maxLength")
    value_text = text.ljust(low, ".")
    return value_text[: int(high)] if high is not None else value_text


#: Bounds the SDK's ``transform_schema`` moves into a property's description (the API's
#: structured outputs do not take them), as ``{minimum: 1, maxLength: 80}``; the model
#: reads them there, and the agent's own pydantic model still checks them.
_BOUND_KEYS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
)
_DESCRIBED_BOUND = re.compile(r"\b(" + "|".join(_BOUND_KEYS) + r"): (-?\d+(?:\.\d+)?)\b")


def _bounds(schema: Mapping[str, Any]) -> dict[str, float]:
    """The numeric bounds of ``schema``: its own keys, then those its description holds."""
    found: dict[str, float] = {}
    description = schema.get("description")
    if isinstance(description, str) and "{" in description:
        for key, number in _DESCRIBED_BOUND.findall(description[description.rindex("{") :]):
            found[key] = float(number)
    for key in _BOUND_KEYS:
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            found[key] = float(value)
    return found


def _tool_use(block_id: str, call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": block_id, "name": call.name, "input": dict(call.input)}


def _message(
    blocks: list[dict[str, Any]],
    model: str,
    stop_reason: str,
    message_id: str,
    output_tokens: int,
    *,
    server: tuple[str, str] | None = None,
) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": 0, "output_tokens": output_tokens}
    if server is not None:
        # The API counts the server tool requests a reply made in its usage.
        usage["server_tool_use"] = {f"{server[0]}_requests": 1}
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "model": model,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


#: Server tools a scripted model uses when a request offers one: the tool definition's
#: versioned ``type`` (``web_search_20250305``) starts with the kind and a date.
_SERVER_TYPE = re.compile(r"^(web_search|web_fetch)_\d{8}$")


def _server_tool(tools: Any) -> tuple[str, str] | None:
    """``(kind, name)`` of the first server tool a request's ``tools`` offers that
    scripted models use (web search, web fetch), ``None`` when it offers none."""
    if type(tools) is not list:
        return None
    for tool in tools:
        kind = _get(tool, "type")
        if type(kind) is str and kind not in ("custom", "function"):
            match = _SERVER_TYPE.match(kind)
            if match is not None:
                return match[1], str(_get(tool, "name") or match[1])
    return None


def _server_blocks(server: tuple[str, str], use_id: str, s: int, names: str) -> list[dict[str, Any]]:
    """A ``server_tool_use`` block and its result, as the API writes them into a reply."""
    kind, name = server
    url = f"https://example.com/plan/step-{s + 1}"
    if kind == "web_fetch":
        use = {"type": "server_tool_use", "id": use_id, "name": name, "input": {"url": url}}
        result: dict[str, Any] = {
            "type": "web_fetch_tool_result",
            "tool_use_id": use_id,
            "content": {
                "type": "web_fetch_result",
                "url": url,
                "retrieved_at": "2026-01-01T00:00:00Z",
                "content": {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": f"Step {s + 1} needs: {names}."},
                    "title": f"Step {s + 1}",
                },
            },
        }
        return [use, result]
    use = {"type": "server_tool_use", "id": use_id, "name": name, "input": {"query": f"step {s + 1}: {names}"}}
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": use_id,
        "content": [
            {
                "type": "web_search_result",
                "url": url,
                "title": f"Step {s + 1}",
                "encrypted_content": _signature(f"{use_id} {names}"),
                "page_age": None,
            }
        ],
    }
    return [use, result]


def _searched(messages: Any, base: str) -> bool:
    """Whether the history holds a ``server_tool_use`` with id ``base`` (or a fresh id of
    it, ``base_g1``) since the last assistant turn that called a client tool: the search
    of a paused step, to be continued."""
    if not isinstance(messages, list):
        return False
    fresh = base + "_g"
    for message in reversed(messages):
        if _get(message, "role") != "assistant":
            continue
        content = _get(message, "content")
        if isinstance(content, str) or not content:
            continue
        found = False
        for block in content:
            kind = _get(block, "type")
            if kind == "tool_use":
                return False
            if kind == "server_tool_use":
                block_id = str(_get(block, "id"))
                if block_id == base or block_id.startswith(fresh):
                    found = True
        if found:
            return True
    return False


def _continues_search(messages: Any) -> bool:
    """Whether the history ends with an assistant turn (a paused one, sent back to be
    continued)."""
    return isinstance(messages, list) and bool(messages) and _get(messages[-1], "role") == "assistant"


_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _check_canned(reply: Mapping[str, Any], index: int) -> None:
    """Refuse a canned reply the API never sends: two ``tool_use`` blocks with one id, or an
    id the API's pattern refuses. Served, it would fail the agent's next request, and read
    as the agent's bug. (A call of a tool the request does not offer is served: a test may
    check how an agent meets one.)"""
    seen: set[str] = set()
    for block in reply.get("content") or ():
        if not isinstance(block, Mapping) or block.get("type") != "tool_use":
            continue
        use_id = str(block.get("id"))
        where = f"canned response {index + 1} (of CannedModel's list)"
        if use_id in seen:
            raise PlanMismatchError(f"{where} holds two tool_use blocks with the id {use_id!r}: give each its own")
        if _TOOL_USE_ID.fullmatch(use_id) is None:
            raise PlanMismatchError(
                f"{where} has the tool_use id {use_id!r}, which the API never sends (letters, "
                "digits, '_' and '-' only): the agent's next request would be refused for it"
            )
        seen.add(use_id)


class CannedModel:
    """Replies with a fixed list of responses, one per request, in order.

    Each response is a string (a text reply), a list of content blocks, or a (partial)
    ``Message`` dict; missing fields are filled in. Thread-safe. Asking for more replies
    than it holds raises :class:`ScriptExhaustedError`.

    >>> model = CannedModel(["first", {"content": [{"type": "text", "text": "second"}]}])
    >>> [model.respond({})["content"][0]["text"] for _ in range(2)]
    ['first', 'second']
    """

    def __init__(self, responses: Sequence[str | Sequence[Mapping[str, Any]] | Mapping[str, Any]]):
        if isinstance(responses, str | bytes | Mapping):
            raise ValueError(
                f"CannedModel takes a list of responses, not one {type(responses).__name__} "
                f"{responses!r:.80}: a single reply is CannedModel([reply]) (each reply a "
                "string, a list of content blocks, or a Message dict)"
            )
        self.responses = list(responses)
        for i, response in enumerate(self.responses):
            if not isinstance(response, str | Mapping | list | tuple):
                raise ValueError(
                    f"CannedModel's response {i + 1} is {response!r:.80}: each response is a "
                    "string (a text reply), a list of content blocks, or a Message dict"
                )
        self.calls = 0
        self._lock = threading.Lock()

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        """The next canned response, completed into a ``Message``."""
        with self._lock:
            index = self.calls
            if index >= len(self.responses):
                raise ScriptExhaustedError(
                    f"CannedModel holds {len(self.responses)} responses; "
                    f"request {index + 1} asked for one more"
                )
            response = self.responses[index]
            model = str(request.get("model") or DEFAULT_MODEL)
            if isinstance(response, Mapping):
                reply = message_json(
                    response.get("content", []),
                    model=str(response.get("model", model)),
                    stop_reason=response.get("stop_reason"),
                    message_id=response.get("id", f"msg_canned{index:04d}"),
                )
                for name, value in response.items():
                    if name != "content":
                        reply[name] = value
            else:
                reply = message_json(response, model=model, message_id=f"msg_canned{index:04d}")
            _check_canned(reply, index)
            # Used up only once served: a reply refused above stays next, so that a request
            # sent again (an agent retrying the 500) gets the same refusal, not the next reply.
            self.calls += 1
        return reply
