"""Tool kinds: read-only, repeat-safe, keyed, unkeyed; declared in one word or with flags."""

from __future__ import annotations

import pytest

from reference_agent.toolbox import TOOL_KINDS, Toolbox, ToolSpec, tool


def write_file(path: str, content: str) -> str:
    """Overwrite a file with this content."""
    return f"wrote {path}"


def send(to: str, idempotency_key: str | None = None) -> str:
    """Send a message."""
    return f"sent to {to}"


def append_log(line: str) -> str:
    """Append a line to the log."""
    return "appended"


def read(path: str) -> str:
    """Read a file."""
    return "text"


@pytest.mark.parametrize(
    ("kind", "flags"),
    [
        ("read_only", (False, False, False)),
        ("repeat_safe", (True, False, True)),
        ("keyed", (True, True, False)),
        ("unkeyed", (True, False, False)),
    ],
)
def test_each_kind_sets_the_flags_the_harness_and_agents_read(kind: str, flags: tuple[bool, bool, bool]) -> None:
    spec = Toolbox.from_functions(send, kinds={"send": kind}).spec("send")  # type: ignore[dict-item]
    assert (spec.irreversible, spec.idempotent, spec.repeat_safe) == flags == TOOL_KINDS[kind]
    assert spec.kind == kind


def test_a_tool_is_read_only_unless_declared_otherwise() -> None:
    assert Toolbox.from_functions(read).spec("read").kind == "read_only"


def test_the_flags_still_declare_kinds() -> None:
    assert tool(irreversible=True, idempotent=True)(send).kind == "keyed"
    assert tool(irreversible=True)(append_log).kind == "unkeyed"
    assert tool(irreversible=True, repeat_safe=True)(write_file).kind == "repeat_safe"
    # A key or a safe repeat only makes sense for a tool that changes the world.
    assert tool(idempotent=True)(send).kind == "keyed"
    assert tool(repeat_safe=True)(write_file).kind == "repeat_safe"


def test_kind_and_flags_that_agree_are_accepted() -> None:
    assert tool(kind="keyed", irreversible=True, idempotent=True)(send).kind == "keyed"


def test_kind_and_a_flag_that_disagree_are_refused_with_both_named() -> None:
    with pytest.raises(ValueError, match=r"kind='read_only' means irreversible=False, but irreversible=True"):
        tool(kind="read_only", irreversible=True)(read)


def test_an_unknown_kind_is_refused_listing_the_kinds() -> None:
    with pytest.raises(ValueError, match="read_only, repeat_safe, keyed, unkeyed"):
        Toolbox.from_functions(read, kinds={"read": "reversible"})  # type: ignore[dict-item]


def test_keyed_and_repeat_safe_at_once_is_refused() -> None:
    with pytest.raises(ValueError, match="both idempotent \\(keyed\\) and repeat_safe"):
        tool(idempotent=True, repeat_safe=True)(send)


def test_a_key_on_a_tool_declared_reversible_is_refused() -> None:
    with pytest.raises(ValueError, match="idempotent=True with irreversible=False"):
        tool(irreversible=False, idempotent=True)(send)
    with pytest.raises(ValueError, match="repeat_safe=True with irreversible=False"):
        ToolSpec("w", "d", {"type": "object"}, write_file, irreversible=False, repeat_safe=True)


def test_a_keyed_tool_must_take_the_key() -> None:
    with pytest.raises(ValueError, match=r"keyed .* takes no idempotency_key parameter"):
        Toolbox.from_functions(append_log, kinds={"append_log": "keyed"})


def test_kinds_for_tools_that_are_not_there_are_refused() -> None:
    with pytest.raises(ValueError, match=r"kinds names \['sned'\], which are not tools here"):
        Toolbox.from_functions(send, kinds={"sned": "keyed"})


def test_only_keyed_tools_receive_the_key() -> None:
    seen: dict[str, object] = {}

    def put(key: str, **extra: object) -> str:
        seen.update(extra)
        return "ok"

    Toolbox.from_functions(put, kinds={"put": "repeat_safe"}).call("put", {"key": "a"}, idempotency_key="k")
    assert seen == {}


def test_kinds_survive_the_harness_wrapping_functions() -> None:
    box = Toolbox.from_functions(write_file, send, kinds={"write_file": "repeat_safe", "send": "keyed"})
    wrapped = box.replace_functions(lambda spec: spec.function)
    assert [s.kind for s in wrapped] == ["repeat_safe", "keyed"]
