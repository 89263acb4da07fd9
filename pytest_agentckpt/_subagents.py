"""Plans for an orchestrator: an agent that hands sub-tasks to sub-agents through a tool of
its own (``delegate``, ``research``, a "Task" tool), each sub-agent holding a conversation
of its own with the model.

The toolbox ``fuzz`` hands the agent holds the tools that act on the world; the
delegating tool is the agent's own (its answer is the sub-agent's), so plans drawn over
the toolbox never call it. :func:`sub_agent_plans` draws plans whose steps call it too,
each such call carrying the plan its sub-agent's conversation follows
(``ToolCall(..., plan=...)``); the scripted model tells that conversation by its first
message, which holds the task text of the call.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

if TYPE_CHECKING:
    from reference_agent.scripted import Plan, ToolCall

__all__ = ["sub_agent_plans"]

_WORDS = string.ascii_lowercase[:6]


def _task_argument(definition: Mapping[str, Any]) -> str:
    """The string argument of a delegating tool that carries the sub-agent's task: its one
    required string property, else its one string property."""
    name = definition.get("name")
    schema = definition.get("input_schema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        raise ValueError(f"sub_agent_plans: tool {name!r} has no input_schema properties")
    strings = [
        key for key, prop in properties.items()
        if isinstance(prop, Mapping) and prop.get("type") == "string" and not {"enum", "const", "pattern"} & set(prop)
    ]
    required = [key for key in strings if key in (schema.get("required") or ())]  # type: ignore[union-attr]
    for chosen in (required, strings):
        if len(chosen) == 1:
            return str(chosen[0])
    raise ValueError(
        f"sub_agent_plans: tool {name!r} needs exactly one (required) free-text string argument "
        f"for the sub-agent's task; its string properties are {strings}"
    )


def _required_only(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with only its required properties: the delegating call's other
    arguments are drawn from it."""
    required = list(schema.get("required") or ())
    properties = schema.get("properties") or {}
    return {**schema, "properties": {k: v for k, v in properties.items() if k in required}, "additionalProperties": False}


def _definitions(delegate: Any) -> list[Mapping[str, Any]]:
    if isinstance(delegate, str):
        return [{"name": delegate, "input_schema": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}]
    if isinstance(delegate, Mapping):
        return [delegate]
    if isinstance(delegate, Sequence) and delegate:
        return [d for item in delegate for d in _definitions(item)]
    raise ValueError(
        "sub_agent_plans: delegate must be the delegating tool's definition (a dict with "
        f"'name' and 'input_schema', as the agent gives the model), its name, or a list of them; not {delegate!r}"
    )


def sub_agent_plans(
    tools: Any,
    delegate: Mapping[str, Any] | str | Sequence[Mapping[str, Any] | str],
    *,
    min_steps: int = 0,
    max_steps: int = 4,
    max_parallel: int = 3,
    sub_steps: int = 2,
    depth: int = 1,
) -> st.SearchStrategy[Plan]:
    """Plans over ``tools`` whose calls also delegate: calls of the tool ``delegate`` (the
    definition the agent gives the model, or just its name when its input is
    ``{"task": ...}``), each with the plan of its sub-agent (``ToolCall.plan``): up to
    ``sub_steps`` steps over ``tools``, then an answer. With ``depth=2`` a sub-agent
    delegates too.

    Each delegating call's task is ``"Sub-task N: ..."``, numbered in plan order so that
    every sub-agent's conversation has its own: start the sub-agent's conversation with
    the task text it was given (the scripted model finds the plan it follows there).
    Other arguments of the delegating tool are drawn from its schema.

    >>> from hypothesis import find
    >>> from reference_agent.toolbox import Toolbox, tool
    >>> @tool()
    ... def look(q: str) -> str:
    ...     return q
    >>> plan = find(sub_agent_plans(Toolbox([look]), "delegate", min_steps=1),
    ...             lambda p: p.steps[0].calls[0].plan is not None)
    >>> call = plan.steps[0].calls[0]
    >>> call.name, call.input["task"], call.plan.steps[0].calls[0].name
    ('delegate', 'Sub-task 1: .', 'look')
    """
    from reference_agent.scripted import Plan, Step, ToolCall

    from .strategies import from_schema, plans, tool_calls

    if depth < 1 or sub_steps < 1:
        raise ValueError(f"sub_agent_plans: depth and sub_steps must be >= 1, got {depth}, {sub_steps}")
    if min_steps < 0 or max_steps < min_steps or max_parallel < 1:
        raise ValueError("sub_agent_plans: need 0 <= min_steps <= max_steps and max_parallel >= 1")
    definitions = _definitions(delegate)
    arguments = {str(d["name"]): _task_argument(d) for d in definitions}
    words = st.text(_WORDS, max_size=6)

    def delegations(level: int) -> st.SearchStrategy[ToolCall]:
        sub = (
            plans(tools, min_steps=1, max_steps=sub_steps, max_parallel=max_parallel)
            if level >= depth
            else _plans(level + 1, 1, sub_steps)
        )
        options = []
        for definition in definitions:
            name = str(definition["name"])
            schema = definition.get("input_schema") or {"type": "object"}
            options.append(
                st.builds(
                    lambda drawn, text, plan, name=name: ToolCall(
                        name, {**(drawn if isinstance(drawn, dict) else {}), arguments[name]: text}, plan=plan
                    ),
                    from_schema(_required_only(schema)),
                    words,
                    sub,
                )
            )
        return st.one_of(options)

    def _plans(level: int, low: int, high: int) -> st.SearchStrategy[Plan]:
        call = st.one_of(tool_calls(tools), delegations(level))
        step = st.lists(call, min_size=1, max_size=max_parallel).map(lambda calls: Step(tuple(calls)))
        answer = st.text(_WORDS, min_size=1, max_size=8).map(lambda s: f"answer {s}")
        return st.builds(lambda steps, final: Plan(tuple(steps), final), st.lists(step, min_size=low, max_size=high), answer)

    return _plans(1, min_steps, max_steps).map(lambda plan: _numbered(plan, arguments))


def _numbered(plan: Plan, arguments: Mapping[str, str]) -> Plan:
    """``plan`` with each delegating call's task ``"Sub-task N: ..."``, N in plan order
    (sub-agents' plans included), so that no two sub-agents start alike."""
    from reference_agent.scripted import Plan, Step, ToolCall

    count = 0

    def walk(plan: Plan) -> Plan:
        nonlocal count
        steps: list[Step] = []
        for step in plan.steps:
            calls: list[ToolCall] = []
            for call in step.calls:
                if call.plan is None:
                    calls.append(call)
                    continue
                count += 1
                number = count
                inner = walk(call.plan)
                task = arguments[call.name]
                text = f"Sub-task {number}: {call.input[task]}."
                # The task is the call's longest string argument: what the scripted model
                # looks for in the sub-agent's first message.
                others = {k: v[:8] if isinstance(v, str) else v for k, v in call.input.items() if k != task}
                calls.append(ToolCall(call.name, {**others, task: text}, plan=inner))
            steps.append(Step(tuple(calls), step.text))
        return Plan(tuple(steps), plan.final_answer, plan.final_call)

    return walk(plan)

