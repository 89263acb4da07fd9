"""Known-buggy agent: on resume, drops the tool calls of the last reply that have no result.

The recovery of session libraries that "degrade gracefully": the ``tool_use`` blocks a
crash left unanswered are removed from the history (the reply too, when nothing else is
left) and the model is asked again. The history is valid, but the model's recorded
decision is thrown away and paid for again, and the model may decide otherwise; with a
tool that changes the world, the call it asks for again comes under a new id. Caught by
``recorded_work_not_redone`` even with read-only tools only.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(drop_unanswered=True))
