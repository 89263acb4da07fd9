"""Agents that read the response headers (``with_raw_response``) and handle API errors
themselves, with naive twins that give up on a model call that fails for good.

- ``raw``: ``client.with_options(max_retries=0).messages.with_raw_response.create(...)``;
  it keeps each reply's ``request-id`` in ``checkpoint.metadata``, paces itself on the
  ``anthropic-ratelimit-*`` headers (read as the API always sends them, without a
  default), waits ``retry-after`` on a 429 and backs off on 5xx and lost connections, six
  tries in all; then it raises, and the task is resumed.

The twins finish the task with an apology when the model API keeps failing, which only a
fault longer than their retries shows (the opt-in ``api_outage``):

- ``raw_gives_up``: the same loop, two tries, then the apology;
- ``sdk_gives_up``: the SDK's own retries (the default two), and the apology on the
  ``APIError`` it raises after them: the commonest form of this bug.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import anthropic

from ._base import Loop, agent

MODEL = "claude-sonnet-4-5"
APOLOGY = "Sorry, the service is busy; please try again later."


class ModelUnavailable(RuntimeError):
    """The model API failed on every try: stop, resumable."""


class RawResponse(Loop):
    attempts = 6
    #: Bug: after the tries, complete the task with this answer instead of raising.
    apology: str | None = None

    def pause(self, seconds: float) -> None:
        """Wait before the next try (not in tests: the fuzz's 429s say ``retry-after: 1``)."""
        self.waited = getattr(self, "waited", 0.0) + seconds

    def reply(self) -> list[dict[str, Any]]:
        raw_client = self.client.with_options(max_retries=0)
        for attempt in range(self.attempts):
            try:
                raw = raw_client.messages.with_raw_response.create(
                    model=MODEL, max_tokens=1024, messages=self.history, tools=self.tools.definitions()
                )
            except anthropic.RateLimitError as exc:
                wait = float(exc.response.headers["retry-after"])
            except (anthropic.InternalServerError, anthropic.APIConnectionError):
                wait = 0.5 * 2**attempt
            else:
                headers = raw.headers
                self.cp.metadata["request_ids"] = [*self.cp.metadata.get("request_ids", []), headers["request-id"]]
                if int(headers["anthropic-ratelimit-requests-remaining"]) < 1 or int(
                    headers["anthropic-ratelimit-tokens-remaining"]
                ) < 4096:
                    reset = dt.datetime.fromisoformat(headers["anthropic-ratelimit-requests-reset"].replace("Z", "+00:00"))
                    self.pause(max(0.0, (reset - dt.datetime.now(dt.timezone.utc)).total_seconds()))
                return [b.model_dump(mode="json", exclude_none=True) for b in raw.parse().content]
            self.pause(min(wait, 30.0))
        raise ModelUnavailable(f"the model API failed {self.attempts} times; resume later")

    def run(self) -> str:
        try:
            return super().run()
        except ModelUnavailable:
            if self.apology is None:
                raise
            return self.complete(self.apology)  # BUG: the task is closed, its work undone


class SdkGivesUp(Loop):
    """The SDK's retries; on the error they end with, the task is closed with an apology."""

    def run(self) -> str:
        try:
            return super().run()
        except anthropic.APIError:
            return self.complete(APOLOGY)  # BUG


SOUND = {"raw": agent(RawResponse)}
TWINS = {
    "raw_gives_up": agent(RawResponse, attempts=2, apology=APOLOGY),
    "sdk_gives_up": agent(SdkGivesUp),
}
