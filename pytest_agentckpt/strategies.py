"""Hypothesis strategies for checkpointed agents: histories, tool schemas, plans, faults.

>>> from hypothesis import given
>>> from pytest_agentckpt.strategies import fault_plans
>>> @given(fault_plans(max_crashes=2))
... def test_plan_size(plan):
...     assert len(plan.crashes) <= 2
>>> test_plan_size()

Importing this module is light: the heavy packages (``reference_agent``, ``stores``) are
imported when a strategy that needs them is built. The ``hypothesis`` entry point calls
:func:`_hypothesis_setup_hook`, which registers ``st.from_type`` strategies for the fault
types (and for ``Plan`` once ``reference_agent.scripted`` is imported).
"""

from __future__ import annotations

import string
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any


def _hypothesis_setup_hook() -> None:
    """Hypothesis's entry point: ``st.from_type`` for the fault types (and ``Plan``)."""
    # Defined before Hypothesis is imported below, so that the entry point finds it even
    # when importing this module is what imports Hypothesis.
    if "_register_types" in globals():
        _register_types()


from hypothesis import strategies as st  # noqa: E402

from .faults import (  # noqa: E402
    API_FAULT_KINDS,
    DEFAULT_FAULT_KINDS,
    FAULT_KINDS,
    FAULT_POINTS,
    OPT_IN_FAULT_KINDS,
    STORE_DOWN_OPERATIONS,
    STORE_FAULT_KINDS,
    STREAM_FAULT_KINDS,
    ApiFault,
    CrashAt,
    FaultPlan,
    StoreFault,
)

if TYPE_CHECKING:
    from reference_agent.scripted import Plan, Step, ToolCall
    from reference_agent.toolbox import Toolbox

__all__ = [
    "fault_plans",
    "from_schema",
    "message_histories",
    "plans",
    "tool_calls",
    "tool_inputs",
    "tool_schemas",
    "toolboxes",
    "truncations",
]

# Small alphabets make equal inputs likely, which exercises duplicate detection.
_WORDS = string.ascii_lowercase[:6] + string.digits[:3]
_MAX_DEPTH = 3


# -- JSON schema -> values ---------------------------------------------------------------
def from_schema(schema: Mapping[str, Any], *, root: Mapping[str, Any] | None = None) -> st.SearchStrategy[Any]:
    """Small JSON values valid for ``schema`` (the subset tool schemas use).

    Handles ``type`` (one or a list), ``enum``, ``const``, ``anyOf``/``oneOf``,
    ``$ref`` into ``$defs``/``definitions``, ``properties``/``required``, ``items``,
    string ``pattern`` and length, numeric bounds. Sizes stay small on purpose: the
    harness is after crash timing, not parser edge cases.

    >>> from hypothesis import find
    >>> find(from_schema({"type": "integer", "minimum": 3}), lambda v: True)
    3
    """
    return _from_schema(schema, root if root is not None else schema, 0)


