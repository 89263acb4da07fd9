"""Agents whose final answer is structured output, with a naive twin.

With ``output_config.format`` (what ``client.messages.parse(output_format=Model)`` sends for
a pydantic model), the API writes every text block as JSON of the schema, tool calls
still come as ``tool_use`` blocks, and the SDK's ``parse`` validates each text block with
the model (its bounds included, which the SDK moves into the schema's descriptions). The
sound designs, each on the zoo's write-ahead loop (the reply saved before its tools run):

- ``parse``: ``messages.parse`` with a pydantic ``output_format`` whose fields have bounds,
  an enum, a nested list and an optional field; the answer is ``parsed_output`` as JSON.
  The saved blocks leave out the SDK's own ``parsed_output`` field;
- ``json_config``: ``messages.create`` with ``output_config={"format": {"type":
  "json_schema", "schema": ...}}`` and a hand-written schema; the agent parses the final
  text with ``json.loads`` itself.

The twin (``parse`` without its write-ahead intents) runs a call a crash cut off again.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from ._base import Loop, agent

MODEL = "claude-sonnet-4-5"


class Item(BaseModel):
    what: str
    count: int = Field(ge=1, le=5)


class Resolution(BaseModel):
    """The structured answer: bounds the API does not enforce, which the SDK checks."""

    summary: str = Field(min_length=12, max_length=80)
    outcome: Literal["resolved", "escalated"]
    confidence: float = Field(gt=0, le=1)
    items: list[Item] = Field(min_length=2)
    note: str | None = None


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "steps": {"type": "integer"}},
    "required": ["answer", "steps"],
    "additionalProperties": False,
}


class Parse(Loop):
    """``messages.parse(output_format=Resolution)``; the answer is the parsed output."""

    _parsed: Resolution | None = None

    def reply(self) -> list[dict[str, Any]]:
        reply = self.client.messages.parse(
            model=MODEL, max_tokens=1024, messages=self.history, tools=self.tools.definitions(),
            output_format=Resolution,
        )
        self._parsed = reply.parsed_output
        # parsed_output is the SDK's field, not the API's: it is not sent back.
        return [b.model_dump(mode="json", exclude_none=True, exclude={"parsed_output"}) for b in reply.content]

    def complete(self, answer: str) -> str:
        if self._parsed is None:
            raise RuntimeError("the final reply has no structured answer")
        return super().complete(self._parsed.model_dump_json())


class JsonConfig(Loop):
    """``messages.create(output_config=...)`` with a schema dict; ``json.loads`` of the answer."""

    def reply(self) -> list[dict[str, Any]]:
        reply = self.client.messages.create(
            model=MODEL, max_tokens=1024, messages=self.history, tools=self.tools.definitions(),
            output_config={"format": {"type": "json_schema", "schema": SCHEMA}},
        )
        return [b.model_dump(mode="json", exclude_none=True) for b in reply.content]

    def complete(self, answer: str) -> str:
        data = json.loads(answer)
        if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
            raise RuntimeError(f"not the schema's answer: {answer!r}")
        return super().complete(data["answer"])


SOUND = {"parse": agent(Parse), "json_config": agent(JsonConfig)}
TWINS = {"parse_no_intent": agent(Parse, no_intent=True)}

