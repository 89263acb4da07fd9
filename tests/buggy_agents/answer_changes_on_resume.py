"""Known-buggy agent: a resumed run finishes with a different answer than an uninterrupted one.

Caught by ``same_answer``.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(answer_changes_on_resume=True))