def _from_schema(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
    if "$ref" in schema:
        return _from_schema(_resolve(schema["$ref"], root), root, depth)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([_from_schema(s, root, depth) for s in schema[key]])
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part["$ref"], root) if "$ref" in part else part)
        return _from_schema(merged, root, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_from_schema({**schema, "type": k}, root, depth) for k in kind])
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1 if "exclusiveMinimum" in schema else 0)
        high = schema.get("maximum", schema.get("exclusiveMaximum", 0) - 1 if "exclusiveMaximum" in schema else None)
        high = high if high is not None else low + 20
        return st.integers(int(low), int(high))
    if kind == "number":
        low = float(schema.get("minimum", 0.0))
        high = float(schema.get("maximum", low + 100.0))
        return st.floats(low, high, allow_nan=False, allow_infinity=False, width=32)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        low = int(schema.get("minLength", 0))
        high = max(low, min(int(schema.get("maxLength", 6)), low + 6))
        return st.text(_WORDS, min_size=low, max_size=high)
    if kind == "array":
        items = schema.get("items", {})
        low = int(schema.get("minItems", 0))
        high = max(low, min(int(schema.get("maxItems", 3)), low + 3))
        if depth >= _MAX_DEPTH:
            high = low
        return st.lists(_from_schema(items, root, depth + 1), min_size=low, max_size=high)
    if kind == "object" or "properties" in schema:
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        if depth >= _MAX_DEPTH:
            properties = {k: v for k, v in properties.items() if k in required}
        return st.fixed_dictionaries(
            {k: _from_schema(v, root, depth + 1) for k, v in properties.items() if k in required},
            optional={k: _from_schema(v, root, depth + 1) for k, v in properties.items() if k not in required},
        )
    # No type: any small JSON scalar.
    return st.one_of(st.none(), st.booleans(), st.integers(0, 9), st.text(_WORDS, max_size=4))


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref are supported, not {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node  # type: ignore[no-any-return]


def tool_schemas(*, max_properties: int = 3) -> st.SearchStrategy[dict[str, Any]]:
    """``input_schema`` objects for tools: type object, a few typed properties.

    >>> from hypothesis import find
    >>> find(tool_schemas(), lambda s: True)
    {'type': 'object', 'properties': {}}
    """
    prop = st.one_of(
        st.just({"type": "string"}),
        st.just({"type": "integer", "minimum": 0, "maximum": 9}),
        st.just({"type": "boolean"}),
        st.just({"type": "string", "enum": ["a", "b", "c"]}),
        st.just({"type": "array", "items": {"type": "string"}, "maxItems": 2}),
    )
    names = st.text(string.ascii_lowercase, min_size=1, max_size=6)

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        properties = draw(st.dictionaries(names, prop, max_size=max_properties))
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        required = sorted(draw(st.sets(st.sampled_from(sorted(properties)))) if properties else [])
        if required:
            schema["required"] = required
        return schema

    return build()


def toolboxes(*, min_tools: int = 1, max_tools: int = 4) -> st.SearchStrategy[Toolbox]:
    """Toolboxes of synthetic tools with random schemas and kinds (read-only, repeat-safe,
    keyed, unkeyed).

    Each tool answers ``"<name> ok <input>"``: deterministic, so crash-free and crashed
    runs of a plan can be compared.
    """
    from reference_agent.toolbox import TOOL_KINDS, Toolbox, ToolSpec

    @st.composite
    def build(draw: st.DrawFn) -> Toolbox:
        count = draw(st.integers(min_tools, max_tools))
        specs = []
        for index in range(count):
            schema = draw(tool_schemas())
            irreversible, idempotent, repeat_safe = TOOL_KINDS[draw(st.sampled_from(sorted(TOOL_KINDS)))]
            name = f"tool{index}"

            def function(_name: str = name, **kwargs: Any) -> str:
                kwargs.pop("idempotency_key", None)
                return f"{_name} ok {sorted(kwargs.items())}"

            specs.append(
                ToolSpec(name, f"synthetic tool {index}", schema, function, irreversible, idempotent, repeat_safe)
            )
        return Toolbox(specs)

    return build()


# -- plans -------------------------------------------------------------------------------
def _tool_names(tools: Any) -> list[str]:
    names = getattr(tools, "names", None)
    if callable(names):
        return list(names())
    return [d["name"] for d in tools.definitions()]


def tool_inputs(tools: Any, name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Inputs for tool ``name``: its declared ``inputs`` (a list of examples, sampled, or a
    strategy) when it has them, else values drawn from its ``input_schema``.

    Real schemas are loose (a free-form ``path``), so a team gives the inputs that mean
    something for its tools, and plans use those.

    >>> from reference_agent.toolbox import Toolbox
    >>> def read(path: str) -> str:
    ...     return path
    >>> box = Toolbox.from_functions(read, inputs={"read": [{"path": "notes.txt"}]})
    >>> from hypothesis import find
    >>> find(tool_inputs(box, "read"), lambda v: True)
    {'path': 'notes.txt'}
    """
    declared = None
    known: Any = None
    spec_of = getattr(tools, "spec", None)
    if callable(spec_of):
        spec = spec_of(name)
        declared = getattr(spec, "inputs", None)
        # A client tool's definition (by type) has no schema; its spec has the type's.
        known = getattr(spec, "input_schema", None)
    if declared is None:
        schema = next(
            (d.get("input_schema") for d in tools.definitions() if d.get("name") == name), None
        ) or (known if isinstance(known, Mapping) else None) or {"type": "object"}
        return from_schema(schema)
    if isinstance(declared, st.SearchStrategy):
        return declared.map(_as_input(name))
    examples = list(declared)
    if not examples:
        raise ValueError(f"tool {name!r}: inputs is empty; give at least one example input")
    return st.sampled_from(examples).map(dict)


def _as_input(name: str) -> Callable[[Any], dict[str, Any]]:
    def check(value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise TypeError(f"tool {name!r}: its inputs strategy drew {value!r}, not a dict of arguments")
        return dict(value)

    return check


def tool_calls(tools: Any) -> st.SearchStrategy[ToolCall]:
    """One call of one of ``tools``, its input from :func:`tool_inputs`."""
    from reference_agent.scripted import ToolCall

    def call_of(name: str) -> Callable[[Any], ToolCall]:
        return lambda value: ToolCall(name, value)

    options: list[st.SearchStrategy[ToolCall]] = []
    for definition in tools.definitions():
        options.append(tool_inputs(tools, definition["name"]).map(call_of(definition["name"])))
    if not options:
        raise ValueError("tools: the toolbox has no tools to plan over")
    return st.one_of(options)


def plans(
    tools: Any,
    *,
    min_steps: int = 0,
    max_steps: int = 4,
    max_parallel: int = 3,
) -> st.SearchStrategy[Plan]:
    """Plans over ``tools``: up to ``max_steps`` turns of up to ``max_parallel`` calls.

    Shrinks towards fewer steps, fewer calls per step and simpler inputs.

    >>> from reference_agent.toolbox import Toolbox, tool
    >>> @tool()
    ... def look(q: str) -> str:
    ...     return q
    >>> from hypothesis import find
    >>> find(plans(Toolbox([look]), min_steps=1), lambda p: True).steps[0].calls[0].name
    'look'
    """
    from reference_agent.scripted import Plan, Step

    _register_plan()
    if min_steps < 0 or max_steps < min_steps:
        raise ValueError(f"min_steps/max_steps: need 0 <= min_steps <= max_steps, got {min_steps}, {max_steps}")
    if max_parallel < 1:
        raise ValueError(f"max_parallel must be >= 1, not {max_parallel}")
    call = tool_calls(tools)
    step: st.SearchStrategy[Step] = st.lists(call, min_size=1, max_size=max_parallel).map(
        lambda calls: Step(tuple(calls))
    )
    answer = st.text(_WORDS, min_size=1, max_size=8).map(lambda s: f"answer {s}")
    return st.builds(
        lambda steps, final: Plan(tuple(steps), final),
        st.lists(step, min_size=min_steps, max_size=max_steps),
        answer,
    )


# -- faults ------------------------------------------------------------------------------
def fault_plans(
    *,
    max_crashes: int = 3,
    kinds: Iterable[str] | None = None,
    max_occurrence: int = 6,
    max_api_faults: int = 1,
    max_store_faults: int = 1,
    streamed: bool = False,
    from_end: bool = True,
    fractions: bool | None = None,
) -> st.SearchStrategy[FaultPlan]:
    """Fault plans: up to ``max_crashes`` crashes at the points in ``kinds``, plus API and
    store faults of the kinds in ``kinds`` (default: ``DEFAULT_FAULT_KINDS``, every kind
    but the opt-in ones). Shrinks to fewer faults, earlier occurrences.

    ``streamed``: the agent asks for streamed replies, so half of the API faults are drawn
    from the kinds that cut a stream short (``stream_disconnect``, ``stream_error``),
    rather than two kinds in eight. (They do nothing to a request that does not stream.)
    A named ``api_outage`` or ``max_tokens`` (opt-in) is half of the API faults drawn
    (both named: they share that half), the other kinds the rest.

    ``from_end``: half of the occurrences (of crashes, API faults and store faults on
    save) count from the end of the plan's crash-free run, ``-1`` to ``-max_occurrence``
    (``-1``: the last time), so that faults reach late in a long run as well as early;
    ``fuzz`` and ``replay`` resolve them against that run (:meth:`FaultPlan.resolve`).
    Shrinking goes from them to counts from the start, towards ``#1``. ``from_end=False``:
    only counts from the start, ``1`` to ``max_occurrence`` (what a ``FaultInjector`` you
    drive yourself takes).

    ``fractions`` (default: as ``from_end``): half of the crashes are placed by how far
    through the crash-free run they fall (:attr:`FaultPlan.crash_fractions`), over the
    states it passed through (see :meth:`RunCounts.at_fraction
    <pytest_agentckpt.faults.RunCounts.at_fraction>`), rather than at a drawn point's
    occurrence. Occurrences reach
    the first and last ``max_occurrence`` times a point is met; in a long run, a crash
    window in the middle (one save between an effect and the record of its outcome) is
    reached only by a fraction. They shrink towards the start of the run.

    >>> from hypothesis import find
    >>> find(fault_plans(kinds=["after_tool_effect"]), lambda p: p.crashes).describe()
    'crash at after_tool_effect #1'
    """
    chosen = set(DEFAULT_FAULT_KINDS if kinds is None else kinds)
    unknown = sorted(chosen - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"kinds: unknown {unknown}; choose from {', '.join(FAULT_KINDS)}")
    if max_crashes < 0 or max_occurrence < 1:
        raise ValueError("max_crashes must be >= 0 and max_occurrence >= 1")
    points = [p for p in FAULT_POINTS if p in chosen]
    api = [k for k in API_FAULT_KINDS if k in chosen]
    store = [k for k in STORE_FAULT_KINDS if k in chosen]
    # One integer per occurrence, 1..2m: 1..m count from the start, m+1..2m from the end
    # (m+1 is -1, the last). Integers shrink towards 1, so a late fault shrinks to the
    # earliest one that still fails. (A single draw: one_of would cost a branch draw more.)
    occurrence = (
        st.integers(1, 2 * max_occurrence).map(_early_or_late(max_occurrence))
        if from_end
        else st.integers(1, max_occurrence)
    )
    crash: st.SearchStrategy[CrashAt | float] | None = (
        st.builds(CrashAt, st.sampled_from(points), occurrence) if points else None
    )
    if crash is not None and (from_end if fractions is None else fractions):
        # Thousandths of the run: as fine as any run here has points, and uniform.
        crash = st.one_of(crash, st.integers(1, 1000).map(lambda n: n / 1000))
    # A named opt-in API kind (``api_outage``, ``max_tokens``) is half of the API faults
    # drawn: one kind in eight or nine found an agent that gives up on the model once in
    # five seeds of 100 examples, and missed a cut final answer in two seeds of three at 300.
    api_kinds: list[str] = list(api)
    named = [k for k in ("api_outage", "max_tokens") if k in api_kinds]
    rest = [k for k in api_kinds if k not in named]
    if not rest:  # only opt-in kinds: drawn alike
        named, rest = [], api_kinds
    stream = [k for k in rest if k in STREAM_FAULT_KINDS]
    whole = [k for k in rest if k not in STREAM_FAULT_KINDS]
    api_kind = st.sampled_from(rest) if rest else None
    if streamed and stream and whole:
        api_kind = st.one_of(st.sampled_from(stream), st.sampled_from(whole))
    if named and api_kind is not None:
        api_kind = st.one_of(st.just(named[0]) if len(named) == 1 else st.sampled_from(named), api_kind)
    api_fault = st.builds(ApiFault, api_kind, occurrence) if api_kind is not None else None
    # A load happens once per attempt: 2 and 3 are the loads of the first resumes, the
    # interesting ones (sampled, not integers(), so they are drawn as often as 1). An
    # outage on load is its own branch: it is what finds "a load error means no checkpoint".
    span = st.integers(1, 2)
    delay = st.just(0.0005)
    branches: list[st.SearchStrategy[StoreFault]] = []
    if "store_outage" in store:
        branches.append(st.builds(StoreFault, st.just("store_outage"), st.just("load"), st.sampled_from([2, 3, 1]), span, delay))
        branches.append(st.builds(StoreFault, st.just("store_outage"), st.just("save"), occurrence, span, delay))
    if "slow_store" in store:
        branches.append(st.builds(StoreFault, st.just("slow_store"), st.sampled_from(["save", "load"]), occurrence, span, delay))
    if "store_down" in chosen:
        # Opt-in: an outage longer than an agent's own retries, one more branch of the
        # store faults drawn.
        down = st.integers(*STORE_DOWN_OPERATIONS)
        longer = st.builds(StoreFault, st.just("store_outage"), st.sampled_from(["save", "load"]), occurrence, down, delay)
        branches = [longer, *branches] if branches else [longer]
    store_fault = st.one_of(branches) if branches else None
    # Built once, not at each draw (the same strategies, so the same draws): building and
    # validating them per example was a tenth of Hypothesis's share of a fuzz run.
    crash_lists = st.lists(crash, max_size=max_crashes, unique=True) if crash is not None and max_crashes else None
    api_lists = (
        st.lists(api_fault, max_size=max_api_faults, unique_by=lambda f: f.request)
        if api_fault is not None and max_api_faults
        else None
    )
    store_lists = st.lists(store_fault, max_size=max_store_faults) if store_fault is not None and max_store_faults else None

    @st.composite
    def build(draw: st.DrawFn) -> FaultPlan:
        crashes = draw(crash_lists) if crash_lists is not None else []
        api_faults = draw(api_lists) if api_lists is not None else []
        store_faults = draw(store_lists) if store_lists is not None else []
        resume_load = any(f.operation == "load" and f.occurrence > 1 for f in store_faults)
        if not crashes and crash is not None and max_crashes and (resume_load or not (api_faults or store_faults)):
            # No fault at all only repeats the crash-free run, and a fault on the load of
            # a resume needs something to resume from.
            crashes = [draw(crash)]
        return FaultPlan(
            tuple(sorted(c for c in crashes if isinstance(c, CrashAt))),
            tuple(sorted(api_faults)),
            tuple(store_faults),
            crash_fractions=tuple(sorted(c for c in crashes if not isinstance(c, CrashAt))),
        )

    return build()


def _early_or_late(max_occurrence: int) -> Callable[[int], int]:
    def occurrence(n: int) -> int:
        return n if n <= max_occurrence else max_occurrence - n

    return occurrence


# -- message histories -------------------------------------------------------------------
def message_histories(
    *,
    min_turns: int = 1,
    max_turns: int = 6,
    max_parallel: int = 3,
    thinking: bool = False,
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Valid ``messages`` arrays, ending with a user message (a request the API accepts).

    Assistant turns mix text and up to ``max_parallel`` parallel ``tool_use`` blocks, each
    answered in the next user turn (results in any order, optionally followed by text).
    ``thinking=True``: every assistant turn opens with a signed thinking block, as with
    extended thinking enabled; validate those with ``validate_messages(m, thinking=True)``.

    >>> from hypothesis import find
    >>> find(message_histories(), lambda m: True)
    [{'role': 'user', 'content': '0'}]
    """
    if min_turns < 1 or max_turns < min_turns:
        raise ValueError(f"min_turns/max_turns: need 1 <= min_turns <= max_turns, got {min_turns}, {max_turns}")
    text = st.text(_WORDS, min_size=1, max_size=6)

    @st.composite
    def build(draw: st.DrawFn) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": draw(text)}]
        turns = draw(st.integers(min_turns - 1, max_turns - 1))
        counter = 0
        for _ in range(turns):
            blocks: list[dict[str, Any]] = []
            if thinking:
                blocks.append({"type": "thinking", "thinking": draw(text), "signature": f"sig{counter}"})
            if draw(st.booleans()):
                blocks.append({"type": "text", "text": draw(text)})
            uses = draw(st.integers(0 if blocks else 1, max_parallel))
            ids = []
            for _ in range(uses):
                counter += 1
                ids.append(f"toolu_{counter:04d}")
                blocks.append(
                    {"type": "tool_use", "id": ids[-1], "name": draw(st.sampled_from(["read", "send"])), "input": {"q": draw(text)}}
                )
            if not ids and not any(b["type"] == "text" for b in blocks):
                blocks.append({"type": "text", "text": draw(text)})
            messages.append({"role": "assistant", "content": blocks})
            if ids:
                order = draw(st.permutations(ids))
                results: list[dict[str, Any]] = []
                for tool_use_id in order:
                    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": draw(text)}
                    if draw(st.integers(0, 4)) == 0:
                        result["is_error"] = True
                    results.append(result)
                if draw(st.booleans()):
                    results.append({"type": "text", "text": draw(text)})
                messages.append({"role": "user", "content": results})
            else:
                messages.append({"role": "user", "content": draw(text)})
        return messages

    return build()


def truncations(messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """Every state a crash can leave ``messages`` in: each prefix, and each prefix whose
    last user message holds only some of its tool results (partial parallel results).

    >>> len(truncations([{"role": "user", "content": "hi"}]))
    1
    """
    out: list[list[dict[str, Any]]] = []
    for end in range(1, len(messages) + 1):
        prefix = [dict(m) for m in messages[:end]]
        out.append(prefix)
        last = prefix[-1]
        content = last.get("content")
        if last.get("role") == "user" and isinstance(content, list) and len(content) > 1:
            for keep in range(1, len(content)):
                out.append([*prefix[:-1], {**last, "content": list(content[:keep])}])
    return out


# -- registration ------------------------------------------------------------------------
def _register_plan() -> None:
    from reference_agent.scripted import Plan, Step, ToolCall

    def plan_strategy(_: type) -> st.SearchStrategy[Plan]:
        generic = st.builds(ToolCall, st.sampled_from(["read", "write", "send"]), st.fixed_dictionaries({"q": st.text(_WORDS, max_size=4)}))
        steps = st.lists(st.lists(generic, min_size=1, max_size=3).map(lambda c: Step(tuple(c))), max_size=4)
        return st.builds(lambda s, a: Plan(tuple(s), f"answer {a}"), steps, st.text(_WORDS, max_size=6))

    st.register_type_strategy(Plan, plan_strategy)


def _register_types() -> None:
    """``st.from_type`` for the fault types (and ``Plan``, if already imported)."""
    st.register_type_strategy(FaultPlan, fault_plans())
    st.register_type_strategy(CrashAt, st.builds(CrashAt, st.sampled_from(FAULT_POINTS), st.integers(1, 6)))
    default_api = [k for k in API_FAULT_KINDS if k not in OPT_IN_FAULT_KINDS]
    st.register_type_strategy(ApiFault, st.builds(ApiFault, st.sampled_from(default_api), st.integers(1, 6)))
    st.register_type_strategy(
        StoreFault,
        st.builds(StoreFault, st.sampled_from(STORE_FAULT_KINDS), st.sampled_from(["load", "save"]), st.integers(1, 6)),
    )
    # Plan lives in reference_agent, which is heavy to import: register it only when it
    # is already loaded (plans() registers it on first use otherwise).
    if "reference_agent.scripted" in sys.modules:
        _register_plan()


# Importing this module before Hypothesis makes Hypothesis call the hook while this module
# is half loaded (the hook then does nothing): register here, once everything is defined.
_register_types()
