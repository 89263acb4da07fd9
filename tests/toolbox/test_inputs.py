"""Per-tool inputs: example lists or strategies, which drawn plans use instead of the schema."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentckpt.strategies import plans, tool_inputs
from reference_agent.scripted import Plan
from reference_agent.toolbox import Toolbox, ToolSpec, tool


def read_file(path: str) -> str:
    """Read a file (any path: the schema is loose)."""
    return f"contents of {path}"


def write_file(path: str, content: str) -> str:
    """Overwrite a file."""
    return f"wrote {path}"


def search(query: str) -> str:
    """Search."""
    return query


EXAMPLES = [{"path": "notes.txt"}, {"path": "todo.md"}]
BOX = Toolbox.from_functions(
    read_file,
    write_file,
    search,
    kinds={"write_file": "repeat_safe"},
    inputs={
        "read_file": EXAMPLES,
        "write_file": st.fixed_dictionaries(
            {"path": st.sampled_from(["out/a.txt", "out/b.txt"]), "content": st.sampled_from(["x", "y"])}
        ),
    },
)


def _calls(plan: Plan) -> list[Any]:
    return [call for step in plan.steps for call in step.calls]


@settings(max_examples=60)
@given(plans(BOX, min_steps=1))
def test_drawn_plans_use_the_example_inputs_and_the_strategies(plan: Plan) -> None:
    for call in _calls(plan):
        if call.name == "read_file":
            assert dict(call.input) in EXAMPLES
        elif call.name == "write_file":
            assert call.input["path"] in ("out/a.txt", "out/b.txt") and call.input["content"] in ("x", "y")
        else:  # no inputs declared: drawn from the schema
            assert set(call.input) == {"query"}


def test_every_example_is_drawn_sometime() -> None:
    seen: set[str] = set()

    @settings(max_examples=80, database=None)
    @given(tool_inputs(BOX, "read_file"))
    def collect(value: dict[str, Any]) -> None:
        seen.add(value["path"])

    collect()
    assert seen == {"notes.txt", "todo.md"}


def test_a_drawn_input_is_a_fresh_dict_the_plan_cannot_alias() -> None:
    from hypothesis import find

    value = find(tool_inputs(BOX, "read_file"), lambda v: True)
    value["path"] = "changed"
    assert BOX.spec("read_file").inputs[0] == {"path": "notes.txt"}


def test_the_tool_decorator_takes_inputs_too() -> None:
    spec = tool(inputs=[{"path": "a"}])(read_file)
    assert spec.inputs == ({"path": "a"},)


def test_an_example_missing_a_required_argument_is_refused() -> None:
    with pytest.raises(ValueError, match=r"inputs\[1\] lacks the required argument\(s\) \['content'\]"):
        Toolbox.from_functions(write_file, inputs={"write_file": [{"path": "a", "content": "x"}, {"path": "b"}]})


def test_an_example_with_an_argument_the_schema_does_not_define_is_refused() -> None:
    with pytest.raises(ValueError, match=r"argument\(s\) \['mode'\] that the schema does not define"):
        Toolbox.from_functions(read_file, inputs={"read_file": [{"path": "a", "mode": "r"}]})


def test_examples_that_are_not_json_or_not_dicts_are_refused() -> None:
    with pytest.raises(ValueError, match="not JSON data"):
        Toolbox.from_functions(read_file, inputs={"read_file": [{"path": object()}]})
    with pytest.raises(TypeError, match=r"inputs\[0\] must be a dict of arguments"):
        Toolbox.from_functions(read_file, inputs={"read_file": ["notes.txt"]})
    with pytest.raises(TypeError, match="inputs must be a list of example inputs"):
        Toolbox.from_functions(read_file, inputs={"read_file": {"path": "notes.txt"}})
    with pytest.raises(ValueError, match="inputs is empty"):
        Toolbox.from_functions(read_file, inputs={"read_file": []})


def test_inputs_for_tools_that_are_not_there_are_refused() -> None:
    with pytest.raises(ValueError, match=r"inputs names \['reed_file'\]"):
        Toolbox.from_functions(read_file, inputs={"reed_file": EXAMPLES})


def test_a_strategy_that_draws_no_dict_fails_naming_the_tool() -> None:
    from hypothesis import find

    box = Toolbox.from_functions(search, inputs={"search": st.just("weather")})
    with pytest.raises(TypeError, match="tool 'search': its inputs strategy drew 'weather'"):
        find(tool_inputs(box, "search"), lambda v: True)


def test_a_toolbox_of_another_kind_without_inputs_draws_from_the_schema() -> None:
    class Minimal:
        def definitions(self) -> list[dict[str, Any]]:
            return [{"name": "ping", "input_schema": {"type": "object", "properties": {"n": {"type": "integer", "enum": [7]}}, "required": ["n"]}}]

        def spec(self, name: str) -> ToolSpec:
            return ToolSpec(name, "d", {"type": "object"}, print)

    from hypothesis import find

    assert find(tool_inputs(Minimal(), "ping"), lambda v: True) == {"n": 7}


def test_fuzz_calls_the_tools_only_with_the_declared_inputs() -> None:
    from pytest_agentckpt import fuzz
    from reference_agent import run

    received: list[dict[str, Any]] = []

    def open_file(path: str) -> str:
        """Open a file (the schema admits any path)."""
        received.append({"path": path})
        return f"contents of {path}"

    box = Toolbox.from_functions(open_file, inputs={"open_file": EXAMPLES})
    fuzz(run, box, max_examples=15, seed=1, fault_kinds=["after_tool_effect", "before_model_call"])
    assert received and all(value in EXAMPLES for value in received)
