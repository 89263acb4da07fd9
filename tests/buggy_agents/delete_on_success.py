"""Known-buggy agent: deletes its checkpoint when the task succeeds.

Running the same task id again redoes everything. Caught by ``completed_idempotent``.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(delete_on_success=True))
