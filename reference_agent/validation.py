"""The Messages API's rules for a ``messages`` array, checked offline.

:func:`validate_messages` is the oracle for "this history is a valid request": it rejects
what the API rejects, with the API's own wording, and names the offending position as a
``messages.N.content.K`` path (``N`` and ``K`` index the array as sent, before the API merges
consecutive turns of the same role).

>>> validate_messages([{"role": "user", "content": "Hello"}])
>>> validate_messages([{"role": "assistant", "content": "Hi"}])
Traceback (most recent call last):
...
reference_agent.validation.InvalidHistoryError: messages.0: first message must use the "user" role

The check is a single linear pass over the blocks, so it is cheap enough to run on every
request the fake API receives and on every repaired history before it is sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "InvalidHistoryError",
    "RequestValidator",
    "breakpoint_error",
    "cache_marks",
    "check_interleaved_thinking",
    "fixed_marks",
    "message_marks",
    "remember_shape",
    "request_rule_error",
    "thinking_shape",
    "validate_messages",
]

_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
# Ids already seen to match ``_ID_PATTERN``: whether a string matches is a pure function
# of the string, and a tool loop sends the same ids again in every request. Bounded.
_GOOD_IDS: set[str] = set()
_GOOD_IDS_SIZE = 65536
_ROLES = ("user", "assistant")

# Blocks the model writes. A user turn carrying one is rejected, as the API does.
_ASSISTANT_ONLY = frozenset(
    {"tool_use", "thinking", "redacted_thinking", "server_tool_use", "mcp_tool_use"}
)
# Blocks only a user turn may carry.
_USER_ONLY = frozenset({"tool_result", "image", "document", "search_result"})
# Server tools run inside one assistant turn: the use and its result travel together.
_SERVER_USES = frozenset({"server_tool_use", "mcp_tool_use"})
_THINKING = frozenset({"thinking", "redacted_thinking"})

_UNANSWERED = (
    "`tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
)
_UNEXPECTED = (
    "unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
_THINKING_FIRST = (
    "Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is "
    "enabled, a final `assistant` message must start with a thinking block (preceeding the "
    "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking "
    "blocks from previous turns. To avoid this requirement, disable `thinking`."
)


_MOVED_THINKING = (
    "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
    "modified. These blocks must remain as they were in the original response."
)
_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


class InvalidHistoryError(ValueError):
    """A ``messages`` array the Messages API would reject with HTTP 400.

    ``path`` is the position of the violation (``messages.3.content.1``) and the message
    is ``"<path>: <the API's wording>"``.

    >>> try:
    ...     validate_messages([])
    ... except InvalidHistoryError as exc:
    ...     print(exc.path)
    messages
    """

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


def _get(obj: Any, key: str) -> Any:
    # Plain dicts are the common case and the fast path; SDK model objects (``TextBlock``,
    # ``ToolUseBlock``, a whole ``Message``) are accepted as the SDK accepts them.
    if type(obj) is dict:
        return obj.get(key)
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _as_dict(block: Any) -> dict[str, Any]:
    """A read-only dict view of a block given as a mapping or an SDK model object."""
    if isinstance(block, Mapping):
        return dict(block)
    fields = getattr(block, "__dict__", None)
    # SDK blocks are pydantic models, whose field values live in ``__dict__``.
    return fields if isinstance(fields, dict) else {}


def _blocks(content: Any) -> Sequence[Any] | None:
    """The content as a block sequence; ``None`` when it is a plain string."""
    if type(content) is list:
        return content
    if isinstance(content, str):
        return None
    if isinstance(content, (list, tuple)):
        return content
    if isinstance(content, Iterable) and not isinstance(content, (bytes, Mapping)):
        return list(content)
    return ()


def validate_messages(
    messages: Sequence[Any],
    *,
    allow_prefill: bool = False,
    thinking: bool = False,
) -> None:
    """Raise :class:`InvalidHistoryError` if the Messages API would reject ``messages``.

    ``allow_prefill``: accept a final ``assistant`` message (a prefill), which current
    models reject; even then it may not contain ``tool_use`` nor end with whitespace.
    ``thinking``: the request enables extended thinking, so the last assistant turn of a
    tool loop must start with a ``thinking`` or ``redacted_thinking`` block.

    Messages and blocks may be plain dicts or SDK model objects.

    >>> validate_messages([
    ...     {"role": "user", "content": "Weather in Paris?"},
    ...     {"role": "assistant", "content": [
    ...         {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}]},
    ...     {"role": "user", "content": [
    ...         {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ... ])
    """
    _validate(messages, allow_prefill, thinking)


def _validate(messages: Sequence[Any], allow_prefill: bool, thinking: bool) -> _State:
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise InvalidHistoryError("messages", "Input should be a valid list")
    if not messages:
        raise InvalidHistoryError(
            "messages", "List should have at least 1 item after validation, not 0"
        )
    state = _scan(messages, 0, None, allow_prefill)
    _finish(messages, state, allow_prefill, thinking)
    return state


#: Cache breakpoints one request may carry (tools, system and messages together; a
#: top-level ``cache_control``, automatic caching, takes one of them).
MAX_CACHE_BREAKPOINTS = 4


def cache_marks(value: Any) -> int:
    """``cache_control`` marks on the blocks of ``value`` (a block list, a tool list, a
    message's content), those nested in ``tool_result`` content included."""
    if not isinstance(value, list):
        return 0
    found = 0
    for block in value:
        if isinstance(block, dict):
            found += block.get("cache_control") is not None
            found += cache_marks(block.get("content"))
    return found


def request_rule_error(request: Any) -> str | None:
    """What the API rejects in a generation request beyond its ``messages`` (which
    :func:`validate_messages` checks), as the API words it; ``None`` if
    nothing.

    One rule: at most four ``cache_control`` breakpoints in tools, system and messages
    together. An agent that moves a breakpoint onto its latest block each turn breaks it
    when a mark it forgot (one a resume loaded with the history) stays behind.

    >>> mark = {"type": "ephemeral"}
    >>> request_rule_error({"messages": [{"role": "user", "content": [
    ...     {"type": "text", "text": "hi", "cache_control": mark}]}]}) is None
    True
    >>> request_rule_error({"system": [{"type": "text", "text": "s", "cache_control": mark}],
    ...     "cache_control": mark, "messages": [{"role": "user", "content": [
    ...     {"type": "text", "text": str(i), "cache_control": mark} for i in range(3)]}]})
    'A maximum of 4 blocks with cache_control may be provided. Found 5.'
    """
    if not isinstance(request, dict):
        return None
    found = sum(message_marks(m) for m in request.get("messages") or ())
    found += fixed_marks(request) + (request.get("cache_control") is not None)
    return breakpoint_error(found)


def message_marks(message: Any) -> int:
    """``cache_control`` marks in one message's content."""
    return cache_marks(message.get("content")) if isinstance(message, dict) else 0


def fixed_marks(request: Mapping[str, Any]) -> int:
    """``cache_control`` marks in a request's tools and system prompt (the parts that repeat
    in every request of a conversation)."""
    return cache_marks(request.get("tools")) + cache_marks(request.get("system"))


def breakpoint_error(found: int) -> str | None:
    """The API's error for a request holding ``found`` breakpoints in all (tools, system,
    messages and a top-level ``cache_control``); ``None`` within the limit."""
    if found > MAX_CACHE_BREAKPOINTS:
        return f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
    return None


class RequestValidator:
    """:func:`validate_messages` for a series of requests where each usually extends the
    previous one, as an agent's do: a request whose ``messages`` start with every message
    of the last valid request checks only the messages it adds.

    Whether they do is *detected*, never assumed: the prefix is compared with ``==``
    against the messages of the last valid request (a C-speed comparison, which is a
    pointer comparison for the messages a caller shares between requests). Any difference
    — an earlier message edited, removed or reordered, a shorter history — gets the full
    check from the first message, with the same errors :func:`validate_messages` raises.
    The messages must not be edited in place once validated (the comparison of a shared
    message with itself cannot see an edit); a fresh parse of each request never is.

    >>> validator = RequestValidator()
    >>> first = [{"role": "user", "content": "Hi"}]
    >>> validator.validate(first)
    0
    >>> validator.validate([*first, {"role": "assistant", "content": "Hello"},
    ...                     {"role": "user", "content": "Bye"}])
    1
    >>> validator.validate([{"role": "assistant", "content": "Hi"}])
    Traceback (most recent call last):
    ...
    reference_agent.validation.InvalidHistoryError: messages.0: first message must use the "user" role
    """

    def __init__(self) -> None:
        self._messages: list[Any] = []
        self._state: _State | None = None

    def validate(
        self, messages: Sequence[Any], *, allow_prefill: bool = False, thinking: bool = False
    ) -> int:
        """Raise :class:`InvalidHistoryError` if the API would reject ``messages`` (as
        :func:`validate_messages`); return how many leading messages were already known
        valid (``0`` for a full check)."""
        state = self._state
        self._state = None
        start = 0
        if state is not None and type(messages) is list:
            known = self._messages
            n = len(known)
            if len(messages) >= n and (messages[:n] if len(messages) > n else messages) == known:
                start = n
            else:
                state = None
        else:
            state = None
        if start == 0:
            state = _validate(messages, allow_prefill, thinking)
        else:
            state = _scan(messages, start, state, allow_prefill)
            _finish(messages, state, allow_prefill, thinking)
        if not state.exempted:
            self._messages = list(messages)
            self._state = state
        return start

    def forget(self) -> None:
        """Check the next request in full (say, it failed a check made after this one)."""
        self._state = None
        self._messages = []


class _State:
    """Where a scan of a ``messages`` array stands after its last message: what the next
    message is checked against. A scan resumed from it checks exactly what a scan of the
    whole array from its first message would."""

    __slots__ = (
        "answered",
        "assistant_first",
        "exempted",
        "first_other",
        "last_kind",
        "last_pos",
        "pending",
        "results_phase",
        "role_of_turn",
        "seen_ids",
        "server_open",
        "size",
        "user_first_kind",
        "uses",
    )

    def __init__(self) -> None:
        self.size = 0  # messages scanned
        self.seen_ids: set[str] = set()
        self.role_of_turn = ""
        # assistant turn state
        self.uses: dict[str, int] = {}  # tool_use ids of the turn, in order, with their message
        self.server_open: dict[str, tuple[int, int]] = {}
        self.last_kind: Any = None
        self.last_pos = (0, 0)
        self.assistant_first: tuple[int, int, Any] = (0, 0, None)
        # user turn state
        self.pending: dict[str, int] = {}  # calls of the previous turn not yet answered
        self.answered: set[str] = set()
        self.results_phase = True
        self.first_other = ""
        self.user_first_kind: Any = None
        # The last message was let through empty as the final assistant message: were
        # more messages to follow, it would be an error.
        self.exempted = False


def _scan(
    messages: Sequence[Any], start: int, state: _State | None, allow_prefill: bool
) -> _State:
    """Check ``messages[start:]``, continuing ``state`` (the scan of ``messages[:start]``;
    updated in place) or from the first message; raise at the first violation."""
    if state is None:
        state = _State()
    last_index = len(messages) - 1
    seen_ids = state.seen_ids
    role_of_turn = state.role_of_turn
    uses = state.uses
    server_open = state.server_open
    last_kind = state.last_kind
    last_pos = state.last_pos
    assistant_first = state.assistant_first
    pending = state.pending
    answered = state.answered
    results_phase = state.results_phase
    first_other = state.first_other
    user_first_kind = state.user_first_kind
    exempted = False
    kind: Any = None

    # One pass over the blocks. Consecutive messages of one role form one turn, as the
    # API merges them; a turn is checked as its blocks stream by and closed when the
    # role changes. Paths keep the indices of the array as sent.
    for i in range(start, last_index + 1):
        message = messages[i]
        if type(message) is dict:
            role = message.get("role")
            content = message.get("content")
        else:
            role = _get(message, "role")
            content = _get(message, "content")
        if role != role_of_turn:
            if role != "user" and role != "assistant":
                raise InvalidHistoryError(
                    f"messages.{i}.role", "Input should be 'user' or 'assistant'"
                )
            if i == 0 and role != "user":
                raise InvalidHistoryError("messages.0", 'first message must use the "user" role')
            if role_of_turn == "assistant":
                if server_open or last_kind in _THINKING:
                    _close_assistant(server_open, last_kind, last_pos)
                pending = uses
                answered = set()
                results_phase = True
                first_other = ""
                user_first_kind = None
            elif role_of_turn == "user":
                if pending:
                    _close_user(pending)
                uses = {}
                server_open = {}
                last_kind = None
                assistant_first = (i, 0, None)
            role_of_turn = role

        if content is None:
            raise InvalidHistoryError(f"messages.{i}.content", "Field required")
        blocks = content if type(content) is list else _blocks(content)
        if blocks is None:
            if not content:
                blocks = ()
            elif not content.strip():
                raise InvalidHistoryError(
                    f"messages.{i}.content", "text content blocks must contain non-whitespace text"
                )
            else:
                blocks = ({"type": "text", "text": content},)
        if not blocks:
            if not (i == last_index and role == "assistant" and allow_prefill):
                raise InvalidHistoryError(
                    f"messages.{i}",
                    "all messages must have non-empty content except for the optional final "
                    "assistant message",
                )
            exempted = True

        if role == "assistant":
            for k, block in enumerate(blocks):
                if type(block) is not dict:
                    block = _as_dict(block)
                kind = block.get("type")
                if assistant_first[2] is None:
                    assistant_first = (i, k, kind)
                if kind == "text":
                    text = block.get("text")
                    if type(text) is not str or not text.strip():
                        _text_error(i, k, text)
                elif kind == "tool_use" or kind in _SERVER_USES:
                    block_id = block.get("id")
                    if type(block_id) is not str or block_id not in _GOOD_IDS:
                        _check_id(i, k, block_id)
                    if block_id in seen_ids:
                        raise InvalidHistoryError(
                            f"messages.{i}.content.{k}", "`tool_use` ids must be unique"
                        )
                    seen_ids.add(block_id)
                    tool_input = block.get("input")
                    if type(tool_input) is not dict and not isinstance(tool_input, Mapping):
                        raise InvalidHistoryError(
                            f"messages.{i}.content.{k}.input", "Input should be a valid dictionary"
                        )
                    if kind == "tool_use":
                        uses[block_id] = i
                    else:
                        server_open[block_id] = (i, k)
                else:
                    _check_other_assistant_block(i, k, kind, block, server_open)
            if blocks:
                last_kind = kind
                last_pos = (i, len(blocks) - 1)
        else:
            for k, block in enumerate(blocks):
                if type(block) is not dict:
                    block = _as_dict(block)
                kind = block.get("type")
                if user_first_kind is None:
                    user_first_kind = kind
                if kind == "tool_result":
                    use_id = block.get("tool_use_id")
                    if use_id in pending:
                        if not results_phase:
                            raise InvalidHistoryError(
                                f"messages.{i}.content.{k}",
                                "`tool_result` blocks must come first in the user message that "
                                "answers `tool_use` blocks, before any other content "
                                f"({first_other})",
                            )
                        del pending[use_id]
                        answered.add(use_id)
                    elif use_id in answered:
                        raise InvalidHistoryError(
                            f"messages.{i}.content.{k}",
                            "each tool_use must have a single result. Found multiple "
                            f"`tool_result` blocks with id: {use_id}",
                        )
                    else:
                        raise InvalidHistoryError(
                            f"messages.{i}.content.{k}", _UNEXPECTED.format(id=use_id)
                        )
                    result_content = block.get("content")
                    if result_content is not None and type(result_content) is not str:
                        _check_result_content(i, k, result_content)
                else:
                    if results_phase:
                        results_phase = False
                        first_other = f"found `{kind}` at messages.{i}.content.{k}"
                    if kind == "text":
                        text = block.get("text")
                        if type(text) is not str or not text.strip():
                            _text_error(i, k, text)
                    elif kind in _ASSISTANT_ONLY or (
                        type(kind) is str and kind.endswith("_tool_result")
                    ):
                        raise _wrong_role(i, k, kind, "user")
                    elif type(kind) is not str or not kind:
                        raise InvalidHistoryError(
                            f"messages.{i}.content.{k}.type", "Field required"
                        )

    state.size = last_index + 1
    state.role_of_turn = role_of_turn
    state.uses = uses
    state.server_open = server_open
    state.last_kind = last_kind
    state.last_pos = last_pos
    state.assistant_first = assistant_first
    state.pending = pending
    state.answered = answered
    state.results_phase = results_phase
    state.first_other = first_other
    state.user_first_kind = user_first_kind
    state.exempted = exempted
    return state


def _finish(messages: Sequence[Any], state: _State, allow_prefill: bool, thinking: bool) -> None:
    """The checks of the array's end (its last turn), after the scan of every message."""
    last_index = state.size - 1
    role_of_turn = state.role_of_turn
    pending = state.pending
    uses = state.uses
    if role_of_turn == "user":
        if pending:
            _close_user(pending)
        if thinking and state.user_first_kind == "tool_result":
            # Only a tool loop in progress (the final user turn answers tool calls)
            # requires the last assistant turn to open with its thinking.
            ai, ak, found = state.assistant_first
            if found not in _THINKING:
                raise InvalidHistoryError(
                    f"messages.{ai}.content.{ak}.type", _THINKING_FIRST.format(found=found)
                )
        return

    # The conversation ends with an assistant turn.
    if uses:
        # A tool_use nobody answered: the typical history of a run that died mid-call.
        i = next(iter(uses.values()))
        raise InvalidHistoryError(f"messages.{i}", _UNANSWERED.format(ids=", ".join(uses)))
    if not allow_prefill:
        raise InvalidHistoryError(
            f"messages.{last_index}",
            "This model does not support assistant message prefill. "
            "The conversation must end with a user message.",
        )
    _close_assistant(state.server_open, state.last_kind, state.last_pos)
    final_blocks = _blocks(_get(messages[last_index], "content")) or ()
    if final_blocks:
        k = len(final_blocks) - 1
        block = final_blocks[k]
        text = _get(block, "text")
        if _get(block, "type") == "text" and isinstance(text, str) and text != text.rstrip():
            raise InvalidHistoryError(
                f"messages.{last_index}.content.{k}",
                "final assistant content cannot end with trailing whitespace",
            )


def _check_id(i: int, k: int, block_id: Any) -> None:
    """Raise unless ``block_id`` matches ``_ID_PATTERN``; remember the ids that do."""
    if type(block_id) is not str or not _ID_PATTERN.match(block_id):
        raise InvalidHistoryError(
            f"messages.{i}.content.{k}.id",
            f"String should match pattern '{_ID_PATTERN.pattern}'",
        )
    if len(_GOOD_IDS) >= _GOOD_IDS_SIZE:
        _GOOD_IDS.clear()
    _GOOD_IDS.add(block_id)


def _text_error(i: int, k: int, text: Any) -> None:
    if not isinstance(text, str):
        raise InvalidHistoryError(f"messages.{i}.content.{k}.text", "Field required")
    if not text:
        raise InvalidHistoryError(
            f"messages.{i}.content.{k}", "text content blocks must be non-empty"
        )
    raise InvalidHistoryError(
        f"messages.{i}.content.{k}", "text content blocks must contain non-whitespace text"
    )


def _wrong_role(i: int, k: int, kind: str, role: str) -> InvalidHistoryError:
    return InvalidHistoryError(
        f"messages.{i}.content.{k}.type",
        f"Input tag '{kind}' found using 'type' does not match any of the expected tags "
        f'for a "{role}" message',
    )


def _check_other_assistant_block(
    i: int, k: int, kind: Any, block: dict[str, Any], server_open: dict[str, tuple[int, int]]
) -> None:
    """Assistant blocks off the hot path: thinking, server tool results, misplaced ones."""
    if kind == "thinking":
        signature = block.get("signature")
        if not isinstance(signature, str) or not signature:
            raise InvalidHistoryError(
                f"messages.{i}.content.{k}.thinking.signature", "Field required"
            )
        if not isinstance(block.get("thinking"), str):
            raise InvalidHistoryError(
                f"messages.{i}.content.{k}.thinking.thinking", "Field required"
            )
    elif kind == "redacted_thinking":
        data = block.get("data")
        if not isinstance(data, str) or not data:
            raise InvalidHistoryError(
                f"messages.{i}.content.{k}.redacted_thinking.data", "Field required"
            )
    elif isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result":
        use_id = block.get("tool_use_id")
        if use_id not in server_open:
            raise InvalidHistoryError(
                f"messages.{i}.content.{k}",
                f"`{kind}` block with id {use_id} was found without a corresponding "
                "server tool use block before it in the same message",
            )
        del server_open[use_id]
    elif kind in _USER_ONLY:
        raise _wrong_role(i, k, kind, "assistant")
    elif not isinstance(kind, str) or not kind:
        raise InvalidHistoryError(f"messages.{i}.content.{k}.type", "Field required")


def _close_assistant(
    server_open: dict[str, tuple[int, int]], last_kind: Any, last_pos: tuple[int, int]
) -> None:
    if server_open:
        block_id, (si, sk) = next(iter(server_open.items()))
        raise InvalidHistoryError(
            f"messages.{si}.content.{sk}",
            f"server tool use with id {block_id} was found without a corresponding result "
            "block in the same message",
        )
    if last_kind in _THINKING:
        raise InvalidHistoryError(
            f"messages.{last_pos[0]}.content.{last_pos[1]}",
            "The final block in an assistant message cannot be `thinking`.",
        )


def _close_user(pending: dict[str, int]) -> None:
    if pending:
        i = next(iter(pending.values()))
        raise InvalidHistoryError(f"messages.{i}", _UNANSWERED.format(ids=", ".join(pending)))


def _check_result_content(i: int, k: int, content: Any) -> None:
    inner = _blocks(content)
    if inner is None:
        return
    for j, item in enumerate(inner):
        if _get(item, "type") == "text":
            text = _get(item, "text")
            if not isinstance(text, str) or not text.strip():
                raise InvalidHistoryError(
                    f"messages.{i}.content.{k}.content.{j}",
                    "text content blocks must be non-empty"
                    if not text
                    else "text content blocks must contain non-whitespace text",
                )


#: A reply's thinking and calls in order, as :func:`thinking_shape` gives them.
Shape = Sequence[Sequence[str]]


def thinking_shape(content: Any) -> tuple[tuple[str, str], ...] | None:
    """A reply's thinking and calls, in order, when it holds thinking (``None`` otherwise):
    each ``thinking`` block by its signature, each ``redacted_thinking`` block by its data,
    each call (``tool_use``, server tool use) by its id; text is left out.

    >>> thinking_shape([{"type": "thinking", "thinking": "t", "signature": "s1"},
    ...     {"type": "tool_use", "id": "toolu_1"}, {"type": "redacted_thinking", "data": "d"},
    ...     {"type": "tool_use", "id": "toolu_2"}])
    (('thinking', 's1'), ('tool_use', 'toolu_1'), ('redacted_thinking', 'd'), ('tool_use', 'toolu_2'))
    >>> thinking_shape([{"type": "tool_use", "id": "toolu_1"}]) is None
    True
    """
    shape = _shape_of(content)
    return shape if any(kind in _THINKING for kind, _ in shape) else None


def _shape_of(content: Any) -> tuple[tuple[str, str], ...]:
    shape = []
    for block in _blocks(content) or ():
        kind = _get(block, "type")
        if kind == "thinking":
            shape.append(("thinking", str(_get(block, "signature"))))
        elif kind == "redacted_thinking":
            shape.append(("redacted_thinking", str(_get(block, "data"))))
        elif kind in _CALLS:
            shape.append((str(kind), str(_get(block, "id"))))
    return tuple(shape)


def remember_shape(served: dict[str, Shape], shape: Shape) -> None:
    """Index a reply's :func:`thinking_shape` in ``served`` by the id of each call in it,
    as :func:`check_interleaved_thinking` looks replies up.

    >>> served: dict[str, Shape] = {}
    >>> remember_shape(served, (("thinking", "s1"), ("tool_use", "toolu_1")))
    >>> list(served)
    ['toolu_1']
    """
    for kind, key in shape:
        if kind not in _THINKING:
            served[key] = shape


def check_interleaved_thinking(messages: Sequence[Any], served: Mapping[str, Shape]) -> None:
    """Raise :class:`InvalidHistoryError` as the API does, with interleaved thinking, when an
    assistant message of the open tool-use turn (the messages after the last user message
    that is not only tool results) does not bring back the thinking of the replies it
    holds exactly as they came: every ``thinking`` and ``redacted_thinking`` block,
    unchanged, in its place among the calls.

    ``served``: the :func:`thinking_shape` of each reply that thought, by the id of each
    call in it (replies known by no call of a message are not checked).

    >>> reply = [{"type": "thinking", "thinking": "t", "signature": "s1"},
    ...     {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    ...     {"type": "thinking", "thinking": "u", "signature": "s2"},
    ...     {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}}]
    >>> served = dict.fromkeys(["toolu_1", "toolu_2"], thinking_shape(reply))
    >>> results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i}
    ...     for i in ("toolu_1", "toolu_2")]}
    >>> go = {"role": "user", "content": "go"}
    >>> check_interleaved_thinking([go, {"role": "assistant", "content": reply}, results], served)
    >>> check_interleaved_thinking([go, {"role": "assistant", "content": reply[:2] + reply[3:]}, results], served)
    Traceback (most recent call last):
    ...
    reference_agent.validation.InvalidHistoryError: messages.1.content.2: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response.
    """
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        role = _get(message, "role")
        content = _get(message, "content")
        if role == "user":
            blocks = _blocks(content)
            if not blocks or any(_get(b, "type") != "tool_result" for b in blocks):
                return
            continue
        if role != "assistant":
            continue
        sent = _shape_of(content)
        expected: list[tuple[str, str]] = []
        seen: set[int] = set()
        for kind, key in sent:
            shape = None if kind in _THINKING else served.get(key)
            if shape is not None and id(shape) not in seen:
                seen.add(id(shape))
                expected.extend((str(k), str(v)) for k, v in shape)
        if expected and list(sent) != expected:
            n = next(
                (n for n, (a, b) in enumerate(zip(sent, expected, strict=False)) if a != b),
                min(len(sent), len(expected)),
            )
            raise InvalidHistoryError(f"messages.{i}.content.{_block_index(content, n)}", _MOVED_THINKING)


def _block_index(content: Any, n: int) -> int:
    """The index in ``content`` of its ``n``-th thinking or call block (one past the last
    block when there are not so many)."""
    blocks = _blocks(content) or ()
    seen = -1
    for k, block in enumerate(blocks):
        kind = _get(block, "type")
        if kind in _THINKING or kind in _CALLS:
            seen += 1
            if seen == n:
                return k
    return len(blocks)
