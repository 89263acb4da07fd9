"""Agents importable by name, for process mode (a child process imports them)."""

from __future__ import annotations

import functools

import reference_agent

from ..buggy_agents import checkpoint_after_result

#: The reference agent, with no backoff between its own save retries.
reference = functools.partial(reference_agent.run, retry_backoff=0.0)

#: Checkpoints after a tool's result instead of around its effect (caught by no_duplicate_effect).
buggy = checkpoint_after_result.run
