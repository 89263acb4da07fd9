"""Known-buggy agent: its iteration count (and so its budget) restarts at 0 on resume.

Caught by ``iteration_monotone``: the stored iteration goes backwards.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(budget_resets=True))
