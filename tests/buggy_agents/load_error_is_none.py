"""Known-buggy agent: a failing checkpoint load counts as "no checkpoint".

After a store outage on load it starts the task again from zero (and, like the common
design, logs and ignores the failed writes that follow), redoing recorded work. Caught by
``recorded_work_not_redone`` (and, when an irreversible action was redone, by
``no_duplicate_effect``).
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(load_error_is_none=True))
