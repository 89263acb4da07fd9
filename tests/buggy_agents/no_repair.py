"""Known-buggy agent: resumes the stored history as it is, with no repair.

A crash between ``tool_use`` and ``tool_result`` leaves an unanswered ``tool_use``; the
next request is one the API rejects with HTTP 400. Caught by ``valid_sequence``.
"""

from __future__ import annotations

from ._loop import Bugs, make_agent

run = make_agent(Bugs(no_repair=True))
